#include "core/sse_endpoint.hpp"

#include "core/ascii.hpp"

namespace mcprt {

std::optional<http_url> resolve_sse_endpoint(const http_url& stream, std::string_view endpoint, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<http_url> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  endpoint = trim_space(endpoint);
  if (endpoint.empty()) return fail("the endpoint event is empty");
  if (endpoint.size() > max_sse_endpoint_bytes)
    return fail("the endpoint event is longer than " + std::to_string(max_sse_endpoint_bytes) + " bytes");

  std::string absolute;
  if (endpoint.find("://") != std::string_view::npos
      && endpoint.find("://") < endpoint.find_first_of("/?")) {
    absolute = std::string(endpoint);
  } else if (endpoint.substr(0, 2) == "//") {
    absolute = stream.scheme + ":" + std::string(endpoint);
  } else if (endpoint.front() == '/') {
    absolute = stream.origin() + std::string(endpoint);
  } else {
    // Relative to the stream's path: its query replaced, or its last
    // segment replaced.
    auto path = stream.target.substr(0, stream.target.find('?'));
    if (endpoint.front() == '?') {
      absolute = stream.origin() + path + std::string(endpoint);
    } else {
      auto slash = path.rfind('/');
      absolute = stream.origin() + path.substr(0, slash + 1) + std::string(endpoint);
    }
  }

  std::string why;
  auto url = http_url::parse(absolute, &why);
  if (!url) return fail("the endpoint is not a usable URL (" + why + ")");
  if (url->scheme != stream.scheme || !ascii_iequals(url->host, stream.host) || url->port != stream.port)
    // Not quoting the other host: it is the server's text, of any length
    // and encoding (found by fuzzing).
    return fail("the endpoint is on another origin than " + stream.origin()
                + "; refused, so that our requests and their headers stay with the configured server");
  return url;
}

} // namespace mcprt
