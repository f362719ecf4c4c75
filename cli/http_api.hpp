#pragma once

// The daemon's HTTP API on a running runtime:
//
//   GET  /healthz                         200 {"ok": true, "instance": ID}
//   GET  /workspace/mcp                   the runtime snapshot
//   GET  /workspace/mcp/events            Server-Sent Events, Last-Event-ID replay
//   POST /workspace/mcp/reload            202
//   POST /workspace/mcp/{server}/approve  200 | 404 unknown | 409 not gated
//   POST /workspace/mcp/{server}/reject   same
//   POST /workspace/mcp/{server}/restart  200 with per-entry results
//   POST /workspace/mcp/tools/call        {"server", "tool", "arguments"}
//   POST /workspace/mcp/elicitations/{id} an ElicitResult: 200 | 404 | 409 | 400
//   POST /workspace/mcp/sampling/{id}     a CreateMessageResult or {"error"}: same
//   GET  /workspace/mcp/{server}/prompts  prompts/list, every page (and the other
//                                         resource / prompt routes, README)
//
// Before any route: the Host must name this daemon, an Origin must be one
// of --allow-origin, the bearer token must match, and a POST must be
// application/json (core/http_rules). Every error is a 4xx/5xx with a JSON
// body {"error": CODE, "message": TEXT}.
//
// Nothing here blocks the server's loop: tool calls go through the
// runtime's asynchronous call; the other facade calls (snapshot, replay,
// reload, approve, reject, restart) run on two small bounded worker lanes
// while their connection sleeps. Event streams are fed by one bus
// subscriber through bounded per-stream queues: a stream that falls behind
// is dropped, the runtime never waits.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <nlohmann/json.hpp>

#include "cli/http_server.hpp"

namespace mcprt {
class runtime;
class gateway;
}

namespace mcprt::cli {

class host_requests;

struct http_api_options {
  /// Non-empty: every request needs `Authorization: Bearer <token>`.
  std::string token;
  /// Echoed by /healthz: clients check it against daemon.json.
  std::string instance;
  /// The listen host (the port comes with `listening_on`).
  std::string host = "127.0.0.1";
  /// Origins of web pages that may call the API (with CORS answers).
  std::vector<std::string> allowed_origins;
  /// Events a stream may lag behind before it is dropped.
  std::size_t sse_queue = 1024;
  /// A comment line on an idle stream this often.
  std::chrono::milliseconds keepalive{15000};
  /// Concurrent event streams; more get 503.
  std::size_t max_streams = 64;
  /// Largest request body, and the nesting a JSON body may have.
  std::size_t max_body = 1 << 20;
  std::size_t max_json_depth = 64;
  /// A tool call waits this long for its answer, and this long for a
  /// server that is still connecting.
  std::chrono::milliseconds call_timeout{60000};
  std::chrono::milliseconds connect_wait{10000};
  /// The routes ask the runtime without blocking: at most `lane_queue` of
  /// each kind (reads: snapshot and replay; changes: reload, approve,
  /// reject, restart, auth, auth/logout) are in flight; past that bound a
  /// request is answered 503.
  std::size_t lane_queue = 64;
  /// Servers' requests for the host, answered over HTTP; null:
  /// the daemon does not ask, and the answer routes say 404.
  host_requests* asks = nullptr;
  /// The gateway behind /mcp, /sse and /messages; null: off.
  mcprt::gateway* gateway = nullptr;
};

class http_api final : public http_handler {
public:
  /// `session` is the daemon's session: tool calls go through it.
  http_api(runtime& rt, caf::actor_system& sys, std::string session, http_api_options opts);
  ~http_api() override;

  http_api(const http_api&) = delete;
  http_api& operator=(const http_api&) = delete;

  /// Subscribes to the bus and starts the keep-alives on `server`'s loop.
  /// False when the bus subscription fails.
  bool install(http_server& server);

  /// The port the server listens on: the Host check needs it. Until it is
  /// set every request gets 503.
  void listening_on(int port);

  /// Ends every event stream, takes no more jobs (before the server stops)
  /// and waits for the jobs the worker lanes run (each bounded by its own
  /// timeout).
  void stop();

  std::optional<http_response> on_head(const http_request& head) override;
  void on_request(std::shared_ptr<http_exchange> ex) override;
  void on_answered(const http_request& req, int status) override;

  struct impl;

private:
  std::unique_ptr<impl> impl_;
};

/// A copy of `j` with every value under an `env` or `headers` key replaced
/// by "<redacted>" (at any depth).
nlohmann::json redact(nlohmann::json j);

} // namespace mcprt::cli
