// The fixtures of the black-box daemon tests: the real `mcprt serve` on a
// temp workspace with real mcprt-test-server children, real HTTP on
// loopback, and readers for its output and event streams (frames as the
// daemon sends them, bytes unchanged). Every wait is on a condition with a
// deadline.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include "tests/cli/cli_test_util.hpp"
#include "tests/support/raw_http.hpp"
#include "tests/support/wait_for.hpp"

namespace mcprt_cli_test {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

inline std::chrono::milliseconds left_until(clock_type::time_point deadline) {
  return std::max(0ms, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()));
}

inline const char* const secret_value = "sekrit-value-7c1f";

/// Until `pid` is gone (exited, zombie or not); false if it still runs
/// after `timeout`.
inline bool gone_within(pid_t pid, std::chrono::milliseconds timeout) {
  return mcprt::test::wait_for_exit(pid, timeout);
}

// -- a spawned program with its output read under deadlines -----------------------------

class spawned {
public:
  /// Runs `program` (MCPRT_BIN by default) with `args`, HOME=home and every
  /// MCPRT_* variable cleared (then `env` applied).
  /// With `pipe_stdin`, its stdin is a pipe for `write` (else /dev/null).
  spawned(const std::vector<std::string>& args, const fs::path& home,
          const std::map<std::string, std::string>& env = {}, const std::string& program = MCPRT_BIN,
          bool pipe_stdin = false) {
    std::vector<std::string> argv_s{program};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    auto env_s = environment_without(
      [&](const std::string& key) { return key == "HOME" || key.rfind("MCPRT_", 0) == 0 || env.count(key); });
    env_s.push_back("HOME=" + home.string());
    for (auto& [k, v] : env)
      env_s.push_back(k + "=" + v);
    exec_image image(std::move(argv_s), std::move(env_s));
    int out[2], err[2], in[2] = {-1, -1};
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    if (pipe_stdin && ::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      int devnull = pipe_stdin ? in[0] : ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, 0);
      image.exec();
    }
    ::close(out[1]);
    ::close(err[1]);
    if (pipe_stdin) {
      ::close(in[0]);
      in_fd_ = in[1];
    }
    out_fd_ = out[0];
    err_fd_ = err[0];
    err_reader_ = std::thread([this] {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(err_fd_, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
        if (n <= 0) continue;
        std::lock_guard<std::mutex> guard{mtx_};
        err_.append(buf, static_cast<size_t>(n));
        err_grew_.notify_all();
      }
    });
  }

  ~spawned() {
    if (!exited_) {
      ::kill(pid_, SIGKILL);
      wait_exit(10s);
    }
    if (err_reader_.joinable()) err_reader_.join();
    close_stdin();
    ::close(out_fd_);
    ::close(err_fd_);
  }

  /// Writes `text` to its stdin (a pipe_stdin child); false when it closed.
  bool write(const std::string& text) {
    // A child that exited must give false here, not kill the test.
    static const bool no_sigpipe = (::signal(SIGPIPE, SIG_IGN), true);
    (void)no_sigpipe;
    std::size_t done = 0;
    while (in_fd_ >= 0 && done < text.size()) {
      auto n = ::write(in_fd_, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
    }
    return in_fd_ >= 0;
  }
  /// EOF on its stdin.
  void close_stdin() {
    if (in_fd_ >= 0) ::close(std::exchange(in_fd_, -1));
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

  /// Reads stdout lines until one contains `needle`; all lines read so far
  /// are kept in `seen`.
  bool line_containing(const std::string& needle, std::chrono::milliseconds timeout = 20s) {
    auto deadline = clock_type::now() + timeout;
    while (clock_type::now() < deadline) {
      auto l = line(left_until(deadline));
      if (!l) return false;
      seen.push_back(*l);
      if (l->find(needle) != std::string::npos) return true;
    }
    return false;
  }

  /// The exit code (128 + signal when killed), or nullopt at the deadline.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    if (exited_) return code_;
    if (!mcprt::test::wait_for_exit(pid_, timeout)) return std::nullopt;
    int status = 0;
    if (::waitpid(pid_, &status, 0) != pid_) return std::nullopt;
    exited_ = true;
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (err_reader_.joinable()) err_reader_.join();
    return code_;
  }

  std::string err() {
    std::lock_guard<std::mutex> guard{mtx_};
    return err_;
  }

  /// Waits until stderr contains `needle`; false at the deadline.
  bool err_contains(const std::string& needle, std::chrono::milliseconds timeout = 30s) {
    std::unique_lock<std::mutex> guard{mtx_};
    return err_grew_.wait_for(guard, timeout, [&] { return err_.find(needle) != std::string::npos; });
  }
  pid_t pid() const { return pid_; }
  void signal(int sig) { ::kill(pid_, sig); }

  std::vector<std::string> seen;

private:
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1, in_fd_ = -1;
  std::string out_;
  std::mutex mtx_;
  std::condition_variable err_grew_;
  std::string err_;
  std::thread err_reader_;
  bool exited_ = false;
  int code_ = -1;
};

// -- the daemons' bearer tokens ----------------------------------------------------------------

/// The token each daemon a test started requires, by port: what the raw
/// readers below send when a test names none. Empty for a daemon started
/// with --token-file (those tests send their token themselves).
inline std::map<int, std::string>& daemon_tokens() {
  static std::map<int, std::string> tokens;
  return tokens;
}

inline std::string daemon_token(int port) {
  auto it = daemon_tokens().find(port);
  return it == daemon_tokens().end() ? std::string() : it->second;
}

/// Adds `Authorization: Bearer <token of port>` after the request line of
/// raw bytes that carry none (a hostile request is still checked past the
/// token, as a client that has the token would send it).
inline std::string with_daemon_token(int port, const std::string& bytes) {
  auto token = daemon_token(port);
  if (token.empty()) return bytes;
  std::string lower = bytes;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  auto head_end = lower.find("\r\n\r\n");
  if (lower.substr(0, head_end).find("\nauthorization:") != std::string::npos) return bytes;
  auto eol = bytes.find("\r\n");
  if (eol == std::string::npos) return bytes;
  return bytes.substr(0, eol + 2) + "Authorization: Bearer " + token + "\r\n" + bytes.substr(eol + 2);
}

// -- a raw SSE reader (de-chunks; frames by blank lines) ---------------------------------------

struct sse_event {
  std::string id, kind, data, comment;
  json j() const { return json::parse(data, nullptr, false); }
};

class sse_stream {
public:
  sse_stream(int port, const std::map<std::string, std::string>& headers = {}, int rcvbuf = 0,
             const std::string& path = "/workspace/mcp/events") {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
    std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port)
                      + "\r\nAccept: text/event-stream\r\n";
    for (auto& [k, v] : headers)
      req += k + ": " + v + "\r\n";
    req += "\r\n";
    req = with_daemon_token(port, req);
    ok_ = ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  }
  ~sse_stream() {
    if (fd_ >= 0) ::close(fd_);
  }
  sse_stream(const sse_stream&) = delete;
  sse_stream& operator=(const sse_stream&) = delete;

  /// The status line's code, once the headers arrived.
  int status(std::chrono::milliseconds timeout = 10s) {
    auto deadline = clock_type::now() + timeout;
    while (!headers_done_ && fill(deadline)) {
    }
    return status_;
  }

  /// The next event or comment, or nullopt at EOF / deadline.
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
          else if (l.rfind(":", 0) == 0) ev.comment += l.substr(1);
        }
        return ev;
      }
      if (!fill(deadline)) return std::nullopt;
    }
  }

  /// The next event (comments skipped) whose kind is `kind` and that
  /// satisfies `pred`; every event passed over lands in `log`.
  std::optional<sse_event> wait_for(const std::string& kind, const std::function<bool(const json&)>& pred = {},
                                    std::chrono::milliseconds timeout = 30s) {
    auto deadline = clock_type::now() + timeout;
    while (clock_type::now() < deadline) {
      auto ev = next(left_until(deadline));
      if (!ev) return std::nullopt;
      if (ev->kind.empty()) continue;
      log.push_back(*ev);
      if (ev->kind == kind && (!pred || pred(ev->j()))) return ev;
    }
    return std::nullopt;
  }

  /// Leaves as a reader that went away does, but half-closed: the daemon
  /// sees the hang-up, and its close of the stream (closed_within) is
  /// still seen here.
  void hang_up() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
  }

  /// Reads (and discards) until the daemon closes the stream: true, or
  /// the deadline: false.
  bool closed_within(std::chrono::milliseconds timeout) {
    auto deadline = clock_type::now() + timeout;
    while (clock_type::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::max<long long>(left_until(deadline).count(), 1))) <= 0) continue;
      char buf[65536];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0 || (n < 0 && errno != EINTR)) return true;
    }
    return false;
  }

  bool ok() const { return ok_; }
  /// The daemon closed the stream (or it never opened).
  bool ended() const { return ended_ || fd_ < 0 || !ok_; }
  std::vector<sse_event> log;
  std::vector<std::string> raw_frames; // every frame's bytes as the daemon sent them, comments too

private:
  // Reads more and de-chunks into body_.
  bool fill(clock_type::time_point deadline) {
    auto left = left_until(deadline).count();
    if (left <= 0 || fd_ < 0) return false;
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left));
    if (r <= 0) return false;
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

// -- the fixtures ------------------------------------------------------------------------------

inline json test_server_config(std::vector<std::string> args) {
  return {{"command", test_server}, {"args", args}};
}

/// A CA, a certificate it signed for a server (a budget server, a workspace
/// node) and one for a client (a node, a host), and a rogue certificate
/// signed by another CA, with the openssl command (CAF over TLS).
inline bool make_certificates(const fs::path& dir) {
  fs::create_directories(dir);
  std::string d = dir.string();
  write_file(dir / "ext.cnf", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  std::string script =
    "set -e; cd '" + d + "'; "
    "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=fleet-ca 2>/dev/null; "
    "openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.pem -days 2 -subj /CN=other 2>/dev/null; "
    "for n in server node rogue; do "
    "  ca=ca; [ $n = rogue ] && ca=other-ca; "
    "  openssl req -newkey rsa:2048 -nodes -keyout $n.key -out $n.csr -subj /CN=$n 2>/dev/null; "
    "  openssl x509 -req -in $n.csr -CA $ca.pem -CAkey $ca.key -CAcreateserial -out $n.pem -days 2 -extfile ext.cnf 2>/dev/null; "
    "done";
  write_file(dir / "make.sh", script);
  return std::system(("bash '" + (dir / "make.sh").string() + "'").c_str()) == 0;
}

/// Gives `to_home` the owner's CAF identity that `from_home` holds (`mcprt
/// serve --caf-port`, `budget-server` or use_owner_tls made it there): one
/// owner, two homes, as a fleet of one user's daemons on one machine is.
inline void share_owner_identity(const fs::path& from_home, const fs::path& to_home) {
  auto from = from_home / ".mcprt" / "caf", to = to_home / ".mcprt" / "caf";
  fs::create_directories(to);
  fs::permissions(to_home / ".mcprt", fs::perms::owner_all, fs::perm_options::replace);
  fs::permissions(to, fs::perms::owner_all, fs::perm_options::replace);
  for (const char* name : {"cert.pem", "key.pem"}) {
    fs::copy_file(from / name, to / name, fs::copy_options::overwrite_existing);
    fs::permissions(to / name, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  }
}

/// The TLS flags of `who` (server, node or rogue), with the files
/// make_certificates wrote to `dir`; every end trusts the fleet's CA.
inline std::vector<std::string> tls_flags(const fs::path& dir, const std::string& who) {
  return {"--caf-tls-cert", (dir / (who + ".pem")).string(), "--caf-tls-key", (dir / (who + ".key")).string(),
          "--caf-tls-ca",   (dir / "ca.pem").string()};
}

/// `mcprt serve` on the fixture's workspace and home, and its HTTP API. No
/// servers are configured: each test writes the settings it needs.
class bare_daemon_test : public cli_test {
protected:
  void TearDown() override {
    // Under ASan/UBSan a report in the daemon must fail the test even when
    // the daemon is killed afterwards.
    if (daemon_) expect_no_sanitizer_report();
    daemon_.reset();
    cli_test::TearDown();
  }

  /// Starts the daemon; false (with a test failure) when its first stdout
  /// line is not its URL.
  /// `run_as`, when given, is a program and its arguments that exec the
  /// daemon in place (`setpriv --reuid=nobody ... --`).
  bool start(std::vector<std::string> extra = {}, const std::map<std::string, std::string>& env = {},
             const std::vector<std::string>& run_as = {}) {
    std::vector<std::string> args{"serve", "--workspace", ws_.string(), "--home", home_.string(), "--debounce-ms", "50"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string program = MCPRT_BIN;
    if (!run_as.empty()) {
      program = run_as.front();
      args.insert(args.begin(), MCPRT_BIN);
      args.insert(args.begin(), run_as.begin() + 1, run_as.end());
    }
    daemon_ = std::make_unique<spawned>(args, home_, env, program);
    auto first = daemon_->line(60s);
    if (!first || first->rfind("listening on http://", 0) != 0) {
      ADD_FAILURE() << "no 'listening on' line: " << first.value_or("<none>") << "\nstderr:\n" << daemon_->err();
      return false;
    }
    url_ = first->substr(std::string("listening on ").size());
    port_ = std::stoi(url_.substr(url_.rfind(':') + 1));
    // The owner's token, which a daemon without --token-file requires.
    token_.clear();
    if (std::find(extra.begin(), extra.end(), "--token-file") == extra.end())
      token_ = slurp(home_ / ".mcprt" / "token").substr(0, 64);
    daemon_tokens()[port_] = token_;
    return true;
  }

  /// SIGTERM and wait: a sanitizer's report at exit (leaks) fails the test too.
  void stop() {
    if (!daemon_) return;
    daemon_->signal(SIGTERM);
    daemon_->wait_exit(30s);
    expect_no_sanitizer_report();
    daemon_.reset();
  }

  void expect_no_sanitizer_report() const {
    auto err = daemon_->err();
    EXPECT_EQ(err.find("Sanitizer"), std::string::npos) << err;
    EXPECT_EQ(err.find("runtime error:"), std::string::npos) << err;
  }

  /// A client of the daemon with `token`, else the owner's token (none
  /// for a daemon started with --token-file).
  httplib::Client client(const std::string& token = {}) const {
    httplib::Client c(url_);
    c.set_read_timeout(60, 0);
    const auto& t = token.empty() ? token_ : token;
    if (!t.empty()) c.set_bearer_token_auth(t.c_str());
    return c;
  }

  /// A client that sends no token at all.
  httplib::Client stranger() const {
    httplib::Client c(url_);
    c.set_read_timeout(60, 0);
    return c;
  }

  httplib::Result get(const std::string& path) const { return client().Get(path.c_str()); }

  json get_json(const std::string& path) const {
    auto r = get(path);
    if (!r || r->status != 200) return json(nullptr);
    return json::parse(r->body, nullptr, false);
  }

  httplib::Result post(const std::string& path, const std::string& body = "", const std::string& token = {}) const {
    return client(token).Post(path.c_str(), body, "application/json");
  }

  json snapshot() const { return get_json("/workspace/mcp"); }

  /// The snapshot's entry for `name`; an empty object while there is none
  /// (a slow start under TSan), so that `.value()` works on it.
  json server(const std::string& name) const {
    auto s = snapshot();
    const json* x = find_server(s, name);
    return x ? *x : json::object();
  }

  /// Waits until `pred` holds, checking it again whenever the daemon
  /// publishes an event (every state change the tests wait for comes with
  /// one) and at least every 250 ms in case a change comes without one.
  bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 30s) const {
    auto deadline = clock_type::now() + timeout;
    if (pred()) return true;
    // Subscribed before the next check, so no change can slip between the
    // check and the wait.
    sse_stream events(port_);
    if (events.status() != 200) return pred();
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

  bool connected(const std::string& name, std::chrono::milliseconds timeout = 30s) const {
    return status_is(name, "connected", timeout);
  }

  run_result cli(std::vector<std::string> args) const {
    args.push_back("--workspace");
    args.push_back(ws_.string());
    return mcprt(args);
  }

  std::unique_ptr<spawned> daemon_;
  std::string url_;
  int port_ = 0;
  std::string token_; // the owner's, which the daemon requires
};

/// Stops the daemon with SIGTERM after each test instead of killing it, so
/// that what it reports on its way out fails the test too.
class graceful_daemon_test : public bare_daemon_test {
protected:
  void TearDown() override {
    stop();
    bare_daemon_test::TearDown();
  }
};

/// With user servers echo and calc (its env holds `secret_value`) and the
/// project's project-tools (pending approval).
class daemon_test : public bare_daemon_test {
protected:
  void SetUp() override {
    bare_daemon_test::SetUp();
    json calc = test_server_config({"--name-prefix", "calc_"});
    calc["env"] = {{"CALC_API_KEY", secret_value}};
    write_file(user_settings(), json{{"mcpServers", {{"echo", test_server_config({"--tools", "1"})}, {"calc", calc}}}}.dump(2));
    write_file(project_file(),
               json{{"mcpServers", {{"project-tools", test_server_config({"--name-prefix", "project_"})}}}}.dump(2));
  }
};

inline json body_of(const httplib::Result& r) {
  return r ? json::parse(r->body, nullptr, false) : json(nullptr);
}

inline bool is_json_error(const httplib::Result& r) {
  auto j = body_of(r);
  return j.is_object() && j.contains("error") && j["error"].is_string() && j.contains("message")
         && r->get_header_value("Content-Type").find("application/json") != std::string::npos;
}

// -- raw HTTP: what a well-behaved client library will not send -----------------------------

using mcprt::test::connect_to;
using mcprt::test::raw_reply;
using mcprt::test::raw_request_as_is;
using mcprt::test::read_reply;
using mcprt::test::send_all;

/// Sends `bytes` on a new connection, with the daemon's token when they
/// carry none, and reads one response.
inline raw_reply raw_request(int port, const std::string& bytes, std::chrono::milliseconds timeout = 20s) {
  int fd = connect_to(port);
  if (fd < 0) return {};
  send_all(fd, with_daemon_token(port, bytes));
  auto r = read_reply(fd, timeout);
  ::close(fd);
  return r;
}

/// One HTTP/1.1 request, `Connection: close`; the Host names the daemon
/// unless `headers` holds one (or "-Host" leaves it out); a body gets its
/// Content-Length.
inline std::string http_text(const std::string& method, const std::string& target, int port,
                             std::vector<std::string> headers = {}, const std::string& body = {}) {
  std::string out = method + " " + target + " HTTP/1.1\r\n";
  bool host = true;
  for (auto& h : headers) {
    if (h == "-Host") host = false;
    if (h.size() >= 5 && (h.compare(0, 5, "Host:") == 0 || h.compare(0, 5, "host:") == 0)) host = false;
  }
  if (host) out += "Host: 127.0.0.1:" + std::to_string(port) + "\r\n";
  for (auto& h : headers)
    if (h != "-Host") out += h + "\r\n";
  if (!body.empty() || method == "POST") out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += "Connection: close\r\n\r\n";
  return out + body;
}

/// The number of threads of process `pid` (/proc/PID/status).
inline int thread_count(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  return -1;
}

} // namespace mcprt_cli_test
