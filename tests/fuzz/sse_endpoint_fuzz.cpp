// The `endpoint` event of a legacy HTTP+SSE server (anyone's server)
// through resolve_sse_endpoint (core/sse_endpoint), which io/sse_transport
// uses to decide where our POSTs, with their headers, go.
//
// Input: the first line is the stream's URL (skipped unless it parses),
// the rest the event's data. Whatever the bytes: nothing crashes; a
// refusal has a short reason; an accepted endpoint is on exactly the
// stream's origin and reads back the same.

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/sse_endpoint.hpp"

namespace {
std::string lower(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto nl = in.find('\n');
  if (nl == std::string_view::npos) return 0;
  auto stream = mcprt::http_url::parse(in.substr(0, nl));
  if (!stream) return 0;
  std::string why;
  auto ep = mcprt::resolve_sse_endpoint(*stream, in.substr(nl + 1), &why);
  if (!ep) {
    // Bounded whatever the endpoint: it is never quoted.
    if (why.empty() || why.size() > 200 + stream->origin().size()) __builtin_trap();
    return 0;
  }
  if (ep->scheme != stream->scheme || lower(ep->host) != lower(stream->host) || ep->port != stream->port)
    __builtin_trap();
  if (ep->target.empty() || ep->target.front() != '/') __builtin_trap();
  auto again = mcprt::http_url::parse(ep->origin() + ep->target);
  if (!again || again->target != ep->target || again->origin() != ep->origin()) __builtin_trap();
  return 0;
}
