#pragma once

// The workspace as one MCP server: downstream MCP sessions of
// any client, each a runtime session over the shared pool, seeing the
// tools, prompts and resources of every server the workspace runs under
// one catalog (core/gateway_catalog), with list_changed when it changes.
//
// Transport-free: the daemon's HTTP side (streamable HTTP at /mcp, and the
// 2024-11-05 SSE pair) hands each client message to `post` with a channel
// for the messages tied to it, and each session's stream of the rest to
// `listen`. Nothing here blocks the caller: work that waits on the runtime
// runs on the gateway's own two threads (one for sessions opening and
// closing and for answers that need the gating actor, one that rebuilds
// the catalog).
//
// The catalog is built from one runtime session, the daemon's own (which
// holds every admitted server), and shared by all downstream sessions: one
// rebuild after a change, however many clients are connected.

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/fwd.hpp>
#include <nlohmann/json.hpp>

#include "mcprt/version.hpp"
#include "core/gateway_catalog.hpp"
#include "core/gateway_session.hpp"

namespace mcprt {

class runtime;
struct server_request;
class host_responder;

struct gateway_options {
  /// The runtime session whose servers make the catalog (the daemon's own).
  std::string catalog_session;
  /// A session with no request for this long, and no stream open, is closed.
  std::chrono::milliseconds idle_timeout = std::chrono::minutes(30);
  std::size_t max_sessions = 4096;
  /// A tool call's answer (the client may cancel sooner).
  std::chrono::milliseconds call_timeout = std::chrono::minutes(10);
  /// A server still connecting when a call comes (just approved, restarting)
  /// is waited for this long.
  std::chrono::milliseconds wait_connecting = std::chrono::seconds(10);
  /// Changes arriving within this window make one catalog rebuild.
  std::chrono::milliseconds coalesce = std::chrono::milliseconds(20);
  /// A 2026-07-28 request answered with an InputRequiredResult waits this
  /// long for its retry; then its call upstream is cancelled.
  std::chrono::milliseconds input_wait = std::chrono::minutes(5);
  /// Messages kept for a session with no stream open (oldest dropped).
  std::size_t backlog = 64;
  std::string version = MCPRT_VERSION;
};

/// Where messages to one client go. Thread-safe, never blocks.
class gateway_channel {
public:
  virtual ~gateway_channel() = default;
  /// One message; `last`: a request's answer, nothing more comes here.
  virtual void send(const nlohmann::json& msg, bool last) = 0;
  /// A request's answer that is an error with an HTTP status of its own
  /// (2026-07-28), where nothing has been sent yet.
  virtual void send_error(const nlohmann::json& msg, int /*status*/) { send(msg, true); }
  /// The client has gone (a closed stream): messages go elsewhere.
  virtual bool open() const { return true; }
  /// The session closed: end the stream.
  virtual void close() {}
};

class gateway {
public:
  gateway(runtime& rt, caf::actor_system& sys, gateway_options opts);
  ~gateway();

  gateway(const gateway&) = delete;
  gateway& operator=(const gateway&) = delete;

  /// Subscribes to the runtime's events and builds the first catalog.
  bool start();
  /// Closes every session (their runtime sessions too). Idempotent.
  void stop();

  struct post_result {
    post_result() = default;
    post_result(int st, std::string sess, std::string err, std::optional<nlohmann::json> ans = std::nullopt)
      : status(st), session(std::move(sess)), error(std::move(err)), answer(std::move(ans)) {}
    /// 200: a request; its answer comes on the channel. 202: a notification
    /// or response, taken. 400: bad (see error). 404: no such session.
    /// 503: too many sessions, or stopping.
    int status = 200;
    /// A new session's id (initialize).
    std::string session;
    std::string error;
    /// The whole answer, with `status`, when it is known at once (a
    /// 2026-07-28 request refused or answered from the catalog).
    std::optional<nlohmann::json> answer;
  };

  /// One message of a client. No `session`: it must be an initialize
  /// request, which opens one. `set`: the tool set the client came for
  /// (`/mcp/<set>`; settings `mcp.toolSets`), "" for the whole workspace; a
  /// session belongs to the set it opened with, and is not found under
  /// another (404).
  post_result post(const std::string& session, nlohmann::json msg, std::shared_ptr<gateway_channel> reply,
                   const std::string& set = {});
  /// One 2026-07-28 message: stateless, no session id. Its answer comes on
  /// `reply`, or in the result (`answer`) when known at once. A server's
  /// request for input during it (elicitation, sampling) ends the request
  /// with an InputRequiredResult; the retry that carries its
  /// `requestState` and `inputResponses` answers the server and takes the
  /// rest of the call.
  post_result post_modern(nlohmann::json msg, const modern_headers& headers, std::shared_ptr<gateway_channel> reply,
                          const std::string& set = {});
  /// The stream of the session's messages not tied to a request (list
  /// changes, resource updates, server logs, requests to the client). A
  /// second stream replaces the first. False: no such session (in `set`).
  bool listen(const std::string& session, std::shared_ptr<gateway_channel> stream, const std::string& set = {});
  /// Ends a session (DELETE, the client's exit). False: no such session
  /// (in `set`).
  bool close(const std::string& session, const std::string& set = {});
  bool has_session(const std::string& session) const;
  /// The protocol revision a session negotiated ("" before initialize, or
  /// no such session).
  std::string protocol(const std::string& session) const;

  /// Requests of servers only the host can answer (sampling, elicitation).
  /// True: it belongs to a call of a gateway session and went to its
  /// client (or was refused for it); false: not ours.
  bool forward(const server_request& req, const host_responder& responder);
  /// A request forwarded earlier no longer wants an answer.
  void withdraw(const std::string& request_id);

  /// {"sessions": [...], "left_out": [...], "renamed": [...],
  /// "catalog": {...counts}, "sets": [...]}: each tool set with the tools
  /// it shows and what it leaves out, and why.
  nlohmann::json snapshot() const;
  /// Rebuilds the catalog now (and tells the sessions what changed).
  void refresh();

  struct impl;

private:
  std::shared_ptr<impl> impl_;
};

} // namespace mcprt
