#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "io/http_client.hpp"

namespace mcprt::io {

/// What an sse_transport reports; the same shape and rules as http_events
/// (on the client's loop thread, nothing after the destructor,
/// after close() only on_closed; callbacks may call send() and close() but
/// must not destroy the transport), without session expiry: this transport
/// has no session to lose, a stream that ends is an error.
struct sse_events {
  /// One JSON-RPC message per `message` event.
  std::function<void(std::string json_message)> on_message;
  /// The stream could not be opened, was refused, ended, or carried an
  /// unacceptable endpoint or an oversize event; a POST failed. Reported
  /// once; the transport is useless afterwards (the caller closes it and
  /// starts over). Reasons name the method and the URL without its query,
  /// never a header value or the session id.
  std::function<void(std::string reason)> on_error;
  /// close() finished: the stream is stopped, queued messages dropped.
  std::function<void()> on_closed;
};

struct sse_transport_options {
  std::chrono::milliseconds connect_timeout{10000};
  /// Longest wait for the answer to one POST (servers answer 202 at once;
  /// the JSON-RPC response comes on the stream).
  std::chrono::milliseconds post_timeout{60000};
  /// A stream silent this long is an error. Servers of this transport need
  /// not send keep-alives, so it is long; a peer that vanished without
  /// closing the connection is found sooner by TCP keep-alive (~2 min).
  std::chrono::milliseconds stream_idle_timeout{std::chrono::hours(24)};
  /// Largest SSE event (one JSON-RPC message) we accept.
  std::size_t max_message_bytes = 64u << 20;
  /// As http_transport_options::proxy and ::ca_file.
  std::string proxy;
  std::string ca_file;
};

/// The client side of the legacy HTTP+SSE transport (MCP 2024-11-05),
/// CAF-free.
///
/// The constructor opens `GET url` (Accept: text/event-stream) on the
/// client. The server's first event, `endpoint`, names where to POST:
/// accepted only on the stream's own origin. send() queues; messages are
/// POSTed one at a time in order once the endpoint is known. Every server message, responses included,
/// arrives as a `message` event on the stream. Configured headers go on the
/// GET and on every POST.
///
/// Not copyable or movable; all members are thread-safe.
class sse_transport {
public:
  sse_transport(std::string url, std::map<std::string, std::string> headers, sse_events events,
                http_client& client, sse_transport_options options = {});
  /// Stops the stream and in-flight POST; no callback runs once the
  /// destructor returns (it waits for one that is running).
  ~sse_transport();
  sse_transport(const sse_transport&) = delete;
  sse_transport& operator=(const sse_transport&) = delete;

  /// Queues one JSON-RPC message for POSTing. Ignored after close() or an
  /// error.
  void send(std::string json_message);

  /// Drops queued messages, stops the POST in flight and the stream, then
  /// reports on_closed. Asynchronous and idempotent.
  void close();

  const std::string& display_url() const;

  struct state; // implementation, shared with the client's handlers

private:
  std::shared_ptr<state> state_;
};

} // namespace mcprt::io
