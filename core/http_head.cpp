#include "core/http_head.hpp"

#include "core/ascii.hpp"

namespace mcprt {

http_head_reader::step http_head_reader::feed(std::string_view line) {
  if (complete_) return step::complete; // trailers
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
    line.remove_suffix(1);
  if (line.substr(0, 5) == "HTTP/") {
    head_ = {};
    bytes_ = 0;
    in_head_ = true;
    auto sp = line.find(' ');
    if (sp != std::string_view::npos) {
      auto rest = line.substr(sp + 1);
      int status = 0;
      std::size_t i = 0;
      for (; i < rest.size() && i < 3 && rest[i] >= '0' && rest[i] <= '9'; ++i)
        status = status * 10 + (rest[i] - '0');
      head_.status = status;
      if (i < rest.size()) head_.reason = std::string(trim_space(rest.substr(i)));
    }
    return step::more;
  }
  if (!in_head_) return step::more;
  if (line.empty()) {
    in_head_ = false;
    if (head_.status >= 200) {
      complete_ = true;
      return step::complete;
    }
    return step::more; // 1xx: the final head follows
  }
  bytes_ += line.size();
  if (head_.headers.size() >= max_headers || bytes_ > max_bytes) return step::too_large;
  auto colon = line.find(':');
  if (colon == std::string_view::npos) return step::more; // obsolete line folding: ignored
  head_.headers.emplace_back(std::string(trim_space(line.substr(0, colon))),
                             std::string(trim_space(line.substr(colon + 1))));
  return step::more;
}

} // namespace mcprt
