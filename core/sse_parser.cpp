#include "core/sse_parser.hpp"

#include <algorithm>

namespace mcprt {

namespace {
constexpr std::size_t npos = std::string_view::npos;
} // namespace

bool sse_parser::feed(std::string_view bytes, const sink& out) {
  if (failed_) return false;
  if (!started_) {
    // A UTF-8 BOM may open the stream (possibly split across chunks).
    static constexpr std::string_view bom = "\xEF\xBB\xBF";
    std::string probe = buf_ + std::string(bytes.substr(0, 3));
    if (probe.size() < 3 && bom.substr(0, probe.size()) == probe) {
      buf_ = probe;
      return true;
    }
    started_ = true;
    std::string all = buf_ + std::string(bytes);
    buf_.clear();
    std::string_view v(all);
    if (v.substr(0, 3) == bom) v.remove_prefix(3);
    return feed(v, out);
  }
  std::size_t i = 0;
  if (skip_lf_ && !bytes.empty()) {
    if (bytes[0] == '\n') i = 1;
    skip_lf_ = false;
  }
  while (i < bytes.size()) {
    auto nl = bytes.find_first_of("\r\n", i);
    if (nl == npos) {
      buf_.append(bytes.substr(i));
      break;
    }
    std::string_view l;
    std::string joined;
    if (buf_.empty()) {
      l = bytes.substr(i, nl - i);
    } else {
      joined = std::move(buf_);
      buf_.clear();
      joined.append(bytes.substr(i, nl - i));
      l = joined;
    }
    line(l, out);
    if (failed_) return false;
    i = nl + 1;
    if (bytes[nl] == '\r') {
      if (i < bytes.size()) {
        if (bytes[i] == '\n') ++i;
      } else {
        skip_lf_ = true;
      }
    }
  }
  if (buf_.size() + data_.size() > max_) {
    failed_ = true;
    buf_.clear();
    data_.clear();
    return false;
  }
  return true;
}

void sse_parser::finish(const sink& out) {
  if (failed_) return;
  if (!started_) {
    started_ = true;
    buf_.clear();
  }
  if (!buf_.empty()) {
    std::string l = std::move(buf_);
    buf_.clear();
    line(l, out);
  }
  dispatch(out);
}

void sse_parser::line(std::string_view l, const sink& out) {
  if (l.empty()) {
    dispatch(out);
    return;
  }
  // One chunk can hold a whole line of any length: the bound holds per
  // line too, or an `event:` or `id:` line would be kept whatever its size.
  if (l.size() > max_) {
    failed_ = true;
    buf_.clear();
    data_.clear();
    return;
  }
  if (l.front() == ':') return; // comment
  auto colon = l.find(':');
  std::string_view field = l.substr(0, colon);
  std::string_view value;
  if (colon != npos) {
    value = l.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    data_.append(value);
    data_.push_back('\n');
    has_data_ = true;
    if (data_.size() > max_) {
      failed_ = true;
      data_.clear();
    }
  } else if (field == "event") {
    type_ = std::string(value);
  } else if (field == "id") {
    if (value.find('\0') == npos) last_id_ = std::string(value);
  } else if (field == "retry") {
    if (!value.empty() && value.size() < 10 &&
        std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
      retry_ = std::stol(std::string(value));
  }
}

void sse_parser::dispatch(const sink& out) {
  if (!has_data_) {
    type_.clear();
    return;
  }
  event e;
  e.type = type_.empty() ? "message" : std::move(type_);
  data_.pop_back(); // the last '\n'
  e.data = std::move(data_);
  e.id = last_id_;
  data_.clear();
  type_.clear();
  has_data_ = false;
  out(std::move(e));
}

} // namespace mcprt
