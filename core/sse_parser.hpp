#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace mcprt {

/// Incremental text/event-stream parser (the WHATWG rules: LF, CR or CRLF
/// line ends, ':' comments, "field: value" with one optional space, data
/// lines joined with '\n', an event dispatched at a blank line only if it
/// has data, type "message" by default, a leading BOM ignored).
///
/// The bytes come from a server: no line and no event grows past
/// `max_event_bytes`, whatever the chunking.
class sse_parser {
 public:
  struct event {
    std::string type;
    std::string data;
    std::string id; // the last event id in force when it was dispatched
  };
  using sink = std::function<void(event&&)>;

  explicit sse_parser(std::size_t max_event_bytes = 64u << 20) : max_(max_event_bytes) {}

  /// False once a line or an event exceeded max_event_bytes (the parser
  /// then ignores further input).
  bool feed(std::string_view bytes, const sink& out);
  /// End of stream: an event without its final blank line is dispatched
  /// too (lenient).
  void finish(const sink& out);
  const std::string& last_event_id() const { return last_id_; }
  std::optional<long> retry_ms() const { return retry_; }

 private:
  void line(std::string_view l, const sink& out);
  void dispatch(const sink& out);

  std::size_t max_;
  bool failed_ = false;
  bool started_ = false;
  bool skip_lf_ = false;
  std::string buf_;
  std::string data_;
  bool has_data_ = false;
  std::string type_;
  std::string last_id_;
  std::optional<long> retry_;
};

} // namespace mcprt
