#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/http_url.hpp"

namespace mcprt {

/// Longest `endpoint` event we accept (a path with a session id is far
/// shorter; a longer one is a server misbehaving).
constexpr std::size_t max_sse_endpoint_bytes = 4096;

/// Resolves the data of a legacy HTTP+SSE (2024-11-05) `endpoint` event
/// against the URL of the SSE stream it came on: an absolute URL, a
/// scheme-relative `//host/...`, an absolute path `/messages?sessionId=…`,
/// a query `?sessionId=…` or a path relative to the stream's directory.
///
/// The server chooses this URL and every POST (with the configured headers,
/// credentials included) goes there, so only the stream's own origin
/// (scheme, host, port) is accepted. On failure returns nullopt and sets
/// `error`, which never quotes the endpoint (the server's text; its query
/// holds the session id).
std::optional<http_url> resolve_sse_endpoint(const http_url& stream, std::string_view endpoint,
                                             std::string* error = nullptr);

} // namespace mcprt
