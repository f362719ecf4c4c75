#pragma once

// How `runtime::authorize` runs, and the listeners OAuth requests must
// never reach. Part of the installed API (mcprt/runtime.hpp includes it).

#include <chrono>
#include <optional>
#include <string>

namespace mcprt {

/// A host:port this process listens on (the daemon's HTTP API).
struct listen_endpoint {
  std::string host; // a name or an address (IPv6 without brackets)
  int port = 0;
};

/// How an interactive authorization runs.
struct authorize_options {
  /// Run with the authorization URL as its last argument, by the process
  /// that authorizes (empty: nobody opens it; the caller shows the URL).
  std::string browser_command;
  /// How long to wait for the redirect after the URL is known.
  std::chrono::milliseconds callback_timeout{300000};
  /// How long discovery and registration may take before the URL is known.
  std::chrono::milliseconds url_timeout{30000};
  /// When set, the whole authorization ends by then: discovery,
  /// registration, the wait for the redirect and the token request share
  /// it (`mcprt auth --timeout-ms`).
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

} // namespace mcprt
