#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace mcprt::test {

/// A JSON-RPC response line carrying `result`.
inline std::string result_line(const nlohmann::json& id, const nlohmann::json& result) {
  return nlohmann::json{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}}.dump();
}

/// A JSON-RPC error response line.
inline std::string error_line(const nlohmann::json& id, int code, const std::string& message) {
  return nlohmann::json{{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}}.dump();
}

} // namespace mcprt::test
