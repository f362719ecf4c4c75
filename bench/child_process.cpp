// Child processes of the benchmarks, and what /proc says of them.

#include "child_process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <map>
#include <mutex>
#include <thread>

#include <httplib.h>

namespace mcprt::bench {

using clock_type = std::chrono::steady_clock;

// Own process group, so that stopping it also stops what it spawned.
child spawn(const std::vector<std::string>& argv, const std::string& out_file, const std::string& err_file,
            const std::vector<std::pair<std::string, std::string>>& env) {
  child c;
  c.out_file = out_file;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    int o = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int n = ::open("/dev/null", O_RDONLY);
    ::dup2(n, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    for (auto& [k, v] : env)
      ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  c.pid = pid;
  return c;
}

void stop(child& c) {
  if (c.pid <= 0) return;
  ::kill(-c.pid, SIGTERM);
  ::kill(c.pid, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(c.pid, nullptr, WNOHANG) == c.pid) {
      ::kill(-c.pid, SIGKILL);
      c.pid = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(-c.pid, SIGKILL);
  ::waitpid(c.pid, nullptr, 0);
  c.pid = -1;
}

bool alive(const child& c) { return c.pid > 0 && ::waitpid(c.pid, nullptr, WNOHANG) == 0; }

// The first line the child wrote to stdout, once it is there.
std::optional<std::string> first_line(const child& c, double timeout_s) {
  auto until = clock_type::now() + std::chrono::duration<double>(timeout_s);
  while (clock_type::now() < until) {
    std::ifstream in(c.out_file);
    std::string all((std::istreambuf_iterator<char>(in)), {});
    auto nl = all.find('\n');
    if (nl != std::string::npos) return all.substr(0, nl);
    if (!alive(c)) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

// "listening on http://127.0.0.1:PORT..." -> PORT
int port_of(const std::string& line) {
  auto p = line.find("127.0.0.1:");
  if (p == std::string::npos) return 0;
  return std::atoi(line.c_str() + p + 10);
}

// CPU seconds (user + system) of a process so far.
double proc_cpu_s(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), {});
  auto rp = s.rfind(')');
  if (rp == std::string::npos) return 0;
  std::istringstream fields(s.substr(rp + 2));
  std::vector<std::string> f;
  std::string tok;
  while (fields >> tok)
    f.push_back(tok);
  if (f.size() < 13) return 0;
  // f[0] is field 3 (state); utime and stime are fields 14 and 15.
  return static_cast<double>(std::stoull(f[11]) + std::stoull(f[12])) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

namespace {

/// The number after `key` ("VmHWM:") in /proc/PID/status; -1 without it.
double proc_status_number(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(key.size()));
  return -1;
}

} // namespace

// Peak resident set size of a process (VmHWM), in MiB.
double proc_peak_rss_mb(pid_t pid) {
  auto kib = proc_status_number(pid, "VmHWM:");
  return kib < 0 ? 0 : kib / 1024.0;
}

int proc_threads(pid_t pid) {
  return static_cast<int>(proc_status_number(pid, "Threads:"));
}

int free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  ::close(s);
  return port;
}

std::string owner_token(const std::string& home) {
  std::ifstream in(home + "/.mcprt/token");
  std::string line;
  std::getline(in, line);
  return line;
}

namespace {
std::mutex bench_tokens_mtx;
std::map<int, std::string> bench_tokens;
} // namespace

void use_token(int port, const std::string& token) {
  std::lock_guard<std::mutex> guard{bench_tokens_mtx};
  bench_tokens[port] = token;
}

std::string token_for(int port) {
  std::lock_guard<std::mutex> guard{bench_tokens_mtx};
  auto it = bench_tokens.find(port);
  return it == bench_tokens.end() ? std::string() : it->second;
}

bool wait_http(int port, const std::string& path, const std::function<bool(const nlohmann::json&)>& ok,
               double timeout_s) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(2, 0);
  if (auto t = token_for(port); !t.empty()) cli.set_bearer_token_auth(t.c_str());
  auto until = clock_type::now() + std::chrono::duration<double>(timeout_s);
  while (clock_type::now() < until) {
    if (auto res = cli.Get(path); res && res->status == 200) {
      auto j = nlohmann::json::parse(res->body, nullptr, false);
      if (!j.is_discarded() && ok(j)) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

} // namespace mcprt::bench
