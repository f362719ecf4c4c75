#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mcprt {

/// Glob match for `mcp.allowed` / `mcp.excluded` entries: `*` matches any run
/// of characters (also none), `?` exactly one; everything else literally.
/// Linear-time two-pointer matcher, no regex, no backtracking blow-up.
bool glob_match(std::string_view pattern, std::string_view text);

/// True if any pattern matches `name`.
bool matches_any(const std::vector<std::string>& patterns, std::string_view name);

} // namespace mcprt
