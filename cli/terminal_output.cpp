#include "cli/terminal_output.hpp"

#include <ostream>

#include "core/untrusted_text.hpp"

namespace mcprt::cli {

std::string terminal_text(const std::string& s) {
  std::string out, piece;
  for (char ch : s) {
    if (ch == '\n' || ch == '\t') {
      out += escape_for_display(piece);
      out += ch;
      piece.clear();
    } else {
      piece += ch;
    }
  }
  return out + escape_for_display(piece);
}

namespace {

// `s` unchanged when `escape` would only double its backslashes (nothing in
// it that a terminal acts on), else escaped: JSON and text escaped already
// stay readable.
template <class Escape>
std::string escaped_if_needed(const std::string& s, Escape escape) {
  std::string doubled;
  for (char c : s) {
    doubled += c;
    if (c == '\\') doubled += c;
  }
  auto escaped = escape(s);
  return escaped == doubled ? s : escaped;
}

// nlohmann escapes C0 controls in strings but passes DEL, C1 controls and
// bidirectional overrides through.
std::string terminal_json(const nlohmann::json& j, int indent) {
  return escaped_if_needed(dump_json(j, indent), terminal_text);
}

} // namespace

std::string terminal_line(std::string s) {
  for (auto& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return escaped_if_needed(s, escape_for_display);
}

int print_tool_result(const nlohmann::json& j, bool as_json, std::ostream& out) {
  if (as_json || !j.is_object() || !j.contains("content") || !j["content"].is_array()) {
    out << terminal_json(j, 2) << "\n";
  } else {
    for (auto& part : j["content"]) {
      // value() would throw on a non-string "type": a server's JSON is checked, not trusted.
      auto type = part.is_object() ? part.find("type") : part.end();
      bool text = part.is_object() && type != part.end() && *type == "text" && part.contains("text")
                  && part["text"].is_string();
      if (text)
        out << terminal_text(part["text"].get<std::string>()) << "\n";
      else out << terminal_json(part, -1) << "\n";
    }
  }
  return j.is_object() && j.contains("isError") && j["isError"] == true ? 1 : 0;
}

} // namespace mcprt::cli
