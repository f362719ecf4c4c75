#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/http_url.hpp"
#include "io/http_client.hpp"

namespace mcprt::io {

/// What an http_transport reports. Called on the http_client's loop thread,
/// one at a time for every transport of that client: quick, never blocking
/// (hand the work to an actor). After close() only on_closed follows; after
/// the transport is destroyed nothing does. Callbacks may call send(),
/// reset_session(), set_protocol_version() and close() on their own
/// transport; they must not destroy it. Exceptions thrown by a callback are
/// swallowed (there is no caller on the loop thread to hand them to).
struct http_events {
  /// One JSON-RPC message per call; a JSON batch array is split.
  std::function<void(std::string json_message)> on_message;
  /// HTTP 404 for a request that carried a session id: the server forgot the
  /// session. Reported once per session id; the caller calls reset_session()
  /// and initializes again.
  std::function<void()> on_session_expired;
  /// Connection refused, TLS failure, timeout, unexpected HTTP status (with a
  /// body excerpt), bad URL. Reasons name the method and the URL (without
  /// its query), never a header value or the session id.
  std::function<void(std::string reason)> on_error;
  /// A request was refused (401, or 403 for scope) and the transport's
  /// http_auth could not authorize: a person must (`mcprt auth`). The
  /// reason says why. Unset: reported through on_error.
  std::function<void(std::string reason)> on_auth_required;
  /// close() finished: the DELETE was sent (best effort) and the event
  /// stream is stopped.
  std::function<void()> on_closed;
};

/// Authorization for a transport's requests (io/oauth_client is the one
/// implementation). Called on a thread of the transport's own (never the
/// client's loop), one call at a time per transport; transports sharing
/// one http_auth may call it concurrently.
class http_auth {
public:
  virtual ~http_auth() = default;
  /// The Authorization header for the next request, if any. May block
  /// briefly (a token refresh).
  virtual std::optional<std::string> authorization() = 0;
  /// A request sent with Authorization `sent` ("" for none) was answered
  /// 401, or 403 with `insufficient_scope`. Blocks while it authorizes (a
  /// person may be at a browser). True: send the request again.
  virtual bool on_unauthorized(int status, std::string_view www_authenticate, std::string_view sent) = 0;
  /// Why the last authorization failed, for the error report; never a
  /// token or secret.
  virtual std::string failure() const = 0;
  /// The transport closes: an authorization waiting for a person ends.
  virtual void cancel() {}
};

struct http_transport_options {
  /// Longest silence while waiting for (more of) a response. It is an idle
  /// timeout, not a total one: an SSE response may take any time as long as
  /// bytes keep coming, a plain JSON response must start within it. Set it
  /// above the longest tool call whose server answers with plain JSON.
  std::chrono::milliseconds request_timeout{60000};
  std::chrono::milliseconds connect_timeout{10000};
  /// For the best-effort DELETE in close().
  std::chrono::milliseconds close_timeout{2000};
  /// POSTs of one transport that may wait for their responses at once
  /// (each holds a stream or a connection, no thread). Later messages queue.
  std::size_t max_in_flight = 16;
  /// The server's own forward proxy ("direct": none); empty: the
  /// environment's (HTTPS_PROXY, HTTP_PROXY, NO_PROXY).
  std::string proxy;
  /// A PEM file of CAs trusted besides the system store.
  std::string ca_file;
  /// An event stream that stays silent this long is reconnected.
  std::chrono::milliseconds event_stream_idle_timeout{300000};
  /// Largest response body or SSE event we accept.
  std::size_t max_message_bytes = 64u << 20;
  /// Authorization for every request; none when null. A request is sent
  /// again after an authorization at most three times (a server that keeps
  /// asking for more scope must not loop).
  std::shared_ptr<http_auth> auth;
  /// A POST that fails (unreachable, timeout, an HTTP error status, a
  /// response too large or of an unexpected type) also completes each
  /// JSON-RPC request it carried with a JSON-RPC error (-32000, the reason as
  /// its message) through on_message, besides on_error. For a proxy that must
  /// answer every request it forwards (`mcprt gateway`); off, on_error alone
  /// reports it (the runtime's sessions fail the connection).
  bool answer_failed_requests = false;
};

/// The client side of the MCP streamable HTTP transport, CAF-free.
///
/// Threading and order: send() only enqueues. A message is issued (its POST
/// started) only after the previous message of this
/// transport was issued: for a JSON-RPC request once its body has been
/// written to the socket, for notifications, responses and anything else
/// once the server has answered it (typically 202), so e.g.
/// notifications/initialized is accepted before the next request goes out.
/// Up to `max_in_flight` requests may then wait for their responses at the
/// same time, so a slow tools/call does not hold back a ping. Responses are
/// delivered in the order they arrive. Connections are kept alive and
/// reused; over HTTP/2 the requests share one connection.
///
/// Not copyable or movable; all members are thread-safe.
class http_transport {
public:
  http_transport(std::string url, std::map<std::string, std::string> headers, http_events events,
                 http_client& client,
                 std::chrono::milliseconds request_timeout = std::chrono::milliseconds(60000));
  http_transport(std::string url, std::map<std::string, std::string> headers, http_events events,
                 http_client& client, http_transport_options options);
  /// Aborts in-flight requests and the event stream; no callback runs once
  /// the destructor returns (it waits for one that is running). Does not
  /// send DELETE: call close() first for that. Never from one of its own
  /// callbacks.
  ~http_transport();
  http_transport(const http_transport&) = delete;
  http_transport& operator=(const http_transport&) = delete;

  /// POSTs one JSON-RPC message (or batch). Content-Type application/json;
  /// Accept: application/json, text/event-stream; Mcp-Session-Id as known
  /// when send() was called (so messages queued before a reset_session()
  /// still carry the old id); MCP-Protocol-Version once set. 202 → nothing; 200 application/json →
  /// on_message per message; 200 text/event-stream → on_message per
  /// "message" event, as the events arrive. Ignored after close() and when
  /// the URL is invalid (that was reported at construction).
  ///
  /// An SSE response that ends before the response to each request in it
  /// came is resumed (SEP-1699): GET with Last-Event-ID (the last id seen on
  /// that stream) after the server's `retry:` (100 ms to 5 min) or else 1 s
  /// doubling, again from the newest id if that stream ends early too, at
  /// most 10 times. When it cannot be resumed (no event id, the GET refused,
  /// 10 resumptions spent) each waiting request gets a JSON-RPC error
  /// (-32000) through on_message saying why; on_error is not called, the
  /// transport lives on.
  void send(std::string json_message);
  /// The same, with header fields of its own (what 2026-07-28 mirrors from
  /// the body: Mcp-Method, Mcp-Name, Mcp-Param-*; core/mcp_headers).
  void send(std::string json_message, std::vector<std::pair<std::string, std::string>> extra_headers);

  /// Sent as MCP-Protocol-Version on later requests.
  void set_protocol_version(std::string version);
  /// Forgets the session id (before initializing again).
  void reset_session();
  std::optional<std::string> session_id() const;

  /// Opens the GET event stream for server-initiated messages. Idempotent. The stream is a side channel and never
  /// reports on_error: 405 or any other refusal ends it quietly, 404 on a
  /// known session reports on_session_expired once the server has served
  /// the stream before (a first 404 is taken for "no GET route"). When the server ends the
  /// stream, cannot be reached (restarting), or is silent for
  /// event_stream_idle_timeout, it is reopened with Last-Event-ID after the
  /// server's last `retry:` (100 ms to 5 min), or without one after a
  /// backoff of 1 s doubling to 30 s. Returns false after close() or for an
  /// invalid URL.
  bool open_event_stream();

  /// Drops queued messages, aborts in-flight requests, stops the event
  /// stream, sends DELETE with the session id (best effort, close_timeout),
  /// then reports on_closed. Asynchronous and idempotent.
  void close();

  const std::string& display_url() const;

  struct state; // implementation, shared with the client's handlers

private:
  std::shared_ptr<state> state_;
};

namespace detail {

/// Splits a top-level JSON array into its elements (raw text, trimmed);
/// anything else (including malformed text) comes back as the single,
/// trimmed element. Empty or blank input gives no element.
std::vector<std::string> split_json_batch(std::string_view body);

/// The ids (raw JSON text) of the requests in a message or batch, and of
/// the responses (no "method", a non-null "id").
std::vector<std::string> request_ids(std::string_view message);
std::vector<std::string> response_ids(std::string_view message);

/// True when the text is a JSON-RPC request (an object with "method" and
/// "id") or a batch containing one.
bool is_json_rpc_request(std::string_view message);

} // namespace detail

} // namespace mcprt::io
