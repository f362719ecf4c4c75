// The daemon's HTTP server as a guest of a reactor (http_server_options::
// run_on): requests are handled on the reactor's thread, a stop lets it go,
// and a reactor that stops first leaves the server running on a thread of
// its own. Real HTTP on loopback.

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "cli/http_server.hpp"
#include "io/reactor.hpp"
#include "tests/support/raw_http.hpp"

using namespace std::chrono_literals;
using mcprt::cli::http_exchange;
using mcprt::cli::http_handler;
using mcprt::cli::http_request;
using mcprt::cli::http_response;
using mcprt::cli::http_server;
using mcprt::cli::http_server_options;

namespace {

/// Answers every request with the id of the thread that handled it.
class thread_echo final : public http_handler {
public:
  std::optional<http_response> on_head(const http_request&) override { return std::nullopt; }
  void on_request(std::shared_ptr<http_exchange> ex) override {
    std::ostringstream id;
    id << std::this_thread::get_id();
    http_response r;
    r.content_type = "text/plain";
    r.body = id.str();
    ex->respond(std::move(r));
  }
};

/// One GET on a fresh connection; the body, or "" when it failed.
std::string get_body(int port) {
  auto r = mcprt::test::raw_request_as_is(port, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", 10s);
  return r.complete ? r.body : std::string{};
}

std::string this_thread_id() {
  std::ostringstream id;
  id << std::this_thread::get_id();
  return id.str();
}

/// The reactor's thread, as its guests see it.
std::string reactor_thread_of(mcprt::io::reactor& r) {
  struct probe final : mcprt::io::guest_loop {
    int fds[2]{-1, -1};
    std::mutex mtx;
    std::condition_variable cv;
    std::string id;
    probe() { [[maybe_unused]] auto rc = ::pipe(fds); }
    ~probe() override {
      ::close(fds[0]);
      ::close(fds[1]);
    }
    int fd() const override { return fds[0]; }
    std::optional<time_point> run_ready(bool) noexcept override {
      std::lock_guard<std::mutex> guard{mtx};
      id = this_thread_id();
      cv.notify_all();
      return std::nullopt;
    }
    void released(bool) noexcept override {}
  };
  auto p = std::make_shared<probe>();
  r.host(p);
  std::unique_lock<std::mutex> lock{p->mtx};
  p->cv.wait_for(lock, 10s, [&] { return !p->id.empty(); });
  return p->id;
}

TEST(HttpServerGuest, RequestsAreHandledOnTheReactorThread) {
  mcprt::io::reactor r;
  auto reactor_thread = reactor_thread_of(r);
  ASSERT_FALSE(reactor_thread.empty());
  thread_echo handler;
  http_server_options o;
  o.run_on = &r;
  http_server server{handler, o};
  std::string error;
  ASSERT_TRUE(server.listen("127.0.0.1", 0, error)) << error;
  EXPECT_EQ(get_body(server.port()), reactor_thread);
  EXPECT_EQ(get_body(server.port()), reactor_thread);
  server.stop(1s);
  // Let go: the reactor goes on with its other work.
  EXPECT_EQ(reactor_thread_of(r), reactor_thread);
}

TEST(HttpServerGuest, AReactorThatStopsFirstLeavesTheServerOnAThreadOfItsOwn) {
  thread_echo handler;
  std::optional<mcprt::io::reactor> r{std::in_place};
  auto reactor_thread = reactor_thread_of(*r);
  http_server_options o;
  o.run_on = &*r;
  http_server server{handler, o};
  std::string error;
  ASSERT_TRUE(server.listen("127.0.0.1", 0, error)) << error;
  ASSERT_EQ(get_body(server.port()), reactor_thread);
  r.reset();
  auto after = get_body(server.port());
  EXPECT_FALSE(after.empty());
  EXPECT_NE(after, reactor_thread);
  EXPECT_NE(after, this_thread_id());
  server.stop(1s);
}

TEST(HttpServerGuest, AServerWhoseReactorStopsAsItStartsServesAnyway) {
  thread_echo handler;
  http_server_options o;
  std::optional<mcprt::io::reactor> r{std::in_place};
  o.run_on = &*r;
  http_server server{handler, o};
  std::string error;
  ASSERT_TRUE(server.listen("127.0.0.1", 0, error)) << error;
  // Whether or not the reactor took the server before it stopped.
  r.reset();
  EXPECT_FALSE(get_body(server.port()).empty());
  server.stop(1s);
}

} // namespace
