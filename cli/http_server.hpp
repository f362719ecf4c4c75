#pragma once

// The daemon's HTTP server: GNU libmicrohttpd (MHD) driven by one event-loop
// thread of ours (epoll), so no request holds a thread while it waits. A
// handler answers at once or later, from any thread (the connection is
// suspended meanwhile), or with a stream that the loop pulls as data
// arrives (event streams).
//
// What a client controls is bounded here: connections (at the limit the
// oldest connection still sending its request is closed, so a flood of
// slow clients cannot lock out /healthz), the time to send a request (a
// deadline from its first byte to its last, which a trickling client
// cannot reset), header count and size (MHD's per-connection memory
// pool), and the body (a declared length over the limit is refused before
// it is read; a chunked one is counted and refused at the end).

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/http_rules.hpp"
#include "io/loop_turn.hpp"

namespace mcprt::io {
class reactor;
}

namespace mcprt::cli {

struct http_server_options {
  /// Open connections; at the limit the oldest one still sending its
  /// request is closed for the newcomer.
  std::size_t max_connections = 256;
  /// From a request's first byte (or the end of the previous response on
  /// a kept-alive connection) to its last.
  std::chrono::milliseconds request_timeout{10000};
  /// Largest request body (declared or chunked).
  std::size_t max_body = 1 << 20;
  /// Request headers; more get 431.
  std::size_t max_headers = 64;
  /// MHD's memory pool per connection: the request line and headers must
  /// fit (431 / 414 otherwise), and it buffers a stream's writes.
  std::size_t connection_memory = 32 * 1024;
  /// A connection that makes no progress at all (a reader that stopped
  /// reading) is closed after this long.
  unsigned idle_timeout_s = 60;
  /// SO_SNDBUF of the listener, inherited by every connection: a slow
  /// link for tests. 0: the system's.
  int sndbuf = 0;
  /// Told around each turn of the loop thread (may be empty; unused with
  /// `run_on`, whose own hook serves).
  std::shared_ptr<io::loop_turn_hook> turn_hook;
  /// Runs the loop on this reactor's thread (a guest of it) instead of a
  /// thread of its own; should the reactor stop first, the loop moves to a
  /// thread of its own.
  io::reactor* run_on = nullptr;
};

/// A request as received: the target raw (percent escapes not decoded),
/// header names in lower case.
struct http_request {
  std::string method;
  std::string target;
  std::string version;
  http::header_list headers;
  std::string body;
};

class http_stream;

struct http_response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  /// Set: the body comes from this stream instead (chunked, until it ends).
  std::shared_ptr<http_stream> stream;
};

/// A response body that arrives over time. `pull` runs on the loop thread;
/// the stream calls `wake` (from any thread) when it has more, or has
/// ended, after a `pull` answered `wait`.
class http_stream {
public:
  virtual ~http_stream() = default;

  enum class state { data, wait, end, fail };
  struct chunk {
    state st = state::wait;
    std::size_t size = 0;
  };
  /// Copies at most `max` bytes to `buf`.
  virtual chunk pull(char* buf, std::size_t max) = 0;

  /// How the server is told (installed by the server).
  void attach(std::function<void(bool abort)> notify);

protected:
  /// There is something to pull.
  void wake();
  /// Close the connection now, even while it waits for the client to read
  /// (a reader that fell behind).
  void abort();

private:
  void notify(bool abort);
  std::mutex notify_mtx_;
  std::function<void(bool)> notify_;
};

/// One request on its way to an answer.
class http_exchange {
public:
  virtual ~http_exchange() = default;
  virtual const http_request& request() const = 0;
  /// Answers the request: from any thread, once (later calls are ignored).
  virtual void respond(http_response r) = 0;
};

class http_handler {
public:
  virtual ~http_handler() = default;
  /// On the loop thread when the request head has arrived: an answer now
  /// (the body is not read) or nullopt to go on.
  virtual std::optional<http_response> on_head(const http_request& head) = 0;
  /// On the loop thread with the whole request: answer through `ex`, now
  /// or later. Never block here.
  virtual void on_request(std::shared_ptr<http_exchange> ex) = 0;
  /// On the loop thread after each answer is queued (for a log line).
  virtual void on_answered(const http_request&, int /*status*/) {}
};

class http_server {
public:
  http_server(http_handler& handler, http_server_options opts);
  ~http_server();

  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Listens on `host:port` (0: a free port) and starts the loop. False
  /// with `error` set when it cannot.
  bool listen(const std::string& host, int port, std::string& error);
  /// Starts the loop without a listener: connections come through
  /// `add_connection` (the fuzzer feeds socket pairs that way).
  bool start_without_listener(std::string& error);
  int port() const;

  /// Serves `fd` (a connected stream socket; the server owns it now).
  void add_connection(int fd);

  /// Runs `fn` on the loop thread (dropped once the loop has stopped).
  void post(std::function<void()> fn);
  /// Runs `fn` on the loop thread every `interval`.
  void every(std::chrono::milliseconds interval, std::function<void()> fn);

  /// Stops accepting, answers every request still waiting with 503, gives
  /// connections up to `grace` to finish, then closes the rest. From any
  /// thread but the loop's; idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(2));

  /// Open connections (a snapshot, for tests and logs).
  std::size_t connections() const;

  struct impl;

private:
  std::unique_ptr<impl> impl_;
};

} // namespace mcprt::cli
