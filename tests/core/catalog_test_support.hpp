#pragma once

#include <string>
#include <vector>

#include "core/gateway_catalog.hpp"

namespace mcprt::test {

/// A connected server for a catalog, with the default prefix and tools of
/// these names (each described "d-<name>").
inline gateway_server_view server_view(const std::string& name, std::vector<std::string> tools = {}) {
  gateway_server_view s;
  s.name = name;
  s.prefix = default_gateway_prefix(name);
  s.available = true;
  for (auto& t : tools)
    s.tools.push_back({{"name", t}, {"description", "d-" + t}});
  return s;
}

} // namespace mcprt::test
