#pragma once

// `mcprt gateway`: MCP over stdio for clients that only spawn servers,
// bridged to the workspace daemon's /mcp (a daemon is started, detached,
// when none runs). Its arguments are a repository's to write.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace mcprt::cli {

struct gateway_flags {
  std::string workspace = ".";
  /// A tool set of the settings (`mcp.toolSets`): the daemon's /mcp/<set>.
  std::string set;
  /// `mcprt serve` flags, as typed, for a daemon the gateway starts; only
  /// those of gateway_serve_flags(). A running daemon keeps its own.
  std::vector<std::string> serve_args;
  /// How long a daemon the gateway started has to write a usable
  /// daemon.json.
  std::chrono::milliseconds daemon_start_timeout{60000};
};

/// The `mcprt serve` flags a gateway takes (beside --workspace and --set)
/// and passes on to a daemon it starts: each selects among or narrows what
/// the owner's own files allow. Every other serve flag is refused.
const std::vector<std::string>& gateway_serve_flags();

/// Why `mcprt gateway` does not take `flag`, and where the owner decides
/// what it would.
std::string gateway_refusal(const std::string& flag);

/// The workspace a gateway started in the current directory serves for
/// `requested`: its canonical path when that is the working directory or
/// one of its ancestors, after resolving links; else nullopt and `error`.
std::optional<std::string> gateway_workspace(const std::string& requested, std::string& error);

/// Runs the bridge until stdin ends (0), a signal (0), or the session is
/// gone (1); 1 when the daemon cannot be found, started or proven, 2 on
/// bad flags.
int run_gateway(const gateway_flags& f);

} // namespace mcprt::cli
