// Raw HTTP/1.1 over loopback for tests: the bytes as given, the reply as
// the server sent it (what a well-behaved client library will not send or
// hides). Every read has a deadline.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace mcprt::test {

/// A connected socket to `addr:port` (IPv4 or IPv6 literal), or -1.
inline int connect_to(int port, const std::string& addr = "127.0.0.1") {
  bool v6 = addr.find(':') != std::string::npos;
  int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int rc;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET6, addr.c_str(), &a.sin6_addr);
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Writes all of `bytes`; false when the peer closed first.
inline bool send_all(int fd, const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    auto n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

struct raw_reply {
  int status = 0;      // 0: the daemon closed without a status line
  std::string head;    // status line and headers
  std::string body;    // de-chunked
  bool closed = false; // the daemon closed the connection
  bool complete = false;

  /// A header's value (name case-insensitive), "" when absent.
  std::string header(const std::string& name) const {
    std::istringstream in(head);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      auto colon = line.find(':');
      if (colon == std::string::npos || colon != name.size()) continue;
      bool same = true;
      for (std::size_t i = 0; i < colon; ++i)
        same = same && std::tolower(static_cast<unsigned char>(line[i])) == std::tolower(static_cast<unsigned char>(name[i]));
      if (!same) continue;
      auto v = line.substr(colon + 1);
      while (!v.empty() && v.front() == ' ')
        v.erase(0, 1);
      return v;
    }
    return {};
  }
  bool has_header(const std::string& name) const {
    return head.find("\n" + name + ":") != std::string::npos || !header(name).empty();
  }
  nlohmann::json j() const { return nlohmann::json::parse(body, nullptr, false); }
  /// A JSON error body {"error", "message"} with the given code.
  bool is_error(const std::string& code) const {
    auto b = j();
    return b.is_object() && b.value("error", "") == code && b.contains("message")
           && header("Content-Type").find("application/json") != std::string::npos;
  }
};

/// Reads one response from `fd` (or until the daemon closes, or the deadline).
inline raw_reply read_reply(int fd, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  raw_reply r;
  std::string raw;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool chunked = false;
  long long length = -1;
  std::size_t body_at = std::string::npos;
  auto try_finish = [&]() {
    if (body_at == std::string::npos) {
      auto end = raw.find("\r\n\r\n");
      if (end == std::string::npos) return false;
      r.head = raw.substr(0, end);
      body_at = end + 4;
      if (r.head.size() > 12 && r.head.rfind("HTTP/1.", 0) == 0) r.status = std::atoi(r.head.c_str() + 9);
      chunked = r.header("Transfer-Encoding").find("chunked") != std::string::npos;
      auto cl = r.header("Content-Length");
      if (!cl.empty()) length = std::atoll(cl.c_str());
      if (r.status == 204 || r.status == 304) length = 0;
    }
    auto body = raw.substr(body_at);
    if (chunked) {
      std::string out;
      std::size_t pos = 0;
      for (;;) {
        auto crlf = body.find("\r\n", pos);
        if (crlf == std::string::npos) return false;
        auto size = std::strtoul(body.substr(pos, crlf - pos).c_str(), nullptr, 16);
        if (size == 0) {
          r.body = out;
          return true;
        }
        if (body.size() < crlf + 2 + size + 2) return false;
        out += body.substr(crlf + 2, size);
        pos = crlf + 2 + size + 2;
      }
    }
    if (length >= 0 && body.size() >= static_cast<std::size_t>(length)) {
      r.body = body.substr(0, static_cast<std::size_t>(length));
      return true;
    }
    return false;
  };
  for (;;) {
    if (try_finish()) {
      r.complete = true;
      return r;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return r;
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return r;
    char buf[16384];
    auto got = ::recv(fd, buf, sizeof buf, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      r.closed = true;
      if (body_at != std::string::npos && !chunked && length < 0) r.body = raw.substr(body_at);
      else try_finish();
      return r;
    }
    raw.append(buf, static_cast<std::size_t>(got));
  }
}

/// Sends `bytes` as they are on a new connection and reads one response.
inline raw_reply raw_request_as_is(int port, const std::string& bytes, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  int fd = connect_to(port);
  if (fd < 0) return {};
  send_all(fd, bytes);
  auto r = read_reply(fd, timeout);
  ::close(fd);
  return r;
}

} // namespace mcprt::test
