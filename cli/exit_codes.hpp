#pragma once

// The exit statuses of every mcprt command (docs/cli.md): 0 when it did
// what was asked, 1 when it could not, 2 when it was asked wrongly.
namespace mcprt::cli {

inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;
inline constexpr int exit_usage = 2;

} // namespace mcprt::cli
