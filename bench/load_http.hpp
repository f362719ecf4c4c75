#pragma once

// The load generator's HTTP/1.1 connection: one blocking loopback socket, a
// request written with one send, the answer read with plain recv calls, its
// head through the runtime's own http_head_reader. What it costs per call is
// CPU the machine cannot give the server being measured; a client library
// that parses every header with std::regex and polls before every read
// costs about as much as the gateway it loads (docs/performance.md).

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace mcprt::bench {

struct load_reply {
  int status = 0;
  std::string content_type;
  std::string session_id; // Mcp-Session-Id
  std::string body;       // de-chunked
};

class load_http {
public:
  /// `keep_alive` false: a connection per request (Connection: close).
  load_http(int port, bool keep_alive, int timeout_s = 30);
  ~load_http();
  load_http(const load_http&) = delete;
  load_http& operator=(const load_http&) = delete;

  /// `headers`: whole header lines, each ending in "\r\n". Errors of the
  /// connection itself (connect, send, recv, a cut answer) start with
  /// "http error", as a caller that tries again looks for.
  std::optional<load_reply> request(std::string_view method, std::string_view path, std::string_view headers,
                                    std::string_view body, std::string& err);

  /// A GET whose body is a stream: `on_data` gets each piece of it (chunks
  /// decoded) until it returns false, the server closes, or `stop`. False
  /// when no stream began (no connection, or an answer other than 200).
  bool stream(std::string_view path, std::string_view headers,
              const std::function<bool(std::string_view)>& on_data, std::string& err);

  /// Ends a `stream` running on another thread.
  void stop();

private:
  std::optional<load_reply> request_once(std::string_view method, std::string_view path, std::string_view headers,
                                         std::string_view body, std::string& err);
  bool connect_once(std::string& err);
  /// Writes all of `req`; on failure the connection is dropped.
  bool send_all(const std::string& req, std::string& err);
  void drop();
  /// Appends what one recv brings to `buf_`; false on close or error.
  bool fill(std::string& err);
  bool read_head(load_reply& r, long long& length, bool& chunked, bool& closes, std::string& err);
  /// One chunk's data appended to `out` (a chunk of size 0: `last`).
  bool read_chunk(std::string& out, bool& last, std::string& err);

  int port_;
  bool keep_alive_;
  int timeout_s_;
  std::atomic<int> fd_{-1}; // stop() reads it from another thread
  std::mutex fd_mtx_;        // a close and stop()'s shutdown, one at a time
  std::string buf_;
  std::size_t at_ = 0;    // where the unread bytes of buf_ begin
  bool answered_ = false; // a byte of the answer came
};

} // namespace mcprt::bench
