#include "core/tool_filter.hpp"

#include <algorithm>

namespace mcprt {

namespace {

bool include_matches(const std::string& entry, const std::string& tool) {
  if (entry == tool)
    return true;
  // `name(args...)`: the reference matches on the `name(` prefix.
  return entry.size() > tool.size() && entry.compare(0, tool.size(), tool) == 0 &&
         entry[tool.size()] == '(';
}

} // namespace

bool passes(const std::string& tool, const std::optional<std::vector<std::string>>& include,
            const std::optional<std::vector<std::string>>& exclude) {
  if (exclude && std::find(exclude->begin(), exclude->end(), tool) != exclude->end())
    return false;
  if (!include)
    return true;
  return std::any_of(include->begin(), include->end(),
                     [&](const std::string& e) { return include_matches(e, tool); });
}

std::vector<mcp_tool> filter_tools(const std::vector<mcp_tool>& tools,
                                   const std::optional<std::vector<std::string>>& include,
                                   const std::optional<std::vector<std::string>>& exclude) {
  std::vector<mcp_tool> out;
  for (const auto& t : tools)
    if (passes(t.name, include, exclude))
      out.push_back(t);
  return out;
}

} // namespace mcprt
