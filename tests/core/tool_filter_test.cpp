#include "core/tool_filter.hpp"

#include <gtest/gtest.h>

using namespace mcprt;
using list = std::optional<std::vector<std::string>>;

namespace {

mcp_tool tool(const std::string& name) {
  mcp_tool t;
  t.name = name;
  t.raw = {{"name", name}};
  return t;
}

std::vector<std::string> names_of_tools(const std::vector<mcp_tool>& tools) {
  std::vector<std::string> out;
  for (const auto& t : tools)
    out.push_back(t.name);
  return out;
}

} // namespace

TEST(ToolFilter, EverythingPassesWithoutFilters) {
  EXPECT_TRUE(passes("read_file", std::nullopt, std::nullopt));
}

TEST(ToolFilter, IncludeOnlyLetsThroughNamedTools) {
  list include = std::vector<std::string>{"read_file", "list_dir"};
  EXPECT_TRUE(passes("read_file", include, std::nullopt));
  EXPECT_TRUE(passes("list_dir", include, std::nullopt));
  EXPECT_FALSE(passes("write_file", include, std::nullopt));
}

TEST(ToolFilter, ExcludeOnlyDropsNamedTools) {
  list exclude = std::vector<std::string>{"write_file"};
  EXPECT_FALSE(passes("write_file", std::nullopt, exclude));
  EXPECT_TRUE(passes("read_file", std::nullopt, exclude));
}

TEST(ToolFilter, ExcludeWinsOverInclude) {
  list both = std::vector<std::string>{"write_file"};
  EXPECT_FALSE(passes("write_file", both, both));
}

TEST(ToolFilter, IncludeEntryMayCarryArgumentHintInParens) {
  list include = std::vector<std::string>{"run_shell(ls -la)", "grep()"};
  EXPECT_TRUE(passes("run_shell", include, std::nullopt));
  EXPECT_TRUE(passes("grep", include, std::nullopt));
  // A prefix without the paren is a different tool.
  EXPECT_FALSE(passes("run", include, std::nullopt));
  EXPECT_FALSE(passes("run_shell_x", include, std::nullopt));
}

TEST(ToolFilter, ExcludeMatchesExactNamesOnly) {
  // The reference strips the parens form for include only.
  list exclude = std::vector<std::string>{"run_shell(rm)"};
  EXPECT_TRUE(passes("run_shell", std::nullopt, exclude));
}

TEST(ToolFilter, EmptyIncludeListLetsNothingThroughButEmptyExcludeDropsNothing) {
  list empty = std::vector<std::string>{};
  EXPECT_FALSE(passes("read_file", empty, std::nullopt));
  EXPECT_TRUE(passes("read_file", std::nullopt, empty));
}

TEST(ToolFilter, FilterToolsKeepsOrder) {
  std::vector<mcp_tool> tools = {tool("c"), tool("a"), tool("b"), tool("d")};
  list include = std::vector<std::string>{"a", "b", "c"};
  list exclude = std::vector<std::string>{"b"};
  EXPECT_EQ(names_of_tools(filter_tools(tools, include, exclude)), (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(filter_tools(tools, std::nullopt, std::nullopt).size(), 4u);
}
