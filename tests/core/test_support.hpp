#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/server_config.hpp"

namespace mcprt::test {

/// A server config from a JSON literal; fails the test on a parse error.
inline server_config make_server(const std::string& name, const nlohmann::json& spec,
                                 config_scope scope = config_scope::user) {
  auto r = parse_server_config(name, spec, scope, {"mcpServers", name});
  if (!r.config) throw std::runtime_error("bad test config: " + r.error->message);
  return *r.config;
}

inline server_map make_map(const nlohmann::json& servers, config_scope scope = config_scope::user) {
  server_map out;
  for (auto& [name, spec] : servers.items())
    out.emplace(name, make_server(name, spec, scope));
  return out;
}

} // namespace mcprt::test
