#include "core/mcp_headers.hpp"

#include <cmath>
#include <cstdint>

#include "core/ascii.hpp"
#include "core/oauth.hpp"

namespace mcprt {

using nlohmann::json;

bool is_modern_protocol(std::string_view version) {
  // Revisions are dates: they order as strings.
  return version.size() == 10 && version >= "2026-07-28";
}

std::string mcp_header_value(std::string_view value) {
  bool plain = !value.empty() && value.front() != ' ' && value.back() != ' ';
  for (char c : value) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e) plain = false;
  }
  bool sentinel = value.size() >= 11 && value.substr(0, 9) == "=?base64?" && value.substr(value.size() - 2) == "?=";
  if (plain && !sentinel) return std::string(value);
  return "=?base64?" + oauth::base64(value) + "?=";
}

std::optional<std::string> decode_mcp_header_value(std::string_view value) {
  for (char c : value) {
    auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u > 0x7e) return std::nullopt;
  }
  bool sentinel = value.size() >= 11 && value.substr(0, 9) == "=?base64?" && value.substr(value.size() - 2) == "?=";
  if (!sentinel) return std::string(value);
  auto b64 = value.substr(9, value.size() - 11);
  if (b64.size() % 4 != 0) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(b64.size() / 4 * 3);
  for (std::size_t i = 0; i < b64.size(); i += 4) {
    int d[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = b64[i + k];
      if (c == '=' && i + 4 == b64.size() && k >= 2) {
        d[k] = 0;
        ++pad;
      } else if (pad > 0 || (d[k] = digit(c)) < 0) {
        return std::nullopt;
      }
    }
    std::uint32_t n = (std::uint32_t(d[0]) << 18) | (std::uint32_t(d[1]) << 12) | (std::uint32_t(d[2]) << 6) | d[3];
    out.push_back(static_cast<char>(n >> 16));
    if (pad < 2) out.push_back(static_cast<char>((n >> 8) & 0xff));
    if (pad < 1) out.push_back(static_cast<char>(n & 0xff));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> mcp_request_headers(const json& msg) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!msg.is_object()) return out;
  auto method = msg.find("method");
  if (method == msg.end() || !method->is_string() || !msg.contains("id")) return out;
  const auto& m = method->get_ref<const std::string&>();
  out.emplace_back("Mcp-Method", mcp_header_value(m));
  const char* key = m == "tools/call" || m == "prompts/get" ? "name" : m == "resources/read" ? "uri" : nullptr;
  if (!key) return out;
  auto params = msg.find("params");
  if (params == msg.end() || !params->is_object()) return out;
  auto name = params->find(key);
  if (name != params->end() && name->is_string())
    out.emplace_back("Mcp-Name", mcp_header_value(name->get_ref<const std::string&>()));
  return out;
}

namespace {

bool header_tchar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
         || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// Every `x-mcp-header` below `node`: those on a chain of `properties`
// alone (`reachable`) are collected, any other is an error.
bool walk_param_headers(const json& node, bool reachable, std::vector<std::string>& path,
                        std::vector<param_header>& out, std::string& why, int depth) {
  if (depth > 64) {
    why = "inputSchema nested too deep";
    return false;
  }
  if (node.is_array()) {
    for (auto& x : node)
      if (!walk_param_headers(x, false, path, out, why, depth + 1)) return false;
    return true;
  }
  if (!node.is_object()) return true;
  if (auto h = node.find("x-mcp-header"); h != node.end()) {
    if (!reachable || path.empty()) {
      why = "x-mcp-header on a property not reached through `properties` alone";
      return false;
    }
    if (!h->is_string() || h->get_ref<const std::string&>().empty()) {
      why = "x-mcp-header is not a non-empty string";
      return false;
    }
    for (char c : h->get_ref<const std::string&>())
      if (!header_tchar(c)) {
        why = "x-mcp-header is not an HTTP token";
        return false;
      }
    auto type = node.find("type");
    if (type == node.end() || !type->is_string()
        || (*type != "string" && *type != "integer" && *type != "boolean")) {
      why = "x-mcp-header on a property that is not a string, integer or boolean";
      return false;
    }
    for (auto& o : out)
      if (ascii_iequals(o.name, h->get_ref<const std::string&>())) {
        why = "x-mcp-header names a header twice";
        return false;
      }
    out.push_back({path, h->get<std::string>()});
  }
  for (auto& [key, value] : node.items()) {
    if (key == "properties" && value.is_object() && reachable) {
      for (auto& [name, schema] : value.items()) {
        path.push_back(name);
        bool ok = walk_param_headers(schema, true, path, out, why, depth + 2);
        path.pop_back();
        if (!ok) return false;
      }
    } else if (key != "x-mcp-header") {
      // Anything under another keyword is not statically reachable (and
      // such a walk never extends `path`).
      if (!walk_param_headers(value, false, path, out, why, depth + 1)) return false;
    }
  }
  return true;
}

} // namespace

std::optional<std::vector<param_header>> tool_param_headers(const json& input_schema, std::string* why) {
  std::vector<param_header> out;
  std::vector<std::string> path;
  std::string reason;
  if (!walk_param_headers(input_schema, true, path, out, reason, 0)) {
    if (why) *why = reason;
    return std::nullopt;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> param_header_fields(const std::vector<param_header>& headers,
                                                                     const json& arguments) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& h : headers) {
    const json* at = &arguments;
    for (auto& key : h.path) {
      if (!at->is_object()) {
        at = nullptr;
        break;
      }
      auto it = at->find(key);
      if (it == at->end()) {
        at = nullptr;
        break;
      }
      at = &*it;
    }
    if (!at || at->is_null()) continue;
    std::string value;
    if (at->is_string()) value = at->get<std::string>();
    else if (at->is_boolean()) value = at->get<bool>() ? "true" : "false";
    else if (at->is_number_integer()) value = at->dump();
    else if (at->is_number_float() && std::fabs(at->get<double>()) < 9007199254740992.0
             && at->get<double>() == std::floor(at->get<double>()))
      value = std::to_string(static_cast<long long>(at->get<double>()));
    else continue; // not a value a header can carry; the server judges the body
    out.emplace_back("Mcp-Param-" + h.name, mcp_header_value(value));
  }
  return out;
}

} // namespace mcprt
