#pragma once

// `mcprt serve`: the daemon. The commands that talk to it are in
// cli/client.hpp.

#include <optional>
#include <string>
#include <vector>

namespace mcprt::cli {

struct serve_flags {
  std::string workspace = ".";
  std::string home;
  std::string profile = "mcprt";
  std::string mcp_config;
  std::optional<std::string> allowed_names;
  std::optional<std::string> budget;      // as typed: validated with the environment
  std::optional<std::string> budget_mode; // as typed
  bool no_pool = false;
  bool untrusted = false;
  long long debounce_ms = 300;
  std::string listen = "127.0.0.1:0";
  std::string token_file;
  std::string log_level = "info";
  std::string log_format = "text";
  long long threads = 0; // scheduler workers; 0: one per core
  std::string scheduler = "mcprt"; // mcprt's fair scheduler, or "caf": CAF's work stealing
  // What a client controls is bounded (README "The daemon" lists them).
  std::vector<std::string> allow_origins;
  long long max_connections = 256;
  long long max_streams = 64;
  long long max_calls_per_server = 16;
  long long io_poll_us = 50; // runtime_options::io_poll_before_sleep
  long long request_timeout_ms = 10000;
  long long max_body_bytes = 1 << 20;
  // Servers' requests for the host: answered over HTTP with "ask".
  std::string elicitation;            // decline | accept-defaults | ask; empty: the runtime's default
  std::string sampling = "off";       // off | ask
  long long host_request_timeout_ms = 120000;
  // The gateway: MCP at /mcp for any client.
  bool no_gateway = false;
  long long gateway_idle_ms = 30LL * 60 * 1000; // a client session with no request this long ends
  // Open gateway sessions; 0: 4,096 with the pool, 8 without (then every
  // session spawns its own servers).
  long long max_gateway_sessions = 0;
  // The fleet budget: HOST:PORT of `mcprt budget-server`.
  std::optional<std::string> fleet_budget;
  // TLS for both (always): a CA of the fleet's, or none for the owner's own identity.
  std::string caf_tls_cert, caf_tls_key, caf_tls_ca;
  // Remote hosts: publish the workspace over CAF's middleman.
  std::optional<int> caf_port;
  std::string caf_host = "127.0.0.1";
  // Not in --help: test knobs.
  long long keepalive_ms = 15000;
  long long sse_queue = 1024;
  long long sndbuf = 0; // SO_SNDBUF of every connection: a slow link, for tests
  long long event_history = 1024; // events the bus keeps for Last-Event-ID replays
};

/// Runs the daemon until SIGINT / SIGTERM. 0 after a clean stop, 1 when it
/// cannot start, 2 on bad flags.
int run_serve(const serve_flags& f);

/// "HOST:PORT" (IPv6 as "[::1]:PORT"): host and port, or an error message.
struct listen_address {
  std::string host;
  int port = 0;
  std::string error;
};
listen_address parse_listen(const std::string& s);

/// The process's logger on stderr: `format` text or json, every message
/// escaped when it holds control characters or invalid UTF-8 (what other
/// processes send may reach a log line).
void setup_logging(const std::string& level, const std::string& format);
bool is_loopback(const std::string& host);

} // namespace mcprt::cli
