#include "cli/terminal_output.hpp"

#include <cstdint>
#include <cstdio>
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

bool acts_on_terminal(uint32_t cp) {
  return cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == 0x61c || cp == 0x200e || cp == 0x200f
         || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x2028 || cp == 0x2029;
}

} // namespace

// nlohmann escapes C0 controls in strings but passes DEL, C1 controls and
// bidirectional overrides through. Written as \uXXXX instead, the output is
// the same JSON and safe on a terminal. A dump's text is valid UTF-8, and
// these characters can only sit inside strings.
std::string terminal_safe_json(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    std::size_t len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    if (i + len > text.size()) len = text.size() - i;
    uint32_t cp = len == 1 ? c : c & (0xff >> (len + 1));
    for (std::size_t k = 1; k < len; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3f);
    if (acts_on_terminal(cp)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(text, i, len);
    }
    i += len;
  }
  return out;
}

std::string terminal_json(const nlohmann::json& j, int indent) { return terminal_safe_json(dump_json(j, indent)); }

std::string terminal_json(const nlohmann::ordered_json& j, int indent) {
  return terminal_safe_json(j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
}

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
