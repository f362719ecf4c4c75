#pragma once

// The commands that connect to one MCP server without a daemon: `inspect`
// and the one-shot form of `call`. Both run the connection actor the
// runtime uses, so what they see is what the runtime would see.

#include <optional>
#include <string>
#include <vector>

namespace mcprt::cli {

/// The one server a one-shot command talks to, and what mcprt offers it.
struct one_shot_target {
  std::vector<std::string> command; // stdio: program and arguments
  std::optional<std::string> http_url;
  std::optional<std::string> sse_url; // legacy HTTP+SSE (2024-11-05)
  std::vector<std::string> headers; // NAME:VALUE; values are secrets
  std::optional<long long> timeout_ms; // discovery
  std::optional<long long> call_timeout_ms;
  std::string on_elicitation = "decline";
  std::vector<std::string> roots; // directories, as given
  /// OAuth for --http: the settings' `oauth` object as JSON text, and the
  /// command that opens the authorization URL (default: print it only).
  std::optional<std::string> oauth;
  std::optional<std::string> browser;
  std::optional<long long> auth_timeout_ms;
};

struct inspect_options {
  one_shot_target target;
  bool json = false;
};

struct one_shot_call_options {
  one_shot_target target;
  std::string tool;
  std::string arguments; // a JSON object; "" means {}
  bool json = false;
};

/// Connects once, prints server, protocol, tools and prompts, shuts the
/// server down. Returns the process exit code (0 ok, 1 failed, 2 usage).
int run_inspect(const inspect_options& opts);

/// Connects once, calls one tool, prints its result, shuts the server
/// down. 0 on a result, 1 when the tool reports isError or the connection
/// or call fails, 2 on a usage error.
int run_one_shot_call(const one_shot_call_options& opts);

} // namespace mcprt::cli
