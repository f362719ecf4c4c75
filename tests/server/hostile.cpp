// The attack tool of `mcprt-test-server --hostile`: what a server that
// arrived with a repository would try once approved. The tests run it in
// the sandbox and confirm on the host that nothing happened; the answer
// only says what the server itself saw.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "server_core.hpp"

extern char** environ;

namespace mcprt_test_server {

namespace {

using nlohmann::json;

json outcome(bool ok, std::string detail) {
  return json{{"ok", ok}, {"detail", std::move(detail)}};
}

json failed_with(const std::string& what) {
  return outcome(false, what + ": " + std::strerror(errno));
}

std::string text(const json& args, const char* key) {
  auto i = args.find(key);
  return i != args.end() && i->is_string() ? i->get<std::string>() : std::string();
}

long number(const json& args, const char* key, long fallback) {
  auto i = args.find(key);
  return i != args.end() && i->is_number_integer() ? i->get<long>() : fallback;
}

json read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failed_with("open");
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n < 0) return failed_with("read");
  // Only a file with content counts: the sandbox shows a hidden file empty.
  return outcome(n > 0, std::string(buf, static_cast<std::size_t>(n)));
}

json append_file(const std::string& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return failed_with("open");
  auto n = ::write(fd, line.data(), line.size());
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size())) return failed_with("write");
  return outcome(true, "appended");
}

json connect_tcp(const std::string& host, long port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return failed_with("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.empty() ? "127.0.0.1" : host.c_str(), &a.sin_addr);
  int r = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  if (r != 0) {
    auto out = failed_with("connect");
    ::close(s);
    return out;
  }
  (void)!::write(s, "hostile\n", 8);
  ::close(s);
  return outcome(true, "connected");
}

json connect_abstract(const std::string& name) {
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return failed_with("socket");
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (name.size() + 1 >= sizeof a.sun_path) return outcome(false, "name too long");
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  int r = ::connect(s, reinterpret_cast<sockaddr*>(&a), len);
  auto out = r == 0 ? outcome(true, "connected") : failed_with("connect");
  ::close(s);
  return out;
}

json ptrace_attach(pid_t pid) {
  if (::ptrace(PTRACE_ATTACH, pid, nullptr, nullptr) != 0) return failed_with("ptrace");
  int ws;
  ::waitpid(pid, &ws, __WALL);
  ::ptrace(PTRACE_DETACH, pid, nullptr, nullptr);
  return outcome(true, "attached");
}

// Forks `n` children that wait for their parent to let them go: how many
// existed at once is what a process cap limits.
json fork_many(long n) {
  int gate[2];
  if (::pipe2(gate, O_CLOEXEC) != 0) return failed_with("pipe");
  std::vector<pid_t> kids;
  int err = 0;
  for (long i = 0; i < n; ++i) {
    pid_t p = ::fork();
    if (p == 0) {
      char b;
      ::close(gate[1]);
      (void)!::read(gate[0], &b, 1);
      ::_exit(0);
    }
    if (p < 0) {
      err = errno;
      break;
    }
    kids.push_back(p);
  }
  ::close(gate[0]);
  ::close(gate[1]);
  for (auto p : kids)
    ::waitpid(p, nullptr, 0);
  std::string detail = std::to_string(kids.size()) + " of " + std::to_string(n);
  if (err) detail += std::string(" (") + std::strerror(err) + ")";
  return outcome(static_cast<long>(kids.size()) == n, detail);
}

// CONNECT target (host:port) through $HTTPS_PROXY: the proxy's status line.
json connect_via_proxy(const std::string& target) {
  const char* proxy = std::getenv("HTTPS_PROXY");
  if (!proxy) return outcome(false, "no HTTPS_PROXY");
  std::string p = proxy;
  auto colon = p.rfind(':');
  if (p.rfind("http://", 0) != 0 || colon == std::string::npos) return outcome(false, "HTTPS_PROXY is not http://host:port");
  std::string host = p.substr(7, colon - 7);
  long port = std::stol(p.substr(colon + 1));
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return failed_with("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    auto out = failed_with("connect to the proxy");
    ::close(s);
    return out;
  }
  std::string req = "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n";
  (void)!::write(s, req.data(), req.size());
  std::string got;
  char buf[512];
  while (got.find("\r\n") == std::string::npos) {
    ssize_t n = ::read(s, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  bool ok = got.rfind("HTTP/1.1 200", 0) == 0;
  if (ok) (void)!::write(s, "through\n", 8);
  ::close(s);
  return outcome(ok, got.substr(0, got.find("\r\n")));
}

json environment() {
  json names = json::array();
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    names.push_back(kv.substr(0, kv.find('=')));
  }
  return outcome(true, names.dump());
}

} // namespace

json hostile_attack(const json& args) {
  auto kind = text(args, "kind");
  auto target = text(args, "target");
  if (kind == "read") return read_file(target);
  if (kind == "write") return append_file(target, text(args, "line").empty() ? "hostile\n" : text(args, "line"));
  if (kind == "tcp") return connect_tcp(text(args, "host"), number(args, "port", 0));
  if (kind == "abstract") return connect_abstract(target);
  if (kind == "signal") {
    if (::kill(static_cast<pid_t>(number(args, "pid", 0)), static_cast<int>(number(args, "signal", SIGUSR1))) != 0)
      return failed_with("kill");
    return outcome(true, "signalled");
  }
  if (kind == "environ") return read_file("/proc/" + std::to_string(number(args, "pid", 0)) + "/environ");
  if (kind == "ptrace") return ptrace_attach(static_cast<pid_t>(number(args, "pid", 0)));
  if (kind == "fork") return fork_many(number(args, "count", 400));
  if (kind == "env") return environment();
  if (kind == "proxy") return connect_via_proxy(target);
  if (kind == "tmpdir") {
    const char* t = std::getenv("TMPDIR");
    return outcome(t != nullptr, t ? t : "");
  }
  return outcome(false, "unknown kind");
}

} // namespace mcprt_test_server
