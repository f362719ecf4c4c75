#pragma once

// The egress allow-list proxy of the sandbox. A sandboxed stdio server runs
// in a network namespace of its own, with nothing but its own loopback; its
// `"network"` setting lists the hosts it may reach, and it gets HTTP_PROXY /
// HTTPS_PROXY naming 127.0.0.1:PORT inside that namespace. A forwarder there
// accepts each connection and hands the socket to the daemon (SCM_RIGHTS over
// the socket add_server returns); this proxy, on a thread of its own in the
// daemon's namespace, serves it as an HTTP proxy client connection:
//
//  - `CONNECT host:port`: if allowed, connects out, answers
//    `HTTP/1.1 200 Connection established` and relays bytes both ways;
//  - `METHOD http://host[:port]/path`: if allowed, connects out and sends the
//    request in origin form (`METHOD /path`), without `Proxy-*` fields, with
//    the URI's Host and `Connection: close`, then relays the rest of the
//    connection as-is. One upstream per client connection: a client's next
//    request goes on a new connection (the upstream closes after its answer),
//    and whatever else the client sends on this one only ever reaches the
//    host it already named;
//  - anything else (a host not allowed, a malformed head, an origin-form
//    request, a head over 16 KiB or not complete in time): `403 Forbidden`,
//    or `400 Bad Request` when malformed, with a one-line body that says
//    why and names the host; then the connection is closed.
//
// The rules (entries, matching, the head) are core/egress_rules.hpp; the
// design and its bounds are in docs/sandbox.md, "Egress allow-list".

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mcprt::io {

/// A request the proxy refused on policy (not allowed, malformed, too
/// large, too slow, too many connections). `host` and `port` are what the
/// request named: empty and 0 when it did not get that far.
struct egress_refusal {
  std::string server;
  std::string host;
  int port = 0;
  std::string reason;
};

/// Bounds and deadlines. The defaults are what the daemon uses; tests make
/// them short.
struct egress_proxy_options {
  /// Client connections served at once for one server; one more is
  /// answered 503 and closed (and reported).
  std::size_t max_connections_per_server = 64;
  /// Bytes buffered in each direction of one connection; a side that does
  /// not read makes the proxy stop reading the other.
  std::size_t buffer_bytes = 64 * 1024;
  /// From the hand-over to a complete request head.
  std::chrono::milliseconds head_timeout{10000};
  /// From the complete head to a connected upstream (name resolution and
  /// every address tried): then 504.
  std::chrono::milliseconds connect_timeout{10000};
  /// A relayed connection with no byte either way for this long is closed.
  std::chrono::milliseconds idle_timeout{5 * 60 * 1000};
  /// Threads that run getaddrinfo (it blocks; the event loop never calls it
  /// for a name).
  int resolver_threads = 2;
};

class egress_proxy {
public:
  /// Starts its thread. on_refused runs on the proxy's thread: keep it
  /// short, never throw (an exception from it is swallowed).
  explicit egress_proxy(std::function<void(const egress_refusal&)> on_refused);
  egress_proxy(std::function<void(const egress_refusal&)> on_refused, egress_proxy_options options);
  /// Stops the thread, closes every socket. It joins the resolver threads
  /// too, so it can wait for a getaddrinfo already under way (bounded by
  /// the resolver's own timeouts, resolv.conf).
  ~egress_proxy();
  egress_proxy(const egress_proxy&) = delete;
  egress_proxy& operator=(const egress_proxy&) = delete;

  /// Registers one server; callable from any thread. Returns the sandbox's
  /// end of a new AF_UNIX socketpair (SOCK_SEQPACKET|SOCK_CLOEXEC); the caller
  /// owns and closes it after handing it to the child. The forwarder sends
  /// each accepted client socket as one message: 1 byte payload plus the fd
  /// in SCM_RIGHTS. When the forwarder's end closes (the server ended; every
  /// copy of it, the caller's included), the proxy forgets the server and
  /// closes its connections. Entries of `allowed` that
  /// egress::parse_allow_entry refuses are left out (validate settings with
  /// egress::parse_allow_list first). Throws std::runtime_error if the
  /// socketpair cannot be made.
  int add_server(std::string server_name, std::vector<std::string> allowed);

  /// How many servers are registered (for tests): counted when add_server
  /// returns, uncounted once the proxy has forgotten the server.
  std::size_t server_count() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace mcprt::io
