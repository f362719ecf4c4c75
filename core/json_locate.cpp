#include "core/json_locate.hpp"

namespace mcprt {

text_position position_of(std::string_view text, std::size_t offset) {
  text_position pos;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++pos.line;
      pos.column = 1;
    } else {
      ++pos.column;
    }
  }
  return pos;
}

namespace {

// A forgiving scanner over text that nlohmann already accepted: it only has
// to skip values correctly, not validate them.
struct scanner {
  std::string_view s;
  std::size_t i = 0;

  void skip_ws() {
    for (;;) {
      while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        ++i;
      if (i + 1 < s.size() && s[i] == '/' && s[i + 1] == '/') {
        while (i < s.size() && s[i] != '\n')
          ++i;
      } else if (i + 1 < s.size() && s[i] == '/' && s[i + 1] == '*') {
        auto end = s.find("*/", i + 2);
        i = end == std::string_view::npos ? s.size() : end + 2;
      } else {
        return;
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

  // Reads a string literal and returns its decoded content.
  std::string read_string() {
    std::string out;
    ++i; // opening quote
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
    ++i; // closing quote
    return out;
  }

  void skip_value() {
    skip_ws();
    if (i >= s.size()) return;
    char c = s[i];
    if (c == '"') {
      read_string();
    } else if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++i;
      skip_ws();
      while (i < s.size() && s[i] != close) {
        if (c == '{') {
          skip_ws();
          read_string();
          skip_ws();
          ++i; // ':'
        }
        skip_value();
        skip_ws();
        if (i < s.size() && s[i] == ',') ++i;
        skip_ws();
      }
      ++i;
    } else {
      while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' '
             && s[i] != '\n' && s[i] != '\r' && s[i] != '\t' && s[i] != '/')
        ++i;
    }
  }

  // Positions `i` on the value for `key` (object) or index (array).
  bool enter(const std::string& token) {
    skip_ws();
    if (i >= s.size()) return false;
    if (s[i] == '{') {
      // The parser keeps the last of duplicated keys, so the last one is the
      // value that was validated.
      ++i;
      std::optional<std::size_t> found;
      for (;;) {
        skip_ws();
        if (i >= s.size() || s[i] == '}') break;
        std::string key = read_string();
        skip_ws();
        ++i; // ':'
        skip_ws();
        if (key == token) found = i;
        skip_value();
        skip_ws();
        if (i < s.size() && s[i] == ',') ++i;
      }
      if (!found) return false;
      i = *found;
      return true;
    }
    if (s[i] == '[') {
      std::size_t want = 0;
      for (char ch : token) {
        if (ch < '0' || ch > '9') return false;
        want = want * 10 + static_cast<std::size_t>(ch - '0');
      }
      ++i;
      for (std::size_t n = 0;; ++n) {
        skip_ws();
        if (i >= s.size() || s[i] == ']') return false;
        if (n == want) return true;
        skip_value();
        skip_ws();
        if (i < s.size() && s[i] == ',') ++i;
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

} // namespace mcprt
