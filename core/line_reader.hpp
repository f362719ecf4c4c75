#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mcprt {

/// Limits for one newline-delimited JSON-RPC stream (a server's stdout).
struct line_reader_limits {
  /// A longer line is dropped while it streams in: a server that writes an
  /// endless line must not make us buffer it.
  std::size_t max_line_bytes = std::size_t{16} << 20;
  /// Garbage tolerated since the last valid JSON-RPC message. Servers print
  /// banners and stray logs to stdout, so a few bad lines are normal; a
  /// stream that is nothing but garbage (wrong command, a shell prompt) must
  /// still end in a clear error instead of a silent hang.
  std::size_t max_garbage_lines = 64;
  std::size_t max_garbage_bytes = std::size_t{1} << 20;
  /// For feed() into line_piece: an oversized line is handed out once, as
  /// its first this many bytes marked oversized (a client's message that is
  /// too long still gets an answer naming its id). 0: dropped silently.
  std::size_t oversized_prefix_bytes = 0;
};

/// A line as the piece-wise feed() gives it.
struct line_piece {
  std::string text;
  bool oversized = false; // text is the start of a line over max_line_bytes
};

/// Splits a byte stream into lines and keeps the garbage budget. Sans-I/O:
/// the caller feeds whatever chunks the transport delivers.
///
/// - '\n' ends a line; one trailing '\r' is stripped; blank lines (only
///   spaces, tabs, '\r') are skipped.
/// - A partial line is held until its '\n' arrives, but never more than
///   `max_line_bytes` of it: past that the line is discarded up to its
///   '\n' and counts as one garbage line (its bytes do not count towards
///   `max_garbage_bytes`, since they are neither buffered nor parsed).
/// - The caller reports lines it cannot use with `note_garbage` and valid
///   messages with `note_valid`. When the garbage since the last valid
///   message exceeds a limit, `error()` is set for good and `feed` yields
///   nothing more.
class line_reader {
public:
  explicit line_reader(line_reader_limits limits = {});

  /// Appends the complete lines in `data` to `out`.
  void feed(const char* data, std::size_t n, std::vector<std::string>& out);
  void feed(std::string_view data, std::vector<std::string>& out) {
    feed(data.data(), data.size(), out);
  }
  /// The same lines, plus the start of each oversized one (see
  /// line_reader_limits::oversized_prefix_bytes).
  void feed(const char* data, std::size_t n, std::vector<line_piece>& out);
  void feed(std::string_view data, std::vector<line_piece>& out) { feed(data.data(), data.size(), out); }
  /// At the end of the stream: a last line without its newline.
  void finish(std::vector<line_piece>& out);

  /// A line that is not JSON-RPC.
  void note_garbage(std::string_view line);
  /// A valid message: the server speaks the protocol, so older garbage was
  /// noise, not a sign of a broken stream.
  void note_valid();

  /// Fatal: the stream is garbage. Set once, never cleared.
  const std::optional<std::string>& error() const { return error_; }

  /// Bytes held for the current partial line (never above max_line_bytes).
  std::size_t buffered_bytes() const { return partial_.size(); }
  /// Whether the current line is being dropped for being too long.
  bool discarding() const { return discarding_; }

  std::size_t garbage_lines() const { return garbage_lines_; }
  std::size_t garbage_bytes() const { return garbage_bytes_; }
  std::size_t total_garbage_lines() const { return total_garbage_lines_; }
  std::size_t oversized_lines() const { return oversized_lines_; }

  const line_reader_limits& limits() const { return limits_; }

private:
  template <typename Line, typename Oversized>
  void split(const char* data, std::size_t n, Line&& on_line, Oversized&& on_oversized);
  void record_garbage(std::string preview, std::size_t bytes);
  // The held line, without its CR; nullopt when blank.
  std::optional<std::string> take_line();

  line_reader_limits limits_;
  std::string partial_;
  bool discarding_ = false;
  std::size_t garbage_lines_ = 0;
  std::size_t garbage_bytes_ = 0;
  std::size_t total_garbage_lines_ = 0;
  std::size_t oversized_lines_ = 0;
  std::optional<std::string> error_;
};

/// The first `max_bytes` of `line`, cut on a UTF-8 boundary and passed
/// through escape_for_display (control characters and invalid UTF-8 become
/// escapes), "..." appended when cut: safe to put in a log line, an error
/// message or a JSON string.
std::string line_preview(std::string_view line, std::size_t max_bytes = 80);

} // namespace mcprt
