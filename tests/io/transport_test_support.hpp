#pragma once

// What the HTTP transport tests share: a recorder of everything a transport
// reported, with deadline waits, and an in-process loopback HTTP server for
// behaviours our test server lacks.

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "io/http_transport.hpp"
#include "io/sse_transport.hpp"

namespace mcprt::io::test {

inline bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// Everything a transport reported. `overlapped` is set when two callbacks
// ran at once: the transports promise they never do.
struct recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> messages;
  std::vector<std::string> errors;
  int expired = 0;
  int closed = 0;
  std::atomic<int> concurrent{0};
  std::atomic<bool> overlapped{false};

  // Converts to either transport's callbacks.
  struct events_of {
    recorder* r;
    operator http_events() const {
      http_events ev;
      ev.on_message = [r = r](std::string m) { r->add([&] { r->messages.push_back(std::move(m)); }); };
      ev.on_error = [r = r](std::string e) { r->add([&] { r->errors.push_back(std::move(e)); }); };
      ev.on_session_expired = [r = r] { r->add([&] { ++r->expired; }); };
      ev.on_closed = [r = r] { r->add([&] { ++r->closed; }); };
      return ev;
    }
    operator sse_events() const {
      sse_events ev;
      ev.on_message = [r = r](std::string m) { r->add([&] { r->messages.push_back(std::move(m)); }); };
      ev.on_error = [r = r](std::string e) { r->add([&] { r->errors.push_back(std::move(e)); }); };
      ev.on_closed = [r = r] { r->add([&] { ++r->closed; }); };
      return ev;
    }
  };
  events_of events() { return {this}; }

  template <typename F>
  void add(F&& f) {
    if (concurrent.fetch_add(1) != 0) overlapped = true;
    {
      std::lock_guard<std::mutex> lock(mu);
      f();
    }
    concurrent.fetch_sub(1);
    cv.notify_all();
  }

  template <typename Pred>
  bool wait(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return pred(); });
  }

  // The first message containing `needle`, waiting for it.
  std::optional<std::string> message_with(const std::string& needle,
                                          std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::optional<std::string> found;
    wait(
      [&] {
        for (auto& m : messages)
          if (contains(m, needle)) {
            found = m;
            return true;
          }
        return false;
      },
      timeout);
    return found;
  }

  std::size_t message_count() {
    std::lock_guard<std::mutex> lock(mu);
    return messages.size();
  }
  int expired_count() {
    std::lock_guard<std::mutex> lock(mu);
    return expired;
  }
  int closed_count() {
    std::lock_guard<std::mutex> lock(mu);
    return closed;
  }
  std::vector<std::string> message_list() {
    std::lock_guard<std::mutex> lock(mu);
    return messages;
  }
  std::vector<std::string> error_list() {
    std::lock_guard<std::mutex> lock(mu);
    return errors;
  }
  bool wait_error(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return wait([&] { return !errors.empty(); }, timeout);
  }
};

// An in-process httplib server on a loopback port. Routes given to the
// constructor are in place before it listens.
class local_server {
public:
  explicit local_server(const std::function<void(httplib::Server&)>& routes = {}) {
    svr_.set_tcp_nodelay(true);
    // httplib listens with a backlog of 5: a test that connects 64 clients
    // at once would lose SYNs and wait seconds for their retransmission.
    // Listening again on the same socket widens it.
    int listen_fd = -1;
    svr_.set_socket_options([&listen_fd](int fd) {
      int yes = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
      listen_fd = fd;
    });
    if (routes) routes(svr_);
    port_ = svr_.bind_to_any_port("127.0.0.1");
    if (port_ > 0 && listen_fd >= 0) ::listen(listen_fd, 512);
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    // The socket listens already; wait so that stop() cannot come too early.
    while (!svr_.is_running())
      std::this_thread::yield();
  }
  ~local_server() {
    svr_.stop();
    thread_.join();
  }
  local_server(const local_server&) = delete;
  local_server& operator=(const local_server&) = delete;

  httplib::Server& svr() { return svr_; }
  int port() const { return port_; }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
};

} // namespace mcprt::io::test
