#pragma once

// A response head as an HTTP client receives it, a line at a time (libcurl
// hands over each header line): the status line, header lines, the blank
// line that ends it, 1xx heads that a final one follows. Pure, so the
// server's bytes are fuzzed here rather than behind a socket.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mcprt {

struct http_head {
  int status = 0; // 0 until a status line came
  std::string reason;
  /// In the order received; names as the server spelled them, values
  /// trimmed of spaces and tabs.
  std::vector<std::pair<std::string, std::string>> headers;
};

class http_head_reader {
public:
  /// Bounds on one head: a server must not make us keep an endless list.
  static constexpr std::size_t max_headers = 256;
  static constexpr std::size_t max_bytes = 64 * 1024;

  enum class step {
    more,     // keep feeding lines
    complete, // a final head (status >= 200) ended: head() has it
    too_large // over the bounds: give up on the response
  };

  /// One line, with or without its CR LF. A status line ("HTTP/...")
  /// starts a head afresh (the 1xx before it is forgotten); a blank line
  /// ends it. Lines before a status line, and after a complete head
  /// (trailers), are ignored.
  step feed(std::string_view line);

  const http_head& head() const { return head_; }
  bool complete() const { return complete_; }

private:
  http_head head_;
  std::size_t bytes_ = 0;
  bool in_head_ = false;
  bool complete_ = false;
};

} // namespace mcprt
