#include "load_http.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace mcprt::bench {

namespace {

bool same_name(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = line[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != name[i]) return false;
  }
  return true;
}

std::string_view value_of(std::string_view line, std::size_t name_size) {
  auto v = line.substr(name_size + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t'))
    v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t'))
    v.remove_suffix(1);
  return v;
}

bool has_token(std::string_view v, std::string_view token) {
  for (std::size_t i = 0; i + token.size() <= v.size(); ++i) {
    bool same = true;
    for (std::size_t k = 0; k < token.size() && same; ++k) {
      char c = v[i + k];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      same = c == token[k];
    }
    if (same) return true;
  }
  return false;
}

} // namespace

load_http::load_http(int port, bool keep_alive, int timeout_s)
    : port_(port), keep_alive_(keep_alive), timeout_s_(timeout_s) {}

load_http::~load_http() { drop(); }

void load_http::drop() {
  {
    // Not closed while stop() shuts it down: the number could be another
    // connection's by then.
    std::lock_guard<std::mutex> guard{fd_mtx_};
    int fd = fd_.exchange(-1);
    if (fd >= 0) ::close(fd);
  }
  buf_.clear();
  at_ = 0;
}

void load_http::stop() {
  std::lock_guard<std::mutex> guard{fd_mtx_};
  int fd = fd_.load();
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

bool load_http::connect_once(std::string& err) {
  if (fd_.load() >= 0) return true;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = "http error: socket: " + std::string(std::strerror(errno));
    return false;
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port_));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    err = "http error: connect: " + std::string(std::strerror(errno));
    ::close(fd);
    return false;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{timeout_s_, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  fd_ = fd;
  return true;
}

bool load_http::fill(std::string& err) {
  // What was read is dropped before more comes: all of it, or a long
  // prefix (a stream's bytes are never all read while a chunk is cut).
  if (at_ > 0 && (at_ == buf_.size() || at_ > 65536)) {
    buf_.erase(0, at_);
    at_ = 0;
  }
  char chunk[16384];
  for (;;) {
    auto n = ::recv(fd_.load(), chunk, sizeof chunk, 0);
    if (n > 0) {
      answered_ = true;
      buf_.append(chunk, static_cast<std::size_t>(n));
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    err = n == 0 ? "http error: the server closed the connection"
                 : "http error: recv: " + std::string(std::strerror(errno));
    return false;
  }
}

bool load_http::read_head(load_reply& r, long long& length, bool& chunked, bool& closes, std::string& err) {
  std::size_t end;
  while ((end = buf_.find("\r\n\r\n", at_)) == std::string::npos)
    if (!fill(err)) return false;
  std::string_view head(buf_.data() + at_, end - at_);
  at_ = end + 4;
  if (head.size() < 12 || head.substr(0, 7) != "HTTP/1.") {
    err = "http error: no status line";
    return false;
  }
  r.status = std::atoi(head.data() + 9);
  length = -1;
  chunked = false;
  closes = head[7] == '0';
  auto pos = head.find("\r\n");
  while (pos != std::string_view::npos) {
    auto next = head.find("\r\n", pos + 2);
    auto line = head.substr(pos + 2, next == std::string_view::npos ? std::string_view::npos : next - pos - 2);
    pos = next;
    if (same_name(line, "content-length")) length = std::atoll(std::string(value_of(line, 14)).c_str());
    else if (same_name(line, "transfer-encoding")) chunked = has_token(value_of(line, 17), "chunked");
    else if (same_name(line, "content-type")) r.content_type = value_of(line, 12);
    else if (same_name(line, "mcp-session-id")) r.session_id = value_of(line, 14);
    else if (same_name(line, "connection")) {
      auto v = value_of(line, 10);
      if (has_token(v, "close")) closes = true;
      else if (has_token(v, "keep-alive")) closes = false;
    }
  }
  if (r.status == 204 || r.status == 304 || (r.status >= 100 && r.status < 200)) length = 0;
  return true;
}

bool load_http::read_chunk(std::string& out, bool& last, std::string& err) {
  std::size_t crlf;
  while ((crlf = buf_.find("\r\n", at_)) == std::string::npos)
    if (!fill(err)) return false;
  auto size = std::strtoull(buf_.c_str() + at_, nullptr, 16);
  at_ = crlf + 2;
  while (buf_.size() - at_ < size + 2)
    if (!fill(err)) return false;
  out.append(buf_, at_, size);
  at_ += size + 2;
  last = size == 0;
  return true;
}

std::optional<load_reply> load_http::request(std::string_view method, std::string_view path,
                                             std::string_view headers, std::string_view body, std::string& err) {
  // A kept-alive connection the server closed while it was idle (its idle
  // timeout) fails before the first byte of an answer: once more, on a new
  // connection, as a client library does.
  bool reused = fd_.load() >= 0;
  auto r = request_once(method, path, headers, body, err);
  if (!r && reused && !answered_) r = request_once(method, path, headers, body, err);
  return r;
}

std::optional<load_reply> load_http::request_once(std::string_view method, std::string_view path,
                                                  std::string_view headers, std::string_view body, std::string& err) {
  answered_ = false;
  if (!connect_once(err)) return std::nullopt;
  std::string req;
  req.reserve(160 + headers.size() + body.size());
  req.append(method).append(" ").append(path).append(" HTTP/1.1\r\nHost: 127.0.0.1:").append(std::to_string(port_));
  req.append(keep_alive_ ? "\r\n" : "\r\nConnection: close\r\n");
  req.append(headers);
  if (!body.empty() || method == "POST")
    req.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  req.append("\r\n").append(body);
  std::size_t off = 0;
  while (off < req.size()) {
    auto n = ::send(fd_.load(), req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = "http error: send: " + std::string(std::strerror(errno));
      drop();
      return std::nullopt;
    }
    off += static_cast<std::size_t>(n);
  }
  load_reply r;
  long long length;
  bool chunked, closes;
  bool ok = read_head(r, length, chunked, closes, err);
  if (ok && chunked) {
    for (bool last = false; ok && !last;)
      ok = read_chunk(r.body, last, err);
  } else if (ok && length >= 0) {
    while (ok && buf_.size() - at_ < static_cast<std::size_t>(length))
      ok = fill(err);
    if (ok) {
      r.body.assign(buf_, at_, static_cast<std::size_t>(length));
      at_ += static_cast<std::size_t>(length);
    }
  } else if (ok) {
    // No length: the body ends where the connection does.
    std::string ignored;
    while (fill(ignored)) {}
    r.body.assign(buf_, at_, std::string::npos);
    closes = true;
  }
  if (!ok || closes || !keep_alive_) drop();
  if (!ok) return std::nullopt;
  return r;
}

bool load_http::stream(std::string_view path, std::string_view headers,
                       const std::function<bool(std::string_view)>& on_data, std::string& err) {
  if (!connect_once(err)) return false;
  std::string req;
  req.append("GET ").append(path).append(" HTTP/1.1\r\nHost: 127.0.0.1:").append(std::to_string(port_));
  req.append("\r\n").append(headers).append("\r\n");
  if (::send(fd_.load(), req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    err = "http error: send";
    drop();
    return false;
  }
  load_reply r;
  long long length;
  bool chunked, closes;
  bool ok = read_head(r, length, chunked, closes, err);
  if (ok && r.status != 200) {
    err = "GET " + std::string(path) + ": HTTP " + std::to_string(r.status);
    ok = false;
  }
  std::string piece;
  while (ok) {
    piece.clear();
    if (chunked) {
      bool last = false;
      ok = read_chunk(piece, last, err) && !last;
    } else {
      if (at_ == buf_.size()) ok = fill(err);
      piece.assign(buf_, at_, std::string::npos);
      at_ = buf_.size();
    }
    if (ok && !piece.empty() && !on_data(piece)) break;
  }
  drop();
  return true;
}

} // namespace mcprt::bench
