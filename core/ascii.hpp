#pragma once

// ASCII-only text rules for protocol text (header names, media types, hosts,
// JSON-RPC ids): locale-independent, and never touching non-ASCII bytes.

#include <string>
#include <string_view>

namespace mcprt {

inline char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    c = ascii_lower(c);
  return out;
}

inline bool ascii_iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

/// `s` without leading and trailing spaces, tabs, CRs and LFs.
inline std::string_view trim_space(std::string_view s) {
  auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && ws(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && ws(s.back()))
    s.remove_suffix(1);
  return s;
}

/// RFC 3986 percent-encoding: unreserved characters (letters, digits,
/// `-._~`) and those in `keep_also` stay, every other byte becomes %XX.
inline std::string percent_encode(std::string_view s, std::string_view keep_also = {}) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.'
                || c == '_' || c == '~' || keep_also.find(static_cast<char>(c)) != std::string_view::npos;
    if (keep) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

} // namespace mcprt
