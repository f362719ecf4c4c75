#pragma once

// What both HTTP client transports (streamable HTTP and legacy HTTP+SSE)
// apply the same way: which configured headers may be sent, how a server's
// text appears in an error. One copy, because
// header validation guards against request smuggling and must not drift
// between transports.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mcprt::io {

/// Server text for an error message: at most `max` bytes, cut on a UTF-8
/// character boundary, control characters blanked.
std::string excerpt(std::string_view text, std::size_t max = 200);

/// A configured header the transports may send: a token name, and a value
/// without CR, LF or NUL (either would split the request).
bool valid_header_name(std::string_view name);
bool valid_header_value(std::string_view value);

/// Headers the transports set themselves (framing, session, resumption);
/// configured ones with these names are dropped.
bool transport_owned_header(std::string_view name);

/// The values of a request target's query (`?a=v&b=w`): a legacy SSE
/// endpoint's session id is among them, and is kept out of error texts.
std::vector<std::string> query_values(std::string_view target);

} // namespace mcprt::io
