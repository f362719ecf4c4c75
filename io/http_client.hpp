#pragma once

// The one HTTP client of mcprt: libcurl's multi interface on an epoll loop
// of its own. Every request of the process shares one thread, whatever the
// number of servers or of requests in flight, so a slow tool call holds a
// stream, not a thread, and a quick call to another server goes out at once.
//
// The loop is not the process reactor's: TLS handshakes and large bodies
// cost CPU on the thread that runs them, and the reactor's thread must stay
// free for the pipes of local servers.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mcprt::io {

struct http_request {
  std::string method = "GET";
  /// Absolute http:// or https:// URL.
  std::string url;
  /// Sent as given; the caller validates names and values.
  std::vector<std::pair<std::string, std::string>> headers;
  /// Sent with a Content-Length (never chunked) when the method is not GET
  /// or HEAD; may be empty.
  std::string body;
  std::chrono::milliseconds connect_timeout{10000};
  /// Longest silence while waiting for (more of) the response, from when
  /// the request starts; 0: none. An idle timeout, not a total one: a
  /// stream may last any time while bytes keep coming.
  std::chrono::milliseconds idle_timeout{60000};
  /// The most the whole request may take; 0: no bound.
  std::chrono::milliseconds total_timeout{0};
  /// A server's own `proxy` setting ("direct": none); empty: the
  /// environment decides (core/proxy_choice.hpp).
  std::string proxy;
  /// PEM bundle of the CAs to trust instead of the system store; empty:
  /// the system store.
  std::string ca_file;
  /// TCP keep-alive probes on the connection (a long-lived stream whose
  /// peer vanished is found in about two minutes).
  bool tcp_keepalive = false;
  /// Never reuse a connection for this request, and do not keep it.
  bool fresh_connection = false;
  /// Connect to this IP address instead of looking the host up again (the
  /// address a caller has checked); TLS still verifies the URL's host
  /// name. Ignored when the request goes through a proxy.
  std::string connect_address;
};

struct http_response_head {
  int status = 0;
  std::string reason;
  /// 1 (HTTP/1.0 and 1.1) or 2.
  int http_version = 1;
  /// In the order received; names as the server spelled them.
  std::vector<std::pair<std::string, std::string>> headers;

  /// The first header of that name (ASCII case-insensitive); "" if none.
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  /// The Content-Type's media type, lower case, without parameters.
  std::string media_type() const;
  /// 200 with text/event-stream: an SSE stream to read.
  bool event_stream() const { return status == 200 && media_type() == "text/event-stream"; }
};

enum class http_failure {
  none,
  resolve,     // the host (or proxy) name did not resolve
  connect,     // refused, unreachable, or the proxy refused the tunnel
  connect_timeout,
  tls,         // handshake failed or the certificate was not trusted
  send,        // the connection broke while sending
  receive,     // the connection broke while receiving
  idle_timeout,
  total_timeout,
  aborted,     // a handler returned false, or the fetch was aborted
  other,
};

struct http_outcome {
  http_failure failure = http_failure::none;
  /// For people, never a header value; names what failed ("connect timed
  /// out", "TLS server certificate verification failed", ...).
  std::string reason;
  /// A response head arrived before the failure.
  bool got_head = false;
  bool ok() const { return failure == http_failure::none; }
};

/// Called on the client's loop thread, one at a time for the whole client:
/// they must be quick and must not block (post the work elsewhere).
struct http_handlers {
  /// The whole request body was handed to the connection.
  std::function<void()> on_body_sent;
  /// The final response head (1xx are skipped). False aborts the request.
  std::function<bool(const http_response_head&)> on_head;
  /// Response body bytes, in order, decoded from the transfer encoding.
  /// False aborts the request.
  std::function<bool(std::string_view bytes)> on_data;
  /// Exactly once per request that was not cancelled, last.
  std::function<void(const http_outcome&)> on_done;
};

struct http_client_options {
  /// Connections kept open per host for reuse; HTTP/2 multiplexes requests
  /// on one connection where the server offers it.
  std::size_t max_idle_connections = 64;
};

/// Thread-safe. The loop thread starts with the first request or post, so
/// a runtime with no HTTP server keeps none.
class http_client {
public:
  using request_id = std::uint64_t; // never 0, never reused
  using timer_id = std::uint64_t;

  http_client();
  explicit http_client(http_client_options opts);
  /// Aborts every request and joins the loop thread. No handler runs once
  /// destruction has begun, but a fetch's own (its caller on another
  /// thread returns with http_failure::aborted). Must not be called on the
  /// loop thread.
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  /// Starts a request; its handlers run on the loop thread.
  request_id start(http_request req, http_handlers handlers);
  /// Aborts a request: on the loop thread, no handler of it runs after
  /// cancel returns; from another thread, none runs once the loop has
  /// taken the cancel (use run_sync for a hard edge). Unknown ids are fine.
  void cancel(request_id id);

  /// Runs `fn` on the loop thread, soon.
  void post(std::function<void()> fn);
  /// Runs `fn` on the loop thread and waits for it; inline when called on
  /// the loop thread.
  void run_sync(const std::function<void()>& fn);
  /// Runs `fn` on the loop thread after `delay` unless cancelled first.
  timer_id run_after(std::chrono::milliseconds delay, std::function<void()> fn);
  void cancel_timer(timer_id id);

  bool on_loop_thread() const;
  /// Requests started and not yet done or cancelled.
  std::size_t active_requests() const;
  /// Waits until no request is active; false after `timeout`.
  bool wait_idle(std::chrono::milliseconds timeout) const;
  /// Connections opened so far (a reused or multiplexed one counts once).
  std::uint64_t connections_opened() const;
  /// 0 before the loop started, then 1: the client's whole thread cost.
  std::size_t thread_count() const;

  /// For the edges of the program (command-line tools, OAuth discovery):
  /// the whole response, blocking the caller. Never on the loop thread.
  struct response {
    http_outcome outcome;
    http_response_head head;
    std::string body;
    bool truncated = false; // the body exceeded max_body and was cut off
  };
  response fetch(http_request req, std::size_t max_body = 16u << 20);
  /// As fetch; `started` gets, on the calling thread before it waits, a
  /// function that ends the request at once from any thread (the fetch
  /// then returns with http_failure::aborted). It may be called after the
  /// fetch returned; it does nothing then.
  response fetch(http_request req, std::size_t max_body,
                 const std::function<void(std::function<void()> abort)>& started);

  struct impl;

private:
  request_id start_request(http_request req, http_handlers handlers, bool report_shutdown);
  std::shared_ptr<impl> impl_;
};

/// One reason text per failure kind, with the timeout in force.
std::string describe_http_failure(http_failure failure, std::chrono::milliseconds idle_timeout);

} // namespace mcprt::io
