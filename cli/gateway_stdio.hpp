#pragma once

// `mcprt gateway`: MCP over stdio for clients that only spawn servers,
// bridged to a streamable HTTP endpoint, by default the workspace daemon's
// /mcp (a daemon is started, detached, when none runs).

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace mcprt::cli {

struct gateway_flags {
  std::string workspace = ".";
  /// An explicit streamable HTTP endpoint instead of the daemon's /mcp.
  std::string url;
  /// The bearer token to send; passed on to a daemon the gateway starts.
  std::string token_file;
  /// A tool set of the settings (`mcp.toolSets`): the daemon's /mcp/<set>.
  std::string set;
  /// `mcprt serve` flags (as typed, without --workspace and --token-file)
  /// for a daemon the gateway starts; a running daemon keeps its own.
  std::vector<std::string> serve_args;
  /// How long a daemon the gateway started has to write a usable
  /// daemon.json.
  std::chrono::milliseconds daemon_start_timeout{60000};
};

/// Runs the bridge until stdin ends (0), a signal (0), or the session is
/// gone (1); 1 when no endpoint can be reached at start, 2 on bad flags.
int run_gateway(const gateway_flags& f);

/// The bridge alone, for an endpoint already chosen: reads stdin, writes
/// stdout, logs to stderr. `token` empty: no Authorization header.
int run_stdio_bridge(const std::string& url, const std::string& token);

namespace gateway_detail {

/// A stdin line that is not a JSON-RPC message to forward: the error
/// response to write instead (one line, no newline), else "".
/// `oversized`: the line was longer than the limit; `line` is its start.
std::string reject_line(const std::string& line, bool oversized, std::size_t limit);

/// Writes one message as one line: CR and LF (only whitespace in valid
/// JSON) become spaces.
std::string one_line(std::string message);

} // namespace gateway_detail

} // namespace mcprt::cli
