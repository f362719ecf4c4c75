// The sandbox's egress proxy (io/egress_proxy) with real sockets on
// loopback: the test plays the forwarder (a client connection handed over
// with SCM_RIGHTS), the sandboxed client and the hosts it asks for.

#include "io/egress_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/raw_http.hpp"

using namespace std::chrono_literals;
using mcprt::io::egress_proxy;
using mcprt::io::egress_proxy_options;
using mcprt::io::egress_refusal;

namespace {

using egress_test_clock = std::chrono::steady_clock;

int egress_poll_ms(egress_test_clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - egress_test_clock::now()).count();
  return static_cast<int>(std::max<long long>(left, 0));
}

/// A listening loopback socket on a port of its own.
int egress_listen(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0) {
    ::close(fd);
    return -1;
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

/// Connections waiting on a listener nobody accepts on: taken now, counted.
int egress_pending_accepts(int listen_fd) {
  ::fcntl(listen_fd, F_SETFL, ::fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
  int n = 0;
  for (;;) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return n;
    ::close(fd);
    ++n;
  }
}

/// Reads until `done` holds for what came, EOF or the deadline. `eof` says
/// whether the peer closed.
std::string egress_read_until(int fd, const std::function<bool(const std::string&)>& done,
                              std::chrono::milliseconds timeout = 10s, bool* eof = nullptr) {
  auto deadline = egress_test_clock::now() + timeout;
  std::string got;
  if (eof) *eof = false;
  while (!done(got)) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, egress_poll_ms(deadline));
    if (r == 0) break;
    if (r < 0 && errno == EINTR) continue;
    char buf[16384];
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (eof) *eof = true;
      break;
    }
    got.append(buf, static_cast<std::size_t>(n));
  }
  return got;
}

std::string egress_read_to_close(int fd, bool* eof, std::chrono::milliseconds timeout = 10s) {
  return egress_read_until(
    fd, [](const std::string&) { return false; }, timeout, eof);
}

std::string egress_read_head(int fd) {
  return egress_read_until(fd, [](const std::string& s) { return s.find("\r\n\r\n") != std::string::npos; });
}

/// Plays the forwarder: a loopback TCP connection whose accepted end goes to
/// the proxy over `forwarder` (one byte, the fd in SCM_RIGHTS); returns the
/// client's end.
int egress_hand_over(int forwarder) {
  int port = 0;
  int lfd = egress_listen(&port);
  int client = mcprt::test::connect_to(port);
  int accepted = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(lfd);
  char byte = 'c';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  auto* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &accepted, sizeof accepted);
  EXPECT_EQ(::sendmsg(forwarder, &msg, MSG_NOSIGNAL), 1) << std::strerror(errno);
  ::close(accepted);
  return client;
}

/// A host the proxy may connect to: accepts on its own thread, one
/// connection at a time, and counts them. `echo`: sends back what comes
/// until EOF; else answers one HTTP request and keeps its head.
class egress_upstream {
public:
  explicit egress_upstream(bool echo) : echo_(echo) {
    fd_ = egress_listen(&port_);
    thread_ = std::thread([this] { serve(); });
  }
  ~egress_upstream() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }
  std::string head() {
    std::lock_guard<std::mutex> guard{mtx_};
    return head_;
  }

private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      ++accepted_;
      if (echo_) {
        for (;;) {
          char buf[16384];
          auto n = ::recv(c, buf, sizeof buf, 0);
          if (n <= 0) break;
          if (!mcprt::test::send_all(c, std::string(buf, static_cast<std::size_t>(n)))) break;
        }
      } else {
        auto h = egress_read_head(c);
        {
          std::lock_guard<std::mutex> guard{mtx_};
          head_ = h;
        }
        mcprt::test::send_all(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
      }
      ::close(c);
    }
  }

  bool echo_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::mutex mtx_;
  std::string head_;
  std::thread thread_;
};

/// What the proxy reported, from its thread.
struct egress_refusals {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<egress_refusal> seen;

  std::function<void(const egress_refusal&)> callback() {
    return [this](const egress_refusal& r) {
      std::lock_guard<std::mutex> guard{mtx};
      seen.push_back(r);
      cv.notify_all();
    };
  }
  bool wait_for(std::size_t n, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock{mtx};
    return cv.wait_for(lock, timeout, [&] { return seen.size() >= n; });
  }
  std::vector<egress_refusal> all() {
    std::lock_guard<std::mutex> guard{mtx};
    return seen;
  }
};

/// Re-asks `pred` until it holds or the deadline passes (a count another
/// thread updates, right after a kernel notice the caller waited for).
bool egress_eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 10s) {
  auto deadline = egress_test_clock::now() + timeout;
  while (!pred()) {
    if (egress_test_clock::now() >= deadline) return false;
    ::poll(nullptr, 0, 1);
  }
  return true;
}

std::string egress_connect_line(const std::string& authority) {
  return "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n";
}

const std::string egress_established = "HTTP/1.1 200 Connection established\r\n\r\n";

} // namespace

TEST(EgressProxy, AnAllowedConnectReachesTheHostAndBytesFlowBothWays) {
  egress_upstream echo(true);
  egress_refusals refusals;
  egress_proxy proxy(refusals.callback());
  int forwarder = proxy.add_server("srv", {"127.0.0.1:" + std::to_string(echo.port())});
  EXPECT_EQ(proxy.server_count(), 1u);
  int client = egress_hand_over(forwarder);
  ASSERT_TRUE(mcprt::test::send_all(client, egress_connect_line("127.0.0.1:" + std::to_string(echo.port()))));
  EXPECT_EQ(egress_read_head(client), egress_established);

  // More than the proxy's buffers hold in either direction, written by one
  // thread while this one reads: what comes back is what went out.
  std::string payload;
  for (int i = 0; payload.size() < 300 * 1024; ++i)
    payload += "line " + std::to_string(i) + "\n";
  std::thread writer([&] {
    mcprt::test::send_all(client, payload);
    ::shutdown(client, SHUT_WR);
  });
  bool eof = false;
  auto back = egress_read_to_close(client, &eof);
  writer.join();
  EXPECT_EQ(back.size(), payload.size());
  EXPECT_TRUE(back == payload) << "the tunnel changed the bytes";
  EXPECT_TRUE(eof) << "the upstream's close reaches the client";
  EXPECT_EQ(echo.accepted(), 1);
  EXPECT_TRUE(refusals.all().empty());
  ::close(client);
  ::close(forwarder);
}

TEST(EgressProxy, ANameIsResolvedAndReachedThroughWhatItResolvesTo) {
  egress_upstream echo(true);
  egress_refusals refusals;
  egress_proxy proxy(refusals.callback());
  int forwarder = proxy.add_server("srv", {"LOCALHOST"});
  int client = egress_hand_over(forwarder);
  ASSERT_TRUE(mcprt::test::send_all(client, egress_connect_line("localhost:" + std::to_string(echo.port()))));
  ASSERT_EQ(egress_read_head(client), egress_established);
  ASSERT_TRUE(mcprt::test::send_all(client, "ping"));
  EXPECT_EQ(egress_read_until(client, [](const std::string& s) { return s.size() >= 4; }), "ping");
  EXPECT_EQ(echo.accepted(), 1);
  ::close(client);
  ::close(forwarder);
}

TEST(EgressProxy, AnAllowedAbsoluteUriRequestArrivesInOriginForm) {
  egress_upstream http(false);
  egress_refusals refusals;
  egress_proxy proxy(refusals.callback());
  auto authority = "127.0.0.1:" + std::to_string(http.port());
  int forwarder = proxy.add_server("srv", {"127.0.0.1"});
  int client = egress_hand_over(forwarder);
  ASSERT_TRUE(
    mcprt::test::send_all(client, "GET http://" + authority
                                    + "/mcp?x=1 HTTP/1.1\r\nHost: elsewhere.example\r\n"
                                      "Proxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\n"
                                      "Accept: */*\r\n\r\n"));
  bool eof = false;
  auto reply = egress_read_to_close(client, &eof);
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << reply;
  EXPECT_EQ(reply.substr(reply.size() >= 5 ? reply.size() - 5 : 0), "hello") << reply;
  EXPECT_TRUE(eof);
  auto head = http.head();
  EXPECT_EQ(head.rfind("GET /mcp?x=1 HTTP/1.1\r\nHost: " + authority + "\r\n", 0), 0u) << head;
  EXPECT_EQ(head.find("Proxy-"), std::string::npos) << head;
  EXPECT_EQ(head.find("elsewhere.example"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nAccept: */*\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nConnection: close\r\n"), std::string::npos) << head;
  EXPECT_TRUE(refusals.all().empty());
  ::close(client);
  ::close(forwarder);
}

TEST(EgressProxy, AHostNotAllowedIsRefusedWith403AndReported) {
  egress_refusals refusals;
  egress_proxy proxy(refusals.callback());
  int forwarder = proxy.add_server("gh-server", {"api.github.com"});
  int client = egress_hand_over(forwarder);
  ASSERT_TRUE(mcprt::test::send_all(client, egress_connect_line("evil.example:443")));
  bool eof = false;
  auto reply = egress_read_to_close(client, &eof);
  EXPECT_EQ(reply.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u) << reply;
  auto body = reply.substr(reply.find("\r\n\r\n") + 4);
  EXPECT_NE(body.find("evil.example:443"), std::string::npos) << body;
  EXPECT_NE(body.find("allow-list"), std::string::npos) << body;
  EXPECT_TRUE(eof) << "a refusal closes the connection";
  ASSERT_TRUE(refusals.wait_for(1));
  auto r = refusals.all().front();
  EXPECT_EQ(r.server, "gh-server");
  EXPECT_EQ(r.host, "evil.example");
  EXPECT_EQ(r.port, 443);
  EXPECT_NE(r.reason.find("allow-list"), std::string::npos) << r.reason;
  ::close(client);
  ::close(forwarder);
}

TEST(EgressProxy, OfTwoLoopbackListenersOnlyTheAllowedOneIsEverConnected) {
  egress_upstream allowed(true);
  int other_port = 0;
  int other = egress_listen(&other_port);
  ASSERT_GE(other, 0);
  egress_refusals refusals;
  egress_proxy proxy(refusals.callback());
  int forwarder = proxy.add_server("srv", {"127.0.0.1:" + std::to_string(allowed.port())});
  auto ask = [&](const std::string& request) {
    int client = egress_hand_over(forwarder);
    mcprt::test::send_all(client, request);
    auto reply = egress_read_head(client);
    ::close(client);
    return reply;
  };
  auto other_authority = "127.0.0.1:" + std::to_string(other_port);
  EXPECT_EQ(ask(egress_connect_line(other_authority)).rfind("HTTP/1.1 403 ", 0), 0u);
  EXPECT_EQ(ask("GET http://" + other_authority + "/ HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 403 ", 0), 0u);
  EXPECT_EQ(ask(egress_connect_line("localhost:" + std::to_string(allowed.port()))).rfind("HTTP/1.1 403 ", 0), 0u)
    << "the entry names 127.0.0.1, not localhost";
  EXPECT_EQ(ask(egress_connect_line("127.0.0.1:" + std::to_string(allowed.port()))), egress_established);
  ASSERT_TRUE(refusals.wait_for(3));
  EXPECT_EQ(egress_pending_accepts(other), 0) << "the listener not allowed was connected to";
  EXPECT_TRUE(egress_eventually([&] { return allowed.accepted() == 1; }));
  ::close(other);
  ::close(forwarder);
}

TEST(EgressProxy, AnOversizedHeadIsRefused) {
  egress_upstream http(false);
  egress_refusals refusals;
  egress_proxy proxy(refusals.callback());
  auto authority = "127.0.0.1:" + std::to_string(http.port());
  int forwarder = proxy.add_server("srv", {authority});
  int client = egress_hand_over(forwarder);
  std::string big = "GET http://" + authority + "/ HTTP/1.1\r\nX-Big: " + std::string(20000, 'x') + "\r\n\r\n";
  ASSERT_TRUE(mcprt::test::send_all(client, big));
  bool eof = false;
  auto reply = egress_read_to_close(client, &eof);
  EXPECT_EQ(reply.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u) << reply.substr(0, 200);
  EXPECT_NE(reply.find("16384"), std::string::npos) << reply.substr(0, 400);
  EXPECT_TRUE(eof);
  ASSERT_TRUE(refusals.wait_for(1));
  EXPECT_EQ(refusals.all().front().server, "srv");
  EXPECT_EQ(http.accepted(), 0);
  ::close(client);
  ::close(forwarder);
}

TEST(EgressProxy, AHeadNotCompleteInTimeIsRefused) {
  egress_refusals refusals;
  egress_proxy_options o;
  o.head_timeout = 200ms;
  egress_proxy proxy(refusals.callback(), o);
  int forwarder = proxy.add_server("srv", {"127.0.0.1"});
  int client = egress_hand_over(forwarder);
  ASSERT_TRUE(mcprt::test::send_all(client, "CONNECT 127.0.0.1:"));
  bool eof = false;
  auto reply = egress_read_to_close(client, &eof);
  EXPECT_EQ(reply.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u) << reply;
  EXPECT_NE(reply.find("within 200 ms"), std::string::npos) << reply;
  ASSERT_TRUE(refusals.wait_for(1));
  EXPECT_NE(refusals.all().front().reason.find("within 200 ms"), std::string::npos);
  ::close(client);
  ::close(forwarder);
}

TEST(EgressProxy, MalformedAndOriginFormRequestsAreRefused) {
  egress_refusals refusals;
  egress_proxy proxy(refusals.callback());
  int forwarder = proxy.add_server("srv", {"127.0.0.1"});
  auto ask = [&](const std::string& request) {
    int client = egress_hand_over(forwarder);
    mcprt::test::send_all(client, request);
    bool eof = false;
    auto reply = egress_read_to_close(client, &eof);
    ::close(client);
    return reply;
  };
  EXPECT_EQ(ask("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").rfind("HTTP/1.1 403 ", 0), 0u);
  EXPECT_EQ(ask("CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 400 ", 0), 0u);
  EXPECT_EQ(ask("hello\r\n\r\n").rfind("HTTP/1.1 400 ", 0), 0u);
  ASSERT_TRUE(refusals.wait_for(3));
}

TEST(EgressProxy, ConnectionsBeyondTheBoundAreRefused) {
  egress_upstream echo(true);
  egress_refusals refusals;
  egress_proxy_options o;
  o.max_connections_per_server = 2;
  egress_proxy proxy(refusals.callback(), o);
  int forwarder = proxy.add_server("srv", {"127.0.0.1"});
  int a = egress_hand_over(forwarder);
  int b = egress_hand_over(forwarder);
  int c = egress_hand_over(forwarder);
  bool eof = false;
  auto reply = egress_read_to_close(c, &eof);
  EXPECT_EQ(reply.rfind("HTTP/1.1 503 ", 0), 0u) << reply;
  EXPECT_NE(reply.find("at most 2"), std::string::npos) << reply;
  ASSERT_TRUE(refusals.wait_for(1));
  EXPECT_NE(refusals.all().front().reason.find("too many connections"), std::string::npos);
  // The two within the bound are served.
  ASSERT_TRUE(mcprt::test::send_all(a, egress_connect_line("127.0.0.1:" + std::to_string(echo.port()))));
  EXPECT_EQ(egress_read_head(a), egress_established);
  for (int fd : {a, b, c})
    ::close(fd);
  ::close(forwarder);
}

TEST(EgressProxy, ClosingTheForwarderEndForgetsTheServerAndItsConnections) {
  egress_upstream echo(true);
  egress_refusals refusals;
  egress_proxy proxy(refusals.callback());
  int first = proxy.add_server("first", {"127.0.0.1"});
  int second = proxy.add_server("second", {"127.0.0.1"});
  EXPECT_EQ(proxy.server_count(), 2u);
  int tunnel = egress_hand_over(first);
  ASSERT_TRUE(mcprt::test::send_all(tunnel, egress_connect_line("127.0.0.1:" + std::to_string(echo.port()))));
  ASSERT_EQ(egress_read_head(tunnel), egress_established);
  int waiting = egress_hand_over(first);
  ASSERT_TRUE(mcprt::test::send_all(waiting, "CONNECT 127.0.0.1:"));

  ::close(first);
  bool eof = false;
  egress_read_to_close(tunnel, &eof);
  EXPECT_TRUE(eof) << "a relayed connection of the server is closed";
  egress_read_to_close(waiting, &eof);
  EXPECT_TRUE(eof) << "a connection still sending its head is closed";
  EXPECT_TRUE(egress_eventually([&] { return proxy.server_count() == 1; })) << proxy.server_count();

  // The other server is still served.
  int client = egress_hand_over(second);
  ASSERT_TRUE(mcprt::test::send_all(client, egress_connect_line("127.0.0.1:" + std::to_string(echo.port()))));
  EXPECT_EQ(egress_read_head(client), egress_established);
  ::close(client);
  ::close(second);
  EXPECT_TRUE(egress_eventually([&] { return proxy.server_count() == 0; })) << proxy.server_count();
  ::close(tunnel);
  ::close(waiting);
}

TEST(EgressProxy, DestroyingTheProxyClosesEveryConnection) {
  egress_upstream echo(true);
  int client = -1;
  int forwarder = -1;
  {
    egress_proxy proxy([](const egress_refusal&) {});
    forwarder = proxy.add_server("srv", {"127.0.0.1"});
    client = egress_hand_over(forwarder);
    ASSERT_TRUE(mcprt::test::send_all(client, egress_connect_line("127.0.0.1:" + std::to_string(echo.port()))));
    ASSERT_EQ(egress_read_head(client), egress_established);
  }
  bool eof = false;
  egress_read_to_close(client, &eof, 5s);
  EXPECT_TRUE(eof);
  // The forwarder's end sees the proxy's end gone.
  char byte = 0;
  EXPECT_EQ(::send(forwarder, &byte, 1, MSG_NOSIGNAL), -1);
  ::close(client);
  ::close(forwarder);
}
