#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mcprt {

/// Glob match for `mcp.allowed` / `mcp.excluded` entries: `*` matches any run
/// of characters (also none), `?` exactly one character (a whole UTF-8
/// sequence); everything else literally. Two-pointer matcher, no regex, no
/// exponential backtracking.
bool glob_match(std::string_view pattern, std::string_view text);

/// True if any pattern matches `name`.
bool matches_any(const std::vector<std::string>& patterns, std::string_view name);

/// The names two allow-lists both admit, as a list: entries of one list
/// matched by the other, plus every name in `names` (the configured servers)
/// that both lists match, which covers two overlapping globs such as
/// `srv-*` and `*-2`. Sorted, without duplicates.
std::vector<std::string> intersect_allow_lists(const std::vector<std::string>& a,
                                               const std::vector<std::string>& b,
                                               const std::vector<std::string>& names);

} // namespace mcprt
