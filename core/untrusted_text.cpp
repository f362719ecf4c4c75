#include "core/untrusted_text.hpp"

#include <cstdint>
#include <cstring>

namespace mcprt {

using nlohmann::json;

namespace {

/// One step of UTF-8 decoding at `i`: a well-formed sequence (`valid`,
/// with its code point) or the maximal ill-formed subpart starting there
/// (at least one byte), per the Unicode standard's table of well-formed
/// byte sequences.
struct utf8_step {
  std::size_t length = 1;
  char32_t code_point = 0;
  bool valid = false;
};

utf8_step decode_at(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b0 = byte(i);
  if (b0 < 0x80) return {1, b0, true};
  std::size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF; // range of the second byte
  char32_t cp = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F; // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F; // nothing above U+10FFFF
  } else {
    return {1, 0, false};
  }
  std::size_t k = 1;
  for (; k <= need; ++k) {
    if (i + k >= s.size()) return {k, 0, false};
    unsigned char b = byte(i + k);
    unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) return {k, 0, false};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {need + 1, cp, true};
}

/// Deepest nesting of arrays and objects in `text`, stopping at the first
/// bracket that goes past `max_depth` (its offset is returned). Strings and,
/// when allowed, comments are skipped; malformed text is left to the parser.
std::optional<std::size_t> too_deep_at(std::string_view text, std::size_t max_depth, bool comments) {
  std::size_t depth = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
    } else if (comments && c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n')
        ++i;
    } else if (comments && c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      auto end = text.find("*/", i + 2);
      if (end == std::string_view::npos) return std::nullopt;
      i = end + 1;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

/// nlohmann's message without its prefix ("[json.exception.parse_error.101]
/// parse error at line 1, column 5: ") and without "; last read: '…'",
/// which quotes the input. What is left is nlohmann's own vocabulary.
std::string parse_error_message(const std::string& what) {
  std::string msg = what;
  if (auto p = msg.find("parse error"); p != std::string::npos)
    if (auto colon = msg.find(": ", p); colon != std::string::npos) msg = msg.substr(colon + 2);
  if (auto lr = msg.find("; last read: "); lr != std::string::npos) msg.resize(lr);
  // Whatever else nlohmann might one day put there stays printable.
  return escape_for_display(msg);
}

/// Maps an offset in the text after replacement back to the original.
std::size_t original_offset(std::string_view original, std::size_t replaced_offset) {
  std::size_t out = 0, in = 0;
  while (in < original.size() && out < replaced_offset) {
    auto st = decode_at(original, in);
    out += st.valid ? st.length : 3; // U+FFFD is three bytes
    in += st.length;
  }
  return in;
}

} // namespace

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    // Protocol text is nearly all ASCII: eight bytes at a time until a
    // byte with its high bit set.
    while (i + 8 <= text.size()) {
      std::uint64_t word;
      std::memcpy(&word, text.data() + i, 8);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= text.size()) break;
    auto st = decode_at(text, i);
    if (!st.valid) return i;
    i += st.length;
  }
  return std::nullopt;
}

std::string replace_invalid_utf8(std::string_view text) {
  auto bad = first_invalid_utf8(text);
  if (!bad) return std::string(text);
  std::string out(text.substr(0, *bad));
  out.reserve(text.size() + 8);
  for (std::size_t i = *bad; i < text.size();) {
    auto st = decode_at(text, i);
    if (st.valid) out.append(text.substr(i, st.length));
    else out.append("\xEF\xBF\xBD");
    i += st.length;
  }
  return out;
}

std::string escape_for_display(std::string_view text) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    auto st = decode_at(text, i);
    if (!st.valid) {
      for (std::size_t k = 0; k < st.length; ++k) {
        auto b = static_cast<unsigned char>(text[i + k]);
        out += "\\x";
        out += hex[b >> 4];
        out += hex[b & 15];
      }
      i += st.length;
      continue;
    }
    char32_t cp = st.code_point;
    bool bidi = (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200E || cp == 0x200F
                || cp == 0x061C;
    if (cp == '\\') {
      out += "\\\\";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7F) {
      out += "\\x";
      out += hex[cp >> 4];
      out += hex[cp & 15];
    } else if ((cp >= 0x80 && cp <= 0x9F) || bidi || cp == 0x2028 || cp == 0x2029) {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4)
        out += hex[(cp >> shift) & 15];
    } else {
      out.append(text.substr(i, st.length));
    }
    i += st.length;
  }
  return out;
}

std::string dump_json(const json& j, int indent) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

bounded_json parse_bounded_json(std::string_view text, const json_limits& limits) {
  bounded_json out;
  auto fail = [&](std::size_t offset, std::string message) {
    out.value = json();
    out.error = json_error{offset, std::move(message)};
    return out;
  };
  if (text.size() > limits.max_bytes)
    return fail(limits.max_bytes, "larger than " + std::to_string(limits.max_bytes) + " bytes");
  // nlohmann's lexer takes a NUL byte for the end of the input and would
  // ignore whatever follows it; JSON text never holds a raw one.
  if (auto nul = text.find('\0'); nul != std::string_view::npos) return fail(nul, "a NUL byte (JSON text holds none)");
  std::string replaced;
  std::string_view body = text;
  if (auto bad = first_invalid_utf8(text)) {
    if (!limits.replace_invalid_utf8) return fail(*bad, "invalid UTF-8 (the text must be UTF-8)");
    replaced = replace_invalid_utf8(text);
    body = replaced;
  }
  if (auto at = too_deep_at(body, limits.max_depth, limits.allow_comments)) {
    auto offset = replaced.empty() ? *at : original_offset(text, *at);
    return fail(offset, "nested deeper than " + std::to_string(limits.max_depth) + " levels");
  }
  try {
    out.value = json::parse(body.begin(), body.end(), nullptr, true, limits.allow_comments);
  } catch (const json::parse_error& e) {
    std::size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    if (!replaced.empty()) offset = original_offset(text, offset);
    return fail(std::min(offset, text.size()), parse_error_message(e.what()));
  } catch (const json::exception& e) {
    // Not expected from parse, but nothing from outside may escape as an exception.
    return fail(0, "invalid JSON");
  }
  return out;
}

} // namespace mcprt
