#include "load_http.hpp"

#include "core/ascii.hpp"
#include "core/http_head.hpp"

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

/// Whether a header value mentions `token` (any case): enough for the two
/// values this client looks at, "chunked" and "close".
bool has_token(std::string_view value, std::string_view token) {
  return ascii_lower(value).find(token) != std::string::npos;
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

bool load_http::send_all(const std::string& req, std::string& err) {
  std::size_t off = 0;
  while (off < req.size()) {
    auto n = ::send(fd_.load(), req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = "http error: send: " + std::string(std::strerror(errno));
      drop();
      return false;
    }
    off += static_cast<std::size_t>(n);
  }
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
  // A head, or 1xx heads and then the final one, a line at a time.
  http_head_reader reader;
  for (;;) {
    std::size_t eol;
    while ((eol = buf_.find("\r\n", at_)) == std::string::npos)
      if (!fill(err)) return false;
    auto step = reader.feed(std::string_view(buf_).substr(at_, eol - at_));
    at_ = eol + 2;
    if (step == http_head_reader::step::complete) break;
    if (step == http_head_reader::step::too_large) {
      err = "http error: the response head is too large";
      return false;
    }
  }
  auto& head = reader.head();
  r.status = head.status;
  length = -1;
  chunked = false;
  closes = false;
  for (auto& [name, value] : head.headers) {
    if (ascii_iequals(name, "content-length")) length = std::atoll(value.c_str());
    else if (ascii_iequals(name, "transfer-encoding")) chunked = has_token(value, "chunked");
    else if (ascii_iequals(name, "content-type")) r.content_type = value;
    else if (ascii_iequals(name, "mcp-session-id")) r.session_id = value;
    else if (ascii_iequals(name, "connection")) closes = has_token(value, "close");
  }
  if (r.status == 204 || r.status == 304) length = 0;
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
  if (!send_all(req, err)) return std::nullopt;
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
  if (!send_all(req, err)) return false;
  load_reply r;
  long long length;
  bool chunked, closes;
  bool ok = read_head(r, length, chunked, closes, err);
  if (ok && r.status != 200) {
    err = "GET " + std::string(path) + ": HTTP " + std::to_string(r.status);
    ok = false;
  }
  const bool began = ok;
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
  return began;
}

} // namespace mcprt::bench
