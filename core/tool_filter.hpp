#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mcprt {

/// One tool as the server listed it. `raw` is the whole entry, kept so
/// fields we do not model (annotations, outputSchema, title, _meta) reach
/// the host unchanged.
struct mcp_tool {
  std::string name;
  std::string description;
  nlohmann::json input_schema = nlohmann::json::object();
  nlohmann::json raw = nlohmann::json::object();

  friend bool operator==(const mcp_tool& a, const mcp_tool& b) { return a.raw == b.raw; }
  friend bool operator!=(const mcp_tool& a, const mcp_tool& b) { return !(a == b); }
};

/// `includeTools` / `excludeTools` as the reference (gemini-cli's
/// `isEnabled`, qwen-code's `passesSessionFilter`) applies them:
/// - `exclude` wins: a tool named there never passes (exact names only);
/// - no `include` (nullopt) lets every other tool pass;
/// - an `include` list lets through only the tools it names, so an empty
///   list lets none through (the reference's `[].some(...)` is false; an
///   explicit `[]` is a deliberate "no tools", unlike an absent key);
/// - an include entry may carry an argument hint, `name(args...)`: it
///   matches the tool `name`.
bool passes(const std::string& tool, const std::optional<std::vector<std::string>>& include,
            const std::optional<std::vector<std::string>>& exclude);

/// The tools that pass, in their original order.
std::vector<mcp_tool> filter_tools(const std::vector<mcp_tool>& tools,
                                   const std::optional<std::vector<std::string>>& include,
                                   const std::optional<std::vector<std::string>>& exclude);

} // namespace mcprt
