#include "core/line_reader.hpp"

#include "core/untrusted_text.hpp"

#include <algorithm>
#include <cstring>

namespace mcprt {

namespace {

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

} // namespace

std::string line_preview(std::string_view line, std::size_t max_bytes) {
  std::size_t cut = std::min(line.size(), max_bytes);
  // Back off to a code point start (at most three bytes: further back the
  // text is not UTF-8 anyway) so a valid character is not split.
  if (cut < line.size())
    for (int k = 0; k < 3 && cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80; ++k)
      --cut;
  // The preview lands in error messages, which reach JSON events and log
  // lines: escaping keeps it valid UTF-8 and on one line whatever the server
  // wrote.
  std::string out = escape_for_display(line.substr(0, cut));
  if (cut < line.size())
    out += "...";
  return out;
}

line_reader::line_reader(line_reader_limits limits) : limits_(limits) {
  // A zero limit would make every line oversized and every garbage line
  // fatal; treat it as the smallest meaningful value instead.
  limits_.max_line_bytes = std::max<std::size_t>(limits_.max_line_bytes, 1);
}

template <typename Line, typename Oversized>
void line_reader::split(const char* data, std::size_t n, Line&& on_line, Oversized&& on_oversized) {
  const char* p = data;
  const char* end = data + n;
  while (p < end && !error_) {
    auto* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    const char* seg_end = nl ? nl : end;
    auto seg = static_cast<std::size_t>(seg_end - p);
    if (discarding_) {
      // Dropping the rest of an oversized line.
    } else if (seg > limits_.max_line_bytes - partial_.size()) {
      std::string head = partial_.substr(0, 80);
      if (head.size() < 80)
        head.append(p, std::min(seg, 80 - head.size()));
      on_oversized(std::string_view(p, seg));
      // Give the memory back: the point is to stay bounded.
      std::string().swap(partial_);
      discarding_ = true;
      ++oversized_lines_;
      record_garbage("<line longer than " + std::to_string(limits_.max_line_bytes) +
                         " bytes, starting '" + line_preview(head) + "'>",
                     0);
    } else {
      partial_.append(p, seg);
    }
    if (!nl)
      break;
    if (discarding_)
      discarding_ = false;
    else if (auto line = take_line())
      on_line(std::move(*line));
    p = nl + 1;
  }
}

void line_reader::feed(const char* data, std::size_t n, std::vector<std::string>& out) {
  split(
    data, n, [&](std::string line) { out.push_back(std::move(line)); }, [](std::string_view) {});
}

void line_reader::feed(const char* data, std::size_t n, std::vector<line_piece>& out) {
  split(
    data, n, [&](std::string line) { out.push_back({std::move(line), false}); },
    [&](std::string_view rest_of_chunk) {
      if (limits_.oversized_prefix_bytes == 0) return;
      std::string start = partial_.substr(0, limits_.oversized_prefix_bytes);
      if (start.size() < limits_.oversized_prefix_bytes)
        start.append(rest_of_chunk.substr(0, limits_.oversized_prefix_bytes - start.size()));
      out.push_back({std::move(start), true});
    });
}

void line_reader::finish(std::vector<line_piece>& out) {
  if (!discarding_ && !error_)
    if (auto line = take_line())
      out.push_back({std::move(*line), false});
  discarding_ = false;
  partial_.clear();
}

std::optional<std::string> line_reader::take_line() {
  if (!partial_.empty() && partial_.back() == '\r')
    partial_.pop_back();
  if (is_blank(partial_)) {
    partial_.clear();
    return std::nullopt;
  }
  std::string line = std::move(partial_);
  partial_ = std::string();
  return line;
}

void line_reader::note_garbage(std::string_view line) {
  record_garbage("'" + line_preview(line) + "'", line.size());
}

void line_reader::note_valid() {
  garbage_lines_ = 0;
  garbage_bytes_ = 0;
}

void line_reader::record_garbage(std::string preview, std::size_t bytes) {
  if (error_)
    return;
  ++garbage_lines_;
  ++total_garbage_lines_;
  garbage_bytes_ += bytes;
  if (garbage_lines_ > limits_.max_garbage_lines)
    error_ = "server wrote " + std::to_string(garbage_lines_) +
             " lines that are not JSON-RPC (limit " + std::to_string(limits_.max_garbage_lines) +
             "); last: " + preview;
  else if (garbage_bytes_ > limits_.max_garbage_bytes)
    error_ = "server wrote " + std::to_string(garbage_bytes_) +
             " bytes that are not JSON-RPC (limit " + std::to_string(limits_.max_garbage_bytes) +
             "); last: " + preview;
}

} // namespace mcprt
