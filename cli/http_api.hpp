#pragma once

// The daemon's HTTP API on a running runtime (cpp-httplib):
//
//   GET  /healthz                         200 {"ok": true}
//   GET  /workspace/mcp                   the runtime snapshot
//   GET  /workspace/mcp/events            Server-Sent Events, Last-Event-ID replay
//   POST /workspace/mcp/reload            202
//   POST /workspace/mcp/{server}/approve  200 | 404 unknown | 409 not gated
//   POST /workspace/mcp/{server}/reject   same
//   POST /workspace/mcp/{server}/restart  200 with per-entry results
//   POST /workspace/mcp/tools/call        {"server", "tool", "arguments"}
//
// Every error is a 4xx/5xx with a JSON body {"error": CODE, "message": TEXT}.
// Event streams are fed by one bus subscriber through bounded per-client
// queues: a client that falls behind is dropped, the runtime never waits.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include <caf/fwd.hpp>
#include <nlohmann/json.hpp>

namespace httplib {
class Server;
}

namespace mcprt {
class runtime;
}

namespace mcprt::cli {

struct http_api_options {
  /// Non-empty: every request needs `Authorization: Bearer <token>`.
  std::string token;
  /// Events a stream may lag behind before it is dropped.
  std::size_t sse_queue = 1024;
  /// A comment line on an idle stream this often.
  std::chrono::milliseconds keepalive{15000};
  /// Largest request body.
  std::size_t max_body = 1 << 20;
  /// Concurrent event streams; more get 503.
  std::size_t max_streams = 64;
};

class event_hub;

class http_api {
public:
  /// `session` is the daemon's session: tool calls go through it.
  http_api(runtime& rt, caf::actor_system& sys, std::string session, http_api_options opts);
  ~http_api();

  http_api(const http_api&) = delete;
  http_api& operator=(const http_api&) = delete;

  /// Subscribes to the bus and installs routes, auth, limits and the error
  /// handler on `svr`. False when the bus subscription fails.
  bool install(httplib::Server& svr);

  /// Ends every event stream (before stopping the server: streams hold its
  /// worker threads).
  void stop();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// A copy of `j` with every value under an `env` or `headers` key replaced
/// by "<redacted>" (at any depth).
nlohmann::json redact(nlohmann::json j);

} // namespace mcprt::cli
