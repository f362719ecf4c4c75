#include "core/json_locate.hpp"

#include <algorithm>
#include <climits>

namespace mcprt {

text_position position_of(std::string_view text, std::size_t offset) {
  text_position pos;
  auto end = std::min(offset, text.size());
  for (std::size_t i = 0; i < end; ++i) {
    auto b = static_cast<unsigned char>(text[i]);
    if (b == '\n') {
      if (pos.line < INT_MAX) ++pos.line;
      pos.column = 1;
    } else if ((b & 0xC0) != 0x80 && pos.column < INT_MAX) {
      ++pos.column; // a continuation byte belongs to the character before it
    }
  }
  return pos;
}

namespace {

// A forgiving scanner: it only has to find values in text the parser
// accepted, but settings text is hostile, so on any other text it must still
// end (every loop consumes input or stops) and must not recurse (nesting is
// counted, not descended into).
struct scanner {
  std::string_view s;
  std::size_t i = 0;

  bool at_end() const { return i >= s.size(); }

  bool at_comment() const {
    return i + 1 < s.size() && s[i] == '/' && (s[i + 1] == '/' || s[i + 1] == '*');
  }

  void skip_ws() {
    for (;;) {
      while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        ++i;
      if (!at_comment()) return;
      if (s[i + 1] == '/') {
        while (i < s.size() && s[i] != '\n')
          ++i;
      } else {
        auto end = s.find("*/", i + 2);
        i = end == std::string_view::npos ? s.size() : end + 2;
      }
    }
  }

  static unsigned hex4(std::string_view h) {
    unsigned v = 0;
    for (char c : h) {
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
    }
    return v;
  }

  static void put_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  // At `\u`: decodes one escape (or a surrogate pair) as nlohmann does, so
  // keys compare equal to the parsed ones. Returns the bytes consumed.
  std::size_t read_unicode_escape(std::string& out) {
    if (i + 6 > s.size()) return s.size() - i;
    unsigned cp = hex4(s.substr(i + 2, 4));
    std::size_t used = 6;
    if (cp >= 0xd800 && cp <= 0xdbff && i + 12 <= s.size() && s[i + 6] == '\\' && s[i + 7] == 'u') {
      unsigned lo = hex4(s.substr(i + 8, 4));
      if (lo >= 0xdc00 && lo <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        used = 12;
      }
    }
    put_utf8(out, cp);
    return used;
  }

  // At a string literal: its decoded content, or nullopt when there is no
  // string here or it does not end.
  std::optional<std::string> read_string() {
    if (at_end() || s[i] != '"') return std::nullopt;
    std::string out;
    ++i;
    while (i < s.size() && s[i] != '"') {
      if (s[i] == '\\' && i + 1 < s.size()) {
        char e = s[i + 1];
        switch (e) {
          case 'n': out.push_back('\n'); break;
          case 't': out.push_back('\t'); break;
          case 'r': out.push_back('\r'); break;
          case 'b': out.push_back('\b'); break;
          case 'f': out.push_back('\f'); break;
          case 'u': {
            i += read_unicode_escape(out);
            continue;
          }
          default: out.push_back(e);
        }
        i += 2;
      } else {
        out.push_back(s[i++]);
      }
    }
    if (at_end()) return std::nullopt;
    ++i; // closing quote
    return out;
  }

  // Like read_string, without building the content.
  bool skip_string() {
    if (at_end() || s[i] != '"') return false;
    for (++i; i < s.size() && s[i] != '"'; ++i)
      if (s[i] == '\\') ++i;
    if (at_end()) return false;
    ++i;
    return true;
  }

  static bool ends_scalar(char c) {
    return c == ',' || c == '}' || c == ']' || c == ':' || c == '"' || c == '{' || c == '['
           || c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '/';
  }

  // Skips one value; false when there is none here (the text is not JSON).
  bool skip_value() {
    skip_ws();
    if (at_end()) return false;
    char c = s[i];
    if (c == '"') return skip_string();
    if (c == '{' || c == '[') {
      std::size_t depth = 0;
      while (!at_end()) {
        char ch = s[i];
        if (ch == '"') {
          if (!skip_string()) return false;
          continue;
        }
        if (at_comment()) {
          skip_ws();
          continue;
        }
        ++i;
        if (ch == '{' || ch == '[') ++depth;
        else if ((ch == '}' || ch == ']') && --depth == 0) return true;
      }
      return false;
    }
    auto start = i;
    while (!at_end() && !ends_scalar(s[i]))
      ++i;
    return i > start;
  }

  // Positions `i` on the value for `key` (object) or index (array).
  bool enter(const std::string& token) {
    skip_ws();
    if (at_end()) return false;
    if (s[i] == '{') {
      // The parser keeps the last of duplicated keys, so the last one is the
      // value that was validated.
      ++i;
      std::optional<std::size_t> found;
      for (;;) {
        skip_ws();
        if (at_end()) return false;
        if (s[i] == '}') break;
        auto key = read_string();
        if (!key) return false;
        skip_ws();
        if (at_end() || s[i] != ':') return false;
        ++i;
        skip_ws();
        if (*key == token) found = i;
        if (!skip_value()) return false;
        skip_ws();
        if (!at_end() && s[i] == ',') ++i;
      }
      if (!found) return false;
      i = *found;
      return true;
    }
    if (s[i] == '[') {
      // Nineteen digits and more could overflow; no array is that long.
      if (token.empty() || token.size() > 18) return false;
      std::size_t want = 0;
      for (char ch : token) {
        if (ch < '0' || ch > '9') return false;
        want = want * 10 + static_cast<std::size_t>(ch - '0');
      }
      ++i;
      for (std::size_t n = 0;; ++n) {
        skip_ws();
        if (at_end() || s[i] == ']') return false;
        if (n == want) return true;
        if (!skip_value()) return false;
        skip_ws();
        if (!at_end() && s[i] == ',') ++i;
      }
    }
    return false;
  }
};

} // namespace

std::optional<std::size_t> locate_json_value(std::string_view text,
                                             const std::vector<std::string>& path) {
  scanner sc{text, 0};
  // A UTF-8 byte-order mark is not JSON; editors on some systems write one.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") sc.i = 3;
  for (auto& token : path)
    if (!sc.enter(token)) return std::nullopt;
  sc.skip_ws();
  return sc.i;
}

std::optional<std::string_view> json_value_text(std::string_view text,
                                                const std::vector<std::string>& path) {
  auto start = locate_json_value(text, path);
  if (!start) return std::nullopt;
  scanner sc{text, *start};
  if (!sc.skip_value()) return std::nullopt;
  return text.substr(*start, sc.i - *start);
}

std::optional<std::vector<std::string_view>> json_array_elements(std::string_view text) {
  scanner sc{text, 0};
  sc.skip_ws();
  if (sc.at_end() || text[sc.i] != '[') return std::nullopt;
  ++sc.i;
  std::vector<std::string_view> out;
  sc.skip_ws();
  if (!sc.at_end() && text[sc.i] == ']') {
    ++sc.i;
    sc.skip_ws();
    if (!sc.at_end()) return std::nullopt;
    return out;
  }
  for (;;) {
    sc.skip_ws();
    auto start = sc.i;
    if (!sc.skip_value()) return std::nullopt;
    out.push_back(text.substr(start, sc.i - start));
    sc.skip_ws();
    if (sc.at_end()) return std::nullopt;
    if (text[sc.i] == ',') {
      ++sc.i;
      continue;
    }
    if (text[sc.i] != ']') return std::nullopt;
    ++sc.i;
    sc.skip_ws();
    if (!sc.at_end()) return std::nullopt;
    return out;
  }
}

} // namespace mcprt
