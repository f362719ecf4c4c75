// A server's `httpUrl`/`url` from a settings file (anyone's repository)
// through http_url::parse (core/http_url), which io/http_transport uses.
//
// Whatever the bytes: nothing crashes; a rejected URL gets a short reason;
// an accepted one is http or https with a port in 1..65535, a target that
// starts with '/', a display without the query, and it reads back the same
// from its own origin and target (what the HTTP client is given).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/http_url.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string why;
  auto url = mcprt::http_url::parse(in, &why);
  if (!url) {
    if (why.empty() || why.size() > 120) __builtin_trap();
    return 0;
  }
  if (url->scheme != "http" && url->scheme != "https") __builtin_trap();
  if (url->port < 1 || url->port > 65535 || url->host.empty()) __builtin_trap();
  if (url->target.empty() || url->target.front() != '/') __builtin_trap();
  for (unsigned char c : url->host + url->target)
    if (c <= 0x20 || c == 0x7f || c == '#') __builtin_trap();
  auto q = url->target.find('?');
  auto path = url->target.substr(0, q);
  auto shown = url->origin() + path + (q == std::string::npos ? "" : "?…");
  if (url->display != shown) __builtin_trap();

  auto again = mcprt::http_url::parse(url->origin() + url->target);
  if (!again || again->scheme != url->scheme || again->host != url->host || again->port != url->port ||
      again->target != url->target || again->display != url->display)
    __builtin_trap();
  return 0;
}
