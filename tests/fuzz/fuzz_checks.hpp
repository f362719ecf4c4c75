#pragma once

// What fuzz targets check of text they would show: shared so that every
// target means the same by "printable".

#include <cstddef>
#include <cstdlib>
#include <string_view>

#include "core/untrusted_text.hpp"

namespace mcprt::fuzz {

inline void require(bool ok) {
  if (!ok) std::abort();
}

/// Valid UTF-8 without control characters: what a log line or a terminal
/// may show as is (escape_for_display changes nothing but backslashes).
inline bool printable(std::string_view s) {
  std::size_t backslashes = 0;
  for (char c : s)
    backslashes += c == '\\';
  return mcprt::escape_for_display(s).size() == s.size() + backslashes;
}

} // namespace mcprt::fuzz
