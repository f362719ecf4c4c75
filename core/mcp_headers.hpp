#pragma once

// The HTTP headers MCP 2026-07-28 mirrors from a request's body (SEP-2243),
// so that intermediaries can route without parsing it. Pure: a message in,
// header fields out.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mcprt {

/// Does `version` carry its version, capabilities and identity in every
/// request (2026-07-28 and later) rather than in an initialize handshake?
bool is_modern_protocol(std::string_view version);

/// A header value as MCP sends it: as is when it is visible ASCII and
/// spaces with no space at either end and does not look like the sentinel;
/// else `=?base64?<base64 of the UTF-8>?=`.
std::string mcp_header_value(std::string_view value);

/// What a header value sent by mcp_header_value's rules stands for: the
/// value itself, or the decoded `=?base64?...?=`; nullopt when the value
/// has characters a header cannot carry or its base64 is broken.
std::optional<std::string> decode_mcp_header_value(std::string_view value);

/// `Mcp-Method` for every request, and `Mcp-Name` (params.name, or
/// params.uri) for tools/call, prompts/get and resources/read. Nothing for
/// a message that is not a request object.
std::vector<std::pair<std::string, std::string>> mcp_request_headers(const nlohmann::json& msg);

/// A tool parameter the server wants mirrored into `Mcp-Param-<name>`
/// (`x-mcp-header` in its inputSchema): where it sits in the arguments.
struct param_header {
  std::vector<std::string> path; // property names from the arguments' root
  std::string name;
};

/// The `x-mcp-header` annotations of an inputSchema, or nullopt (and `why`)
/// when one breaks the rules, which makes the whole tool unusable over
/// streamable HTTP: an annotation must be a non-empty HTTP token, unique
/// (case-insensitively) within the schema, on a string, integer or boolean
/// property reached from the root through `properties` alone (not through
/// items, a composition, a condition or a $ref).
std::optional<std::vector<param_header>> tool_param_headers(const nlohmann::json& input_schema, std::string* why);

/// The `Mcp-Param-*` headers of one call: each annotated value present in
/// `arguments` (null or missing: no header), as a string, a decimal
/// integer or true/false, encoded by mcp_header_value.
std::vector<std::pair<std::string, std::string>> param_header_fields(const std::vector<param_header>& headers,
                                                                     const nlohmann::json& arguments);

} // namespace mcprt
