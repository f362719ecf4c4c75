#include "core/patterns.hpp"

#include <algorithm>

namespace mcprt {

namespace {

// Length of the UTF-8 sequence starting at `s[i]`; 1 for invalid bytes so
// that any input still makes progress.
std::size_t char_len(std::string_view s, std::size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
  if (i + n > s.size()) return 1;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 1;
  return n;
}

} // namespace

bool glob_match(std::string_view p, std::string_view t) {
  // Every pattern position but `*` consumes at least one byte of text. A
  // retry that leaves fewer bytes than the rest of the pattern needs cannot
  // match, nor can any later one (the text only gets shorter): stopping
  // there bounds the work by (|t| - need) * need instead of |t| * |p|, which
  // matters because names and patterns come from settings files.
  std::size_t need_total = 0;
  for (char c : p)
    need_total += c != '*';
  if (t.size() < need_total) return false;
  std::size_t pi = 0, ti = 0, seen = 0; // seen: non-`*` positions before pi
  std::size_t star = std::string_view::npos, resume = 0, seen_at_star = 0;
  while (ti < t.size()) {
    if (pi < p.size() && p[pi] == '?') {
      ++pi;
      ++seen;
      ti += char_len(t, ti);
    } else if (pi < p.size() && p[pi] != '*' && p[pi] == t[ti]) {
      ++pi;
      ++seen;
      ++ti;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      seen_at_star = seen;
      resume = ti;
    } else if (star != std::string_view::npos) {
      // Let the last `*` swallow one more character and retry from there.
      pi = star + 1;
      seen = seen_at_star;
      resume += char_len(t, resume);
      ti = resume;
      if (t.size() - ti < need_total - seen) return false;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*')
    ++pi;
  return pi == p.size();
}

bool matches_any(const std::vector<std::string>& patterns, std::string_view name) {
  for (auto& p : patterns)
    if (glob_match(p, name)) return true;
  return false;
}

std::vector<std::string> intersect_allow_lists(const std::vector<std::string>& a,
                                               const std::vector<std::string>& b,
                                               const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (auto& x : a)
    if (matches_any(b, x)) out.push_back(x);
  for (auto& x : b)
    if (matches_any(a, x)) out.push_back(x);
  for (auto& n : names)
    if (matches_any(a, n) && matches_any(b, n)) out.push_back(n);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

} // namespace mcprt
