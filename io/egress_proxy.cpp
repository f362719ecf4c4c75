#include "io/egress_proxy.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/egress_rules.hpp"

namespace mcprt::io {

namespace {

using egress_clock = std::chrono::steady_clock;

// epoll_event.data.u64: id << 2 | kind. Connection and server ids come from
// one counter starting at 2 and are never reused, so an event for something
// already closed finds nothing. Ids 0 and 1 with k_egress_special are the
// wake-up eventfd and the resolver socket.
enum egress_fd_kind : std::uint64_t {
  k_egress_client = 0,
  k_egress_upstream = 1,
  k_egress_server = 2,
  k_egress_special = 3
};
constexpr std::uint64_t egress_tag(std::uint64_t id, egress_fd_kind k) {
  return (id << 2) | k;
}
constexpr std::uint64_t egress_wake_tag = egress_tag(0, k_egress_special);
constexpr std::uint64_t egress_resolver_tag = egress_tag(1, k_egress_special);

// A refused connection is read and dropped for this long after its answer
// (at most egress_linger_bytes): closing a socket with unread bytes sends a
// reset, which can destroy the answer before the client has read it.
constexpr std::chrono::milliseconds egress_linger_time{2000};
constexpr std::size_t egress_linger_bytes = 64 * 1024;
// Handed-over sockets taken from one server's socket per wake-up.
constexpr int egress_handovers_per_event = 16;
constexpr std::size_t egress_max_addresses = 8;

// The resolver's wire format on its SOCK_SEQPACKET pair; both ends are in
// this process. A request is the connection id and then the name.
struct egress_resolved {
  std::uint64_t conn = 0;
  std::int32_t error = 0; // getaddrinfo's, 0 on success
  std::uint32_t count = 0;
  struct address {
    socklen_t len = 0;
    sockaddr_storage addr{};
  } addresses[egress_max_addresses];
};

// Runs on a resolver thread: answers each request on `fd` until the
// loop's end closes. Several threads read the one socket: each message goes
// to one of them whole.
void egress_resolver_main(int fd) noexcept {
  for (;;) {
    char buf[8 + 512];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= static_cast<ssize_t>(sizeof(std::uint64_t))) return; // closed (or nonsense: stop)
    egress_resolved out;
    std::memcpy(&out.conn, buf, sizeof out.conn);
    std::string host(buf + sizeof out.conn, static_cast<std::size_t>(n) - sizeof out.conn);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    out.error = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (out.error == 0) {
      for (auto* a = res; a && out.count < egress_max_addresses; a = a->ai_next) {
        if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) || a->ai_addrlen > sizeof(sockaddr_storage))
          continue;
        auto& slot = out.addresses[out.count++];
        slot.len = a->ai_addrlen;
        std::memcpy(&slot.addr, a->ai_addr, a->ai_addrlen);
      }
      ::freeaddrinfo(res);
    }
    while (::send(fd, &out, sizeof out, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
  }
}

// The numeric address of a socket address, for the loopback rule.
std::optional<oauth::ip_address> egress_ip_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    return oauth::ip_from_bytes(reinterpret_cast<const unsigned char*>(&in.sin_addr), 4);
  }
  if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    return oauth::ip_from_bytes(reinterpret_cast<const unsigned char*>(&in6.sin6_addr), 16);
  }
  return std::nullopt;
}

void egress_set_port(sockaddr_storage& a, int port) {
  if (a.ss_family == AF_INET) reinterpret_cast<sockaddr_in&>(a).sin_port = htons(static_cast<std::uint16_t>(port));
  else if (a.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6&>(a).sin6_port = htons(static_cast<std::uint16_t>(port));
}

// Bytes on their way from one side to the other.
struct egress_buffer {
  std::string data;
  std::size_t off = 0;

  std::size_t pending() const { return data.size() - off; }
  void consume(std::size_t n) {
    off += n;
    if (off == data.size()) {
      data.clear();
      off = 0;
    } else if (off >= 32 * 1024) {
      data.erase(0, off);
      off = 0;
    }
  }
  void reset(std::string with = {}) {
    data = std::move(with);
    off = 0;
  }
};

enum class egress_io { ok, again, eof, failed };

// Reads at most `room` bytes onto `b`.
egress_io egress_read(int fd, egress_buffer& b, std::size_t room, std::size_t* got = nullptr) {
  if (room == 0) return egress_io::again;
  auto old = b.data.size();
  b.data.resize(old + room);
  ssize_t n;
  do {
    n = ::recv(fd, &b.data[old], room, 0);
  } while (n < 0 && errno == EINTR);
  b.data.resize(old + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
  if (got) *got = n > 0 ? static_cast<std::size_t>(n) : 0;
  if (n > 0) return egress_io::ok;
  if (n == 0) return egress_io::eof;
  return errno == EAGAIN || errno == EWOULDBLOCK ? egress_io::again : egress_io::failed;
}

// Writes what the socket takes of `b`.
egress_io egress_write(int fd, egress_buffer& b, bool* wrote = nullptr) {
  while (b.pending() > 0) {
    ssize_t n = ::send(fd, b.data.data() + b.off, b.pending(), MSG_NOSIGNAL);
    if (n > 0) {
      b.consume(static_cast<std::size_t>(n));
      if (wrote) *wrote = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return egress_io::again;
    return egress_io::failed;
  }
  return egress_io::ok;
}

} // namespace

struct egress_proxy::impl {
  // A server on its way from add_server to the loop: pushed onto a
  // lock-free stack (the loop takes the whole stack at once, so there is no
  // ABA), then the eventfd wakes the loop.
  struct registration {
    std::string name;
    std::vector<egress::allow_entry> allowed;
    int fd = -1; // the proxy's end of the socketpair
    registration* next = nullptr;
  };

  enum class phase {
    head,       // reading the request head
    resolving,  // a resolver thread has the name
    connecting, // a nonblocking connect is under way
    relaying,   // bytes both ways
    refusing,   // sending the refusal
    lingering,  // refusal sent: reading and dropping until EOF, briefly
  };

  struct connection {
    std::uint64_t id = 0;
    std::uint64_t server = 0;
    int client = -1;
    int upstream = -1;
    std::uint32_t client_mask = 0; // as registered in epoll, 0: not registered
    std::uint32_t upstream_mask = 0;
    phase ph = phase::head;
    egress_clock::time_point deadline;
    egress_buffer to_upstream; // from the client (in phase::head: the head so far)
    egress_buffer to_client;
    std::size_t scanned = 0; // find_head_end's resume point
    std::optional<egress::proxy_request> request;
    std::vector<egress_resolved::address> addresses;
    std::size_t next_address = 0;
    int last_connect_error = 0;
    bool client_eof = false, upstream_eof = false;
    bool client_shut = false, upstream_shut = false; // we sent FIN that way
    std::size_t lingered = 0;
  };

  struct server_entry {
    std::string name;
    std::vector<egress::allow_entry> allowed;
    int fd = -1;
    std::unordered_set<std::uint64_t> connections;
  };

  std::function<void(const egress_refusal&)> on_refused;
  const egress_proxy_options opts;

  // Shared with other threads.
  std::atomic<registration*> incoming{nullptr};
  std::atomic<bool> stopping{false};
  std::atomic<std::size_t> registered{0};
  int epfd = -1;
  int wakefd = -1;
  int resolver_loop_end = -1;   // the loop's (nonblocking)
  int resolver_thread_end = -1; // the resolver threads' (blocking)
  std::thread loop_thread;
  std::vector<std::thread> resolver_pool;

  // The loop thread's alone.
  std::unordered_map<std::uint64_t, server_entry> servers;
  std::unordered_map<std::uint64_t, connection> connections;
  std::uint64_t next_id = 2;

  impl(std::function<void(const egress_refusal&)> cb, egress_proxy_options o)
      : on_refused(std::move(cb)), opts(o) {
    epfd = ::epoll_create1(EPOLL_CLOEXEC);
    wakefd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int rs[2] = {-1, -1};
    bool ok = epfd >= 0 && wakefd >= 0 && ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rs) == 0;
    if (!ok) {
      int e = errno;
      close_own_fds();
      throw std::runtime_error(std::string("egress proxy: cannot set up its event loop: ") + std::strerror(e));
    }
    resolver_loop_end = rs[0];
    resolver_thread_end = rs[1];
    ::fcntl(resolver_loop_end, F_SETFL, ::fcntl(resolver_loop_end, F_GETFL) | O_NONBLOCK);
    watch(wakefd, EPOLLIN, egress_wake_tag);
    watch(resolver_loop_end, EPOLLIN, egress_resolver_tag);
    try {
      for (int i = 0; i < std::max(1, opts.resolver_threads); ++i)
        resolver_pool.emplace_back(egress_resolver_main, resolver_thread_end);
      loop_thread = std::thread([this] { run(); });
    } catch (...) {
      stop_threads();
      close_own_fds();
      throw;
    }
  }

  ~impl() {
    stop_threads();
    // add_server calls that raced with the loop's last look.
    take_incoming(true);
    close_own_fds();
  }

  void stop_threads() {
    stopping.store(true);
    wake();
    if (loop_thread.joinable()) loop_thread.join();
    // The resolvers' recv returns 0 once the loop's end is closed.
    if (resolver_loop_end >= 0) {
      ::close(resolver_loop_end);
      resolver_loop_end = -1;
    }
    for (auto& t : resolver_pool)
      if (t.joinable()) t.join();
  }

  void close_own_fds() {
    for (int* fd : {&epfd, &wakefd, &resolver_loop_end, &resolver_thread_end})
      if (*fd >= 0) {
        ::close(*fd);
        *fd = -1;
      }
  }

  void wake() {
    std::uint64_t one = 1;
    while (::write(wakefd, &one, sizeof one) < 0 && errno == EINTR) {
    }
  }

  void push(registration* r) {
    r->next = incoming.load(std::memory_order_relaxed);
    while (!incoming.compare_exchange_weak(r->next, r, std::memory_order_release, std::memory_order_relaxed)) {
    }
    wake();
  }

  // --- epoll -----------------------------------------------------------------

  void watch(int fd, std::uint32_t events, std::uint64_t tag) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    ::epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
  }

  // An fd with nothing wanted is not in epoll at all, so a hung-up socket
  // cannot report EPOLLHUP over and over while its turn has not come.
  void set_interest(int fd, std::uint32_t& current, std::uint32_t want, std::uint64_t tag) {
    if (fd < 0 || want == current) return;
    if (want == 0) {
      ::epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nullptr);
    } else {
      epoll_event ev{};
      ev.events = want;
      ev.data.u64 = tag;
      ::epoll_ctl(epfd, current == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev);
    }
    current = want;
  }

  void update_interest(connection& c) {
    std::uint32_t cw = 0, uw = 0;
    const auto cap = opts.buffer_bytes;
    switch (c.ph) {
      case phase::head: cw = EPOLLIN; break;
      case phase::resolving: break;
      case phase::connecting: uw = EPOLLOUT; break;
      case phase::relaying:
        if (!c.client_eof && c.to_upstream.pending() < cap) cw |= EPOLLIN;
        if (c.to_client.pending() > 0) cw |= EPOLLOUT;
        if (!c.upstream_eof && c.to_client.pending() < cap) uw |= EPOLLIN;
        if (c.to_upstream.pending() > 0) uw |= EPOLLOUT;
        break;
      case phase::refusing: cw = EPOLLOUT; break;
      case phase::lingering: cw = EPOLLIN; break;
    }
    set_interest(c.client, c.client_mask, cw, egress_tag(c.id, k_egress_client));
    set_interest(c.upstream, c.upstream_mask, uw, egress_tag(c.id, k_egress_upstream));
  }

  // --- servers ---------------------------------------------------------------

  // Takes what add_server pushed; `close_only` when stopping.
  void take_incoming(bool close_only) {
    auto* list = incoming.exchange(nullptr, std::memory_order_acquire);
    // The stack is newest first: reverse, so servers are taken in order.
    registration* ordered = nullptr;
    while (list) {
      auto* next = list->next;
      list->next = ordered;
      ordered = list;
      list = next;
    }
    while (ordered) {
      std::unique_ptr<registration> r(ordered);
      ordered = ordered->next;
      if (close_only) {
        ::close(r->fd);
        registered.fetch_sub(1);
        continue;
      }
      auto id = next_id++;
      server_entry s;
      s.name = std::move(r->name);
      s.allowed = std::move(r->allowed);
      s.fd = r->fd;
      servers.emplace(id, std::move(s));
      watch(r->fd, EPOLLIN, egress_tag(id, k_egress_server));
    }
  }

  void forget_server(std::uint64_t id) {
    auto it = servers.find(id);
    if (it == servers.end()) return;
    auto conns = std::move(it->second.connections);
    for (auto cid : conns)
      close_connection(cid);
    ::epoll_ctl(epfd, EPOLL_CTL_DEL, it->second.fd, nullptr);
    ::close(it->second.fd);
    servers.erase(it);
    registered.fetch_sub(1);
  }

  // The forwarder's messages: one socket each.
  void on_server_readable(std::uint64_t id) {
    for (int round = 0; round < egress_handovers_per_event; ++round) {
      auto it = servers.find(id);
      if (it == servers.end()) return;
      char byte;
      iovec iov{&byte, 1};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      ssize_t n = ::recvmsg(it->second.fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      std::vector<int> fds;
      for (auto* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        std::size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
          fds.push_back(fd);
        }
      }
      if (n <= 0) {
        // The forwarder's end closed (or failed): the server is over.
        for (int fd : fds)
          ::close(fd);
        forget_server(id);
        return;
      }
      // One socket per message; any more are not ours to keep.
      for (std::size_t i = 0; i < fds.size(); ++i) {
        if (i == 0) accept_client(id, fds[i]);
        else ::close(fds[i]);
      }
    }
  }

  void accept_client(std::uint64_t server_id, int fd) {
    auto& s = servers.at(server_id);
    int type = 0;
    socklen_t len = sizeof type;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) {
      ::close(fd);
      return;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    if (s.connections.size() >= opts.max_connections_per_server) {
      // Not made a connection (that would be one more to bound): one try at
      // the answer, then closed.
      std::string reason =
        "too many connections for this server (at most " + std::to_string(opts.max_connections_per_server) + ")";
      auto text = egress::refusal_response(503, reason, {}, 0);
      [[maybe_unused]] auto n = ::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
      ::close(fd);
      report(s.name, {}, 0, reason);
      return;
    }
    auto id = next_id++;
    connection c;
    c.id = id;
    c.server = server_id;
    c.client = fd;
    c.deadline = egress_clock::now() + opts.head_timeout;
    s.connections.insert(id);
    auto& placed = connections.emplace(id, std::move(c)).first->second;
    update_interest(placed);
  }

  void report(const std::string& server, std::string host, int port, std::string reason) {
    if (!on_refused) return;
    egress_refusal r{server, std::move(host), port, std::move(reason)};
    try {
      on_refused(r);
    } catch (...) {
      // Documented: the callback must not throw; if it does, the loop goes on.
    }
  }

  // --- connections -------------------------------------------------------------

  connection* find(std::uint64_t id) {
    auto it = connections.find(id);
    return it == connections.end() ? nullptr : &it->second;
  }

  void close_upstream(connection& c) {
    if (c.upstream < 0) return;
    set_interest(c.upstream, c.upstream_mask, 0, 0);
    ::close(c.upstream);
    c.upstream = -1;
  }

  void close_connection(std::uint64_t id) {
    auto it = connections.find(id);
    if (it == connections.end()) return;
    auto& c = it->second;
    close_upstream(c);
    set_interest(c.client, c.client_mask, 0, 0);
    ::close(c.client);
    if (auto s = servers.find(c.server); s != servers.end()) s->second.connections.erase(id);
    connections.erase(it);
  }

  std::string server_name(const connection& c) {
    auto s = servers.find(c.server);
    return s == servers.end() ? std::string{} : s->second.name;
  }

  /// Answers `status` and closes. `policy`: a refusal the callback hears of
  /// (not an upstream that failed).
  void refuse(connection& c, int status, const std::string& reason, const std::string& host, int port,
              bool policy) {
    if (policy) report(server_name(c), host, port, reason);
    close_upstream(c);
    c.ph = phase::refusing;
    c.to_upstream.reset();
    c.to_client.reset(egress::refusal_response(status, reason, host, port));
    c.deadline = egress_clock::now() + egress_linger_time;
    send_refusal(c);
  }

  void send_refusal(connection& c) {
    auto r = egress_write(c.client, c.to_client);
    if (r == egress_io::failed) return close_connection(c.id);
    if (r == egress_io::again) return update_interest(c);
    ::shutdown(c.client, SHUT_WR);
    c.ph = phase::lingering;
    update_interest(c);
  }

  void linger(connection& c) {
    egress_buffer drop;
    std::size_t got = 0;
    auto r = egress_read(c.client, drop, 16 * 1024, &got);
    c.lingered += got;
    if (r == egress_io::eof || r == egress_io::failed || c.lingered > egress_linger_bytes) close_connection(c.id);
  }

  void read_head(connection& c) {
    auto& buf = c.to_upstream;
    const std::size_t limit = egress::max_head_bytes + 1;
    std::size_t room = buf.pending() < limit ? limit - buf.pending() : 0;
    auto r = egress_read(c.client, buf, room);
    if (r == egress_io::again) return;
    if (r == egress_io::failed) return close_connection(c.id);
    std::string_view bytes(buf.data.data() + buf.off, buf.pending());
    auto end = egress::find_head_end(bytes, c.scanned, &c.scanned);
    if (end == std::string_view::npos) {
      if (bytes.size() > egress::max_head_bytes)
        return refuse(c, 403, "request head over " + std::to_string(egress::max_head_bytes) + " bytes", {}, 0,
                      true);
      if (r == egress_io::eof) {
        if (bytes.empty()) return close_connection(c.id); // connected and left: nothing asked
        return refuse(c, 400, "malformed request: the connection ended inside the request head", {}, 0, true);
      }
      return;
    }
    if (r == egress_io::eof) c.client_eof = true;
    on_head(c, bytes.substr(0, end));
  }

  void on_head(connection& c, std::string_view head) {
    auto verdict = egress::parse_proxy_head(head);
    if (!verdict.request) return refuse(c, verdict.status, verdict.reason, verdict.host, verdict.port, true);
    auto& req = *verdict.request;
    const auto& allowed = servers.at(c.server).allowed;
    if (!egress::is_allowed(allowed, req.host, req.port))
      return refuse(c, 403, "not in the server's network allow-list", req.host, req.port, true);
    // What follows the head stays: the body's start (absolute URI) or the
    // tunnel's first bytes (CONNECT).
    std::string rest = c.to_upstream.data.substr(c.to_upstream.off + head.size());
    c.to_upstream.reset(req.is_connect ? std::move(rest) : egress::upstream_head(req) + rest);
    c.request = std::move(req);
    c.deadline = egress_clock::now() + opts.connect_timeout;
    resolve(c);
  }

  void resolve(connection& c) {
    const auto& host = c.request->host;
    if (oauth::parse_ip_literal(host)) {
      // A literal: getaddrinfo only parses it, at once, here.
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      hints.ai_flags = AI_NUMERICHOST;
      addrinfo* res = nullptr;
      egress_resolved out;
      out.conn = c.id;
      out.error = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
      if (out.error == 0 && res && res->ai_addrlen <= sizeof(sockaddr_storage)) {
        out.count = 1;
        out.addresses[0].len = res->ai_addrlen;
        std::memcpy(&out.addresses[0].addr, res->ai_addr, res->ai_addrlen);
      }
      if (res) ::freeaddrinfo(res);
      return on_resolved(c, out);
    }
    std::string msg(sizeof c.id, '\0');
    std::memcpy(&msg[0], &c.id, sizeof c.id);
    msg += host;
    ssize_t n;
    do {
      n = ::send(resolver_loop_end, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return refuse(c, 503, "the proxy's resolver is busy; try again", host, c.request->port, false);
    c.ph = phase::resolving;
    update_interest(c);
  }

  void on_resolver_readable() {
    for (int round = 0; round < 64; ++round) {
      egress_resolved out;
      ssize_t n = ::recv(resolver_loop_end, &out, sizeof out, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n != static_cast<ssize_t>(sizeof out)) return;
      auto* c = find(out.conn);
      if (!c || c->ph != phase::resolving) continue; // closed or timed out meanwhile
      on_resolved(*c, out);
    }
  }

  void on_resolved(connection& c, const egress_resolved& out) {
    const auto& host = c.request->host;
    const int port = c.request->port;
    if (out.error != 0)
      return refuse(c, 502, std::string("cannot resolve the name: ") + ::gai_strerror(out.error), host, port,
                    false);
    bool dropped = false;
    c.addresses.clear();
    for (std::uint32_t i = 0; i < out.count && i < egress_max_addresses; ++i) {
      auto a = out.addresses[i];
      auto ip = egress_ip_of(a.addr);
      if (!ip) continue;
      if (!egress::address_permitted(host, *ip)) {
        dropped = true;
        continue;
      }
      egress_set_port(a.addr, port);
      c.addresses.push_back(a);
    }
    if (c.addresses.empty()) {
      if (dropped)
        return refuse(c, 403,
                      "the name resolves to this host's loopback or unspecified address, which only a loopback "
                      "name (localhost, 127.0.0.1, [::1]) in the allow-list may reach",
                      host, port, true);
      return refuse(c, 502, "the name has no IPv4 or IPv6 address", host, port, false);
    }
    c.next_address = 0;
    connect_next(c);
  }

  void connect_next(connection& c) {
    close_upstream(c);
    while (c.next_address < c.addresses.size()) {
      const auto& a = c.addresses[c.next_address++];
      int fd = ::socket(a.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        c.last_connect_error = errno;
        continue;
      }
      int r = ::connect(fd, reinterpret_cast<const sockaddr*>(&a.addr), a.len);
      if (r == 0 || errno == EINPROGRESS) {
        c.upstream = fd;
        c.ph = phase::connecting;
        update_interest(c);
        return;
      }
      c.last_connect_error = errno;
      ::close(fd);
    }
    refuse(c, 502,
           std::string("cannot connect: ") + std::strerror(c.last_connect_error ? c.last_connect_error : EIO),
           c.request->host, c.request->port, false);
  }

  void on_connect_done(connection& c) {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(c.upstream, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err == EINPROGRESS) return;
    if (err != 0) {
      c.last_connect_error = err;
      return connect_next(c);
    }
    c.ph = phase::relaying;
    c.deadline = egress_clock::now() + opts.idle_timeout;
    if (c.request->is_connect) c.to_client.reset(egress::connect_established());
    relay(c);
  }

  // Moves what can move, both ways; half-closes follow the EOFs; the
  // connection ends when both ways are done, or on an error either side.
  void relay(connection& c) {
    const auto cap = opts.buffer_bytes;
    bool moved = false;
    auto pull = [&](int fd, egress_buffer& into, bool& eof) {
      if (eof || into.pending() >= cap) return true;
      std::size_t got = 0;
      auto r = egress_read(fd, into, cap - into.pending(), &got);
      if (got) moved = true;
      if (r == egress_io::eof) eof = true;
      return r != egress_io::failed;
    };
    auto push_out = [&](int fd, egress_buffer& from, bool peer_eof, bool& shut) {
      if (shut) return true;
      bool wrote = false;
      auto r = egress_write(fd, from, &wrote);
      if (wrote) moved = true;
      if (r == egress_io::failed) return false;
      if (r == egress_io::ok && peer_eof) {
        ::shutdown(fd, SHUT_WR);
        shut = true;
      }
      return true;
    };
    if (!pull(c.client, c.to_upstream, c.client_eof) || !pull(c.upstream, c.to_client, c.upstream_eof)
        || !push_out(c.upstream, c.to_upstream, c.client_eof, c.upstream_shut)
        || !push_out(c.client, c.to_client, c.upstream_eof, c.client_shut))
      return close_connection(c.id);
    if (c.client_shut && c.upstream_shut) return close_connection(c.id);
    if (moved) c.deadline = egress_clock::now() + opts.idle_timeout;
    update_interest(c);
  }

  void on_connection_event(std::uint64_t id, egress_fd_kind kind) {
    auto* c = find(id);
    if (!c) return;
    switch (c->ph) {
      case phase::head:
        if (kind == k_egress_client) read_head(*c);
        return;
      case phase::resolving: return;
      case phase::connecting:
        if (kind == k_egress_upstream) on_connect_done(*c);
        return;
      case phase::relaying: relay(*c); return;
      case phase::refusing: send_refusal(*c); return;
      case phase::lingering: linger(*c); return;
    }
  }

  void on_deadline(connection& c) {
    switch (c.ph) {
      case phase::head:
        return refuse(c, 403,
                      "no complete request head within " + std::to_string(opts.head_timeout.count()) + " ms", {},
                      0, true);
      case phase::resolving:
      case phase::connecting:
        return refuse(c, 504, "no connection within " + std::to_string(opts.connect_timeout.count()) + " ms",
                      c.request->host, c.request->port, false);
      case phase::relaying:
      case phase::refusing:
      case phase::lingering: return close_connection(c.id);
    }
  }

  void fire_deadlines() {
    auto now = egress_clock::now();
    std::vector<std::uint64_t> due;
    for (auto& [id, c] : connections)
      if (c.deadline <= now) due.push_back(id);
    for (auto id : due)
      if (auto* c = find(id); c && c->deadline <= now) guarded(id, [&] { on_deadline(*c); });
  }

  // One scan of the connections per turn: they are bounded (per server),
  // and a timer structure would cost more to keep than this does.
  int wait_ms() {
    if (connections.empty()) return -1;
    auto next = egress_clock::time_point::max();
    for (auto& [id, c] : connections)
      next = std::min(next, c.deadline);
    auto left = std::chrono::ceil<std::chrono::milliseconds>(next - egress_clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, 60 * 60 * 1000));
  }

  // An exception from the handling of one connection (bad_alloc, say)
  // closes that connection, not the loop.
  template <class F>
  void guarded(std::uint64_t conn_id, F&& f) {
    try {
      f();
    } catch (...) {
      try {
        close_connection(conn_id);
      } catch (...) {
      }
    }
  }

  void run() noexcept {
    std::vector<epoll_event> events(128);
    while (!stopping.load()) {
      int n = ::epoll_wait(epfd, events.data(), static_cast<int>(events.size()), wait_ms());
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < n; ++i) {
        auto data = events[i].data.u64;
        if (data == egress_wake_tag) {
          std::uint64_t v;
          while (::read(wakefd, &v, sizeof v) > 0) {
          }
          try {
            take_incoming(false);
          } catch (...) {
          }
          continue;
        }
        if (data == egress_resolver_tag) {
          try {
            on_resolver_readable();
          } catch (...) {
          }
          continue;
        }
        auto id = data >> 2;
        auto kind = static_cast<egress_fd_kind>(data & 3);
        if (kind == k_egress_server) {
          try {
            on_server_readable(id);
          } catch (...) {
            forget_server(id);
          }
          continue;
        }
        guarded(id, [&] { on_connection_event(id, kind); });
      }
      fire_deadlines();
    }
    // Stopping: every socket closes, with no answer.
    std::vector<std::uint64_t> ids;
    for (auto& [id, s] : servers)
      ids.push_back(id);
    for (auto id : ids)
      forget_server(id);
    take_incoming(true);
  }
};

egress_proxy::egress_proxy(std::function<void(const egress_refusal&)> on_refused)
    : egress_proxy(std::move(on_refused), egress_proxy_options{}) {}

egress_proxy::egress_proxy(std::function<void(const egress_refusal&)> on_refused, egress_proxy_options options)
    : impl_(std::make_unique<impl>(std::move(on_refused), options)) {}

egress_proxy::~egress_proxy() = default;

int egress_proxy::add_server(std::string server_name, std::vector<std::string> allowed) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::runtime_error(std::string("egress proxy: socketpair: ") + std::strerror(errno));
  auto r = std::make_unique<impl::registration>();
  r->name = std::move(server_name);
  r->allowed = egress::parse_allow_list(allowed).entries;
  r->fd = sv[0];
  impl_->registered.fetch_add(1);
  impl_->push(r.release());
  return sv[1];
}

std::size_t egress_proxy::server_count() const {
  return impl_->registered.load();
}

} // namespace mcprt::io
