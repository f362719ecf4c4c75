// core/mcp_headers turns a server's tool schemas (untrusted) and a call's
// arguments into HTTP header fields. For any input: nothing throws, every
// field is `Mcp-Param-<token>` (or Mcp-Method / Mcp-Name) and every value
// is visible ASCII and spaces with none at either end, so no input can
// split a header or forge another; a schema accepted once is accepted
// again with the same headers (deterministic).
//
// Input: any bytes. As JSON: {"inputSchema": any, "arguments": any,
// "message": any, "header": any}.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/mcp_headers.hpp"
#include "core/untrusted_text.hpp"
#include "fuzz_checks.hpp"

namespace {

using mcprt::fuzz::require;

bool safe_value(std::string_view v) {
  if (v.empty() || v.front() == ' ' || v.back() == ' ') return false;
  for (char c : v)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return false;
  return true;
}

bool token(std::string_view v) {
  if (v.empty()) return false;
  for (char c : v)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
          || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos))
      return false;
  return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  mcprt::json_limits lim;
  lim.max_depth = 32;
  lim.replace_invalid_utf8 = true;
  auto parsed = mcprt::parse_bounded_json(std::string_view(reinterpret_cast<const char*>(data), size), lim);
  if (!parsed.ok() || !parsed.value.is_object()) return 0;
  auto& doc = parsed.value;
  auto schema = doc.value("inputSchema", nlohmann::json());
  auto args = doc.value("arguments", nlohmann::json());
  std::string why;
  auto headers = mcprt::tool_param_headers(schema, &why);
  require(headers.has_value() || !why.empty());
  if (headers) {
    auto again = mcprt::tool_param_headers(schema, nullptr);
    require(again && again->size() == headers->size());
    for (auto& [name, value] : mcprt::param_header_fields(*headers, args)) {
      require(name.rfind("Mcp-Param-", 0) == 0 && token(name.substr(10)));
      require(safe_value(value));
    }
  }
  for (auto& [name, value] : mcprt::mcp_request_headers(doc.value("message", nlohmann::json()))) {
    require((name == "Mcp-Method" || name == "Mcp-Name") && safe_value(value));
    // What a client sends decodes to what its body says.
    auto decoded = mcprt::decode_mcp_header_value(value);
    require(decoded.has_value());
    require(mcprt::mcp_header_value(*decoded) == value);
  }
  // A header value from anyone: decoding never throws, and what decodes
  // encodes to a value that decodes to it again.
  if (auto raw = doc.find("header"); raw != doc.end() && raw->is_string())
    if (auto decoded = mcprt::decode_mcp_header_value(raw->get<std::string>()))
      require(mcprt::decode_mcp_header_value(mcprt::mcp_header_value(*decoded)) == decoded);
  return 0;
}
