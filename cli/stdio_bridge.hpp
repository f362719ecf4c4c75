#pragma once

// MCP over stdio bridged to one streamable HTTP endpoint. `mcprt gateway`
// runs it in front of the workspace daemon it verified; the test suite's
// `mcprt-test-bridge` runs it in front of any endpoint. It is a library of
// its own so that no flag of `mcprt gateway` has to name an endpoint.

#include <cstddef>
#include <string>

namespace mcprt::cli {

/// Reads stdin, writes stdout, logs to stderr, until stdin ends (0), a
/// signal (0), or the session is gone (1). `token` empty: no Authorization
/// header; else it goes to `url` and nowhere else.
int run_stdio_bridge(const std::string& url, const std::string& token);

namespace gateway_detail {

/// A stdin line that is not a JSON-RPC message to forward: the error
/// response to write instead (one line, no newline), else "".
/// `oversized`: the line was longer than the limit; `line` is its start.
std::string reject_line(const std::string& line, bool oversized, std::size_t limit);

/// Writes one message as one line: CR and LF (only whitespace in valid
/// JSON) become spaces.
std::string one_line(std::string message);

} // namespace gateway_detail

} // namespace mcprt::cli
