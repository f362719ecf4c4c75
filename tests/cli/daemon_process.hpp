// A running `mcprt serve` for black-box tests: the real binary with its
// stdout and stderr read under deadlines, its HTTP API over loopback and its
// SSE event stream read from a raw socket (frames as the daemon sends them,
// bytes unchanged). Every wait is on a condition with a deadline.
//
// In a namespace of its own: serve_test.cpp has similar helpers of its own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include "tests/cli/cli_test_util.hpp"

namespace mcprt_cli_test::daemon {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

inline std::chrono::milliseconds left_until(clock_type::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
}

/// `program` (MCPRT_BIN by default) with `args`, HOME=home and no MCPRT_*
/// variables.
class process {
public:
  process(const std::vector<std::string>& args, const fs::path& home, const std::string& program = MCPRT_BIN) {
    std::vector<std::string> argv_s{program};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<std::string> env_s;
    for (char** e = environ; e && *e; ++e) {
      std::string kv = *e;
      auto key = kv.substr(0, kv.find('='));
      if (key == "HOME" || key.rfind("MCPRT_", 0) == 0) continue;
      env_s.push_back(kv);
    }
    env_s.push_back("HOME=" + home.string());
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, 0);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
    err_reader_ = std::thread([this] {
      char buf[4096];
      for (;;) {
        ssize_t n = ::read(err_fd_, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        std::lock_guard<std::mutex> guard{mtx_};
        err_.append(buf, static_cast<size_t>(n));
        err_grew_.notify_all();
      }
    });
  }

  ~process() {
    if (!exited_) {
      ::kill(pid_, SIGKILL);
      wait_exit(20s);
    }
    if (err_reader_.joinable()) err_reader_.join();
    ::close(out_fd_);
    ::close(err_fd_);
  }

  /// The next stdout line, or nullopt at EOF / deadline.
  std::optional<std::string> line(std::chrono::milliseconds timeout = 30s) {
    auto deadline = clock_type::now() + timeout;
    for (;;) {
      auto nl = out_.find('\n');
      if (nl != std::string::npos) {
        auto l = out_.substr(0, nl);
        out_.erase(0, nl + 1);
        return l;
      }
      auto left = left_until(deadline).count();
      if (left <= 0) return std::nullopt;
      pollfd p{out_fd_, POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return std::nullopt;
      char buf[4096];
      ssize_t n = ::read(out_fd_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      out_.append(buf, static_cast<size_t>(n));
    }
  }

  /// The exit code (128 + signal when killed), or nullopt at the deadline.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    if (exited_) return code_;
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    if (fd >= 0) {
      pollfd p{fd, POLLIN, 0};
      int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
      ::close(fd);
      if (ready != 1) return std::nullopt;
    }
    int status = 0;
    if (::waitpid(pid_, &status, fd >= 0 ? 0 : WNOHANG) != pid_) return std::nullopt;
    exited_ = true;
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (err_reader_.joinable()) err_reader_.join();
    return code_;
  }

  std::string err() {
    std::lock_guard<std::mutex> guard{mtx_};
    return err_;
  }

  bool err_contains(const std::string& needle, std::chrono::milliseconds timeout = 30s) {
    std::unique_lock<std::mutex> guard{mtx_};
    return err_grew_.wait_for(guard, timeout, [&] { return err_.find(needle) != std::string::npos; });
  }

  pid_t pid() const { return pid_; }
  void signal(int sig) { ::kill(pid_, sig); }

private:
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  std::string out_;
  std::mutex mtx_;
  std::condition_variable err_grew_;
  std::string err_;
  std::thread err_reader_;
  bool exited_ = false;
  int code_ = -1;
};

struct sse_event {
  std::string id, kind, data;
  json j() const { return json::parse(data, nullptr, false); }
};

/// GET /workspace/mcp/events on a raw socket; de-chunks and frames events.
class sse_stream {
public:
  explicit sse_stream(int port, const std::map<std::string, std::string>& headers = {}) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
    std::string req = "GET /workspace/mcp/events HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                      "\r\nAccept: text/event-stream\r\n";
    for (auto& [k, v] : headers) req += k + ": " + v + "\r\n";
    req += "\r\n";
    ok_ = ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  }
  ~sse_stream() {
    if (fd_ >= 0) ::close(fd_);
  }
  sse_stream(const sse_stream&) = delete;
  sse_stream& operator=(const sse_stream&) = delete;

  int status(std::chrono::milliseconds timeout = 10s) {
    auto deadline = clock_type::now() + timeout;
    while (!headers_done_ && fill(deadline)) {
    }
    return status_;
  }

  /// The next event (comments skipped), or nullopt at EOF / deadline.
  std::optional<sse_event> next(std::chrono::milliseconds timeout = 30s) {
    auto deadline = clock_type::now() + timeout;
    for (;;) {
      auto end = body_.find("\n\n");
      if (end != std::string::npos) {
        std::string frame = body_.substr(0, end);
        body_.erase(0, end + 2);
        raw_frames.push_back(frame);
        sse_event ev;
        std::istringstream in(frame);
        std::string l;
        while (std::getline(in, l)) {
          if (l.rfind("id: ", 0) == 0) ev.id = l.substr(4);
          else if (l.rfind("event: ", 0) == 0) ev.kind = l.substr(7);
          else if (l.rfind("data: ", 0) == 0) ev.data += l.substr(6);
        }
        if (ev.kind.empty() && ev.data.empty()) continue; // a keep-alive comment
        return ev;
      }
      if (!fill(deadline)) return std::nullopt;
    }
  }

  /// The next event of `kind` whose data satisfies `pred`.
  std::optional<sse_event> wait_for(const std::string& kind, const std::function<bool(const json&)>& pred = {},
                                    std::chrono::milliseconds timeout = 30s) {
    auto deadline = clock_type::now() + timeout;
    while (clock_type::now() < deadline) {
      auto ev = next(left_until(deadline));
      if (!ev) return std::nullopt;
      seen.push_back(*ev);
      if (ev->kind == kind && (!pred || pred(ev->j()))) return ev;
    }
    return std::nullopt;
  }

  bool ended() const { return ended_ || fd_ < 0 || !ok_; }

  std::vector<sse_event> seen;
  std::vector<std::string> raw_frames; // every frame's bytes, as sent

private:
  bool fill(clock_type::time_point deadline) {
    auto left = left_until(deadline).count();
    if (left <= 0 || fd_ < 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char buf[8192];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      ended_ = true;
      return false;
    }
    raw_.append(buf, static_cast<size_t>(n));
    if (!headers_done_) {
      auto end = raw_.find("\r\n\r\n");
      if (end == std::string::npos) return true;
      auto head = raw_.substr(0, end);
      raw_.erase(0, end + 4);
      headers_done_ = true;
      if (head.size() > 12) status_ = std::atoi(head.c_str() + 9);
      chunked_ = head.find("chunked") != std::string::npos;
    }
    if (!chunked_) {
      body_ += raw_;
      raw_.clear();
      return true;
    }
    for (;;) {
      auto crlf = raw_.find("\r\n");
      if (crlf == std::string::npos) break;
      auto size = std::strtoul(raw_.substr(0, crlf).c_str(), nullptr, 16);
      if (raw_.size() < crlf + 2 + size + 2) break;
      body_ += raw_.substr(crlf + 2, size);
      raw_.erase(0, crlf + 2 + size + 2);
      if (size == 0) break;
    }
    return true;
  }

  int fd_ = -1;
  bool ok_ = false;
  bool ended_ = false;
  bool headers_done_ = false;
  bool chunked_ = false;
  int status_ = 0;
  std::string raw_, body_;
};

/// `mcprt serve` on the fixture's workspace and home, and its HTTP API.
class daemon_test : public cli_test {
protected:
  void TearDown() override {
    stop();
    cli_test::TearDown();
  }

  /// Starts the daemon; false (with a test failure) when it does not print
  /// its URL.
  bool start(std::vector<std::string> extra = {}, const fs::path& home = {}) {
    std::vector<std::string> args{"serve", "--workspace", ws_.string(), "--home",
                                  (home.empty() ? home_ : home).string(), "--debounce-ms", "50"};
    args.insert(args.end(), extra.begin(), extra.end());
    daemon_ = std::make_unique<process>(args, home_);
    auto first = daemon_->line(60s);
    if (!first || first->rfind("listening on http://", 0) != 0) {
      ADD_FAILURE() << "no 'listening on' line: " << first.value_or("<none>") << "\nstderr:\n" << daemon_->err();
      return false;
    }
    url_ = first->substr(std::string("listening on ").size());
    port_ = std::stoi(url_.substr(url_.rfind(':') + 1));
    return true;
  }

  /// SIGTERM and wait; checks that no sanitizer reported anything.
  void stop() {
    if (!daemon_) return;
    daemon_->signal(SIGTERM);
    daemon_->wait_exit(30s);
    auto err = daemon_->err();
    EXPECT_EQ(err.find("Sanitizer"), std::string::npos) << err;
    EXPECT_EQ(err.find("runtime error:"), std::string::npos) << err;
    daemon_.reset();
  }

  httplib::Client client() const {
    httplib::Client c(url_);
    c.set_read_timeout(60, 0);
    return c;
  }

  httplib::Result get(const std::string& path) const { return client().Get(path.c_str()); }
  httplib::Result post(const std::string& path, const json& body = json::object()) const {
    return client().Post(path.c_str(), body.dump(), "application/json");
  }

  json snapshot() const {
    auto r = get("/workspace/mcp");
    return r && r->status == 200 ? json::parse(r->body, nullptr, false) : json(nullptr);
  }

  /// The snapshot's entry for `name`; an empty object when it is missing.
  json server(const std::string& name) const {
    auto snap = snapshot();
    const json* s = find_server(snap, name);
    return s ? *s : json::object();
  }

  /// Re-checks `pred` at every event and at least every 250 ms.
  bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 30s) const {
    auto deadline = clock_type::now() + timeout;
    if (pred()) return true;
    sse_stream events(port_);
    for (;;) {
      if (pred()) return true;
      auto left = left_until(deadline);
      if (left <= 0ms) return false;
      events.next(std::min<std::chrono::milliseconds>(left, 250ms));
      // A daemon that closed its stream is going away: nothing more changes.
      if (events.ended()) return pred();
    }
  }

  bool status_is(const std::string& name, const std::string& status, std::chrono::milliseconds timeout = 30s) const {
    return wait_until([&] { return server(name).value("status", "") == status; }, timeout);
  }

  std::unique_ptr<process> daemon_;
  std::string url_;
  int port_ = 0;
};

} // namespace mcprt_cli_test::daemon
