// What stands between mcprt and a remote MCP server in the tests: a forward
// proxy (tests/server/forward-proxy.mjs, Node: plain requests and CONNECT,
// every `*.test` host taken to 127.0.0.1) and nghttpx (Debian's
// nghttp2-proxy) as an HTTP/2 TLS front with a CA of the test's own.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/ports.hpp"

namespace mcprt::test {

/// A helper program whose stdout lines the test reads; killed (with its
/// process group) when the test ends.
class helper_process {
public:
  explicit helper_process(const std::vector<std::string>& argv) {
    int out[2], in[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return;
    if (::pipe2(in, O_CLOEXEC) != 0) {
      ::close(out[0]);
      ::close(out[1]);
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::dup2(out[1], 1);
      ::dup2(in[0], 0);
      std::vector<char*> args;
      for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(in[0]);
    stdin_ = in[1];
    reader_ = std::thread([this, fd = out[0]] {
      std::string buf;
      char chunk[4096];
      for (;;) {
        auto n = ::read(fd, chunk, sizeof chunk);
        if (n <= 0) break;
        buf.append(chunk, static_cast<std::size_t>(n));
        for (auto nl = buf.find('\n'); nl != std::string::npos; nl = buf.find('\n')) {
          std::lock_guard<std::mutex> lock(mu_);
          lines_.push_back(buf.substr(0, nl));
          buf.erase(0, nl + 1);
          cv_.notify_all();
        }
      }
      ::close(fd);
    });
  }
  ~helper_process() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (stdin_ >= 0) ::close(stdin_);
    if (reader_.joinable()) reader_.join();
  }
  helper_process(const helper_process&) = delete;
  helper_process& operator=(const helper_process&) = delete;

  /// The first line starting with `prefix`, waiting up to `timeout`.
  std::optional<std::string> line_with(const std::string& prefix,
                                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<std::string> found;
    cv_.wait_for(lock, timeout, [&] {
      for (const auto& l : lines_)
        if (l.rfind(prefix, 0) == 0) {
          found = l;
          return true;
        }
      return false;
    });
    return found;
  }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

inline bool have_program(const char* name) {
  return std::system((std::string("command -v ") + name + " >/dev/null 2>&1").c_str()) == 0;
}

/// Sets an environment variable for one scope and restores it after.
class scoped_env {
public:
  scoped_env(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~scoped_env() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

private:
  const char* name_;
  std::optional<std::string> old_;
};

/// The environment's proxies cleared for one scope (a CI machine may set
/// some).
struct no_env_proxies {
  std::vector<std::unique_ptr<scoped_env>> vars;
  no_env_proxies() {
    for (const char* n : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                          "no_proxy", "NO_PROXY"})
      vars.push_back(std::make_unique<scoped_env>(n, ""));
  }
};

/// tests/server/forward-proxy.mjs; `ok()` false when it did not start.
class forward_proxy {
public:
  /// `source_dir`: the checkout. `auth`: "USER:PASS" the proxy demands.
  forward_proxy(const std::string& source_dir, const std::string& auth = {}) {
    std::vector<std::string> argv{"node", source_dir + "/tests/server/forward-proxy.mjs"};
    if (!auth.empty()) {
      argv.push_back("--auth");
      argv.push_back(auth);
    }
    proc_ = std::make_unique<helper_process>(argv);
    if (auto line = proc_->line_with("listening ")) port_ = std::stoi(line->substr(10));
  }
  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  std::string url(const std::string& userinfo = {}) const {
    return "http://" + (userinfo.empty() ? "" : userinfo + "@") + "127.0.0.1:" + std::to_string(port_);
  }
  /// Whether it forwarded a request whose log line starts with `prefix`
  /// ("GET http://...", "CONNECT host:port"), waiting up to `timeout`.
  bool forwarded(const std::string& prefix, std::chrono::milliseconds timeout = std::chrono::seconds(2)) {
    return proc_->line_with(prefix, timeout).has_value();
  }

private:
  std::unique_ptr<helper_process> proc_;
  int port_ = 0;
};

/// nghttpx on a loopback port, TLS with HTTP/2 (and HTTP/1.1) by ALPN, in
/// front of a plain HTTP/1.1 backend; its certificate names mcp.test and
/// 127.0.0.1 and is signed by ca_file(). `why_not()` says why it could not
/// start, if it did not.
class h2_front {
public:
  explicit h2_front(int backend_port) {
    namespace fs = std::filesystem;
    const std::string exe = have_program("nghttpx") ? "nghttpx" : "/usr/sbin/nghttpx";
    if (!fs::exists(exe) && !have_program("nghttpx")) {
      why_ = "nghttpx is not installed (scripts/setup.sh installs nghttp2-proxy)";
      return;
    }
    dir_ = fs::temp_directory_path() / ("mcprt-h2-" + std::to_string(::getpid()) + "-" + std::to_string(backend_port));
    fs::create_directories(dir_);
    auto d = dir_.string();
    auto cmd = "cd '" + d + "' && "
               "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem "
               "-days 2 -subj /CN=test-ca 2>/dev/null && "
               "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout srv.key -out srv.csr "
               "-subj /CN=mcp.test 2>/dev/null && "
               "printf 'subjectAltName=DNS:mcp.test,IP:127.0.0.1\\n' > ext && "
               "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 "
               "-extfile ext 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) {
      why_ = "openssl could not make the test certificates";
      return;
    }
    port_ = unused_port();
    proc_ = std::make_unique<helper_process>(std::vector<std::string>{
      exe, "--frontend=127.0.0.1," + std::to_string(port_), "--backend=127.0.0.1," + std::to_string(backend_port),
      "--workers=1", "--conf=/dev/null", "--no-ocsp", "--log-level=ERROR", "--errorlog-file=/dev/stderr",
      d + "/srv.key", d + "/srv.pem"});
    if (!port_accepts(port_, std::chrono::seconds(10))) why_ = "nghttpx did not start";
  }
  ~h2_front() {
    proc_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  const std::string& why_not() const { return why_; }
  int port() const { return port_; }
  std::string ca_file() const { return (dir_ / "ca.pem").string(); }

private:
  std::filesystem::path dir_;
  std::unique_ptr<helper_process> proc_;
  int port_ = 0;
  std::string why_;
};

} // namespace mcprt::test
