#include "core/patterns.hpp"

namespace mcprt {

bool glob_match(std::string_view p, std::string_view t) {
  std::size_t pi = 0, ti = 0;
  std::size_t star = std::string_view::npos, resume = 0;
  while (ti < t.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == t[ti])) {
      ++pi;
      ++ti;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      resume = ti;
    } else if (star != std::string_view::npos) {
      // Let the last `*` swallow one more character and retry from there.
      pi = star + 1;
      ti = ++resume;
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

} // namespace mcprt
