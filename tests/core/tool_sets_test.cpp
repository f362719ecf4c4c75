#include "core/tool_sets.hpp"

#include <set>

#include <gtest/gtest.h>

#include "catalog_test_support.hpp"

#include "core/gateway_catalog.hpp"
#include "core/settings.hpp"

using namespace mcprt;
using mcprt::test::server_view;
using nlohmann::json;

namespace {

std::vector<std::string> tool_names(const gateway_catalog& c) {
  std::vector<std::string> out;
  auto list = c.tools_list();
  for (auto& t : list["tools"])
    out.push_back(t["name"].get<std::string>());
  return out;
}

tool_set parse_one(const json& mcp, const std::string& name) {
  auto r = parse_tool_sets(mcp, "/ws/.mcprt/settings.json", "workspace");
  EXPECT_EQ(r.error, "");
  return r.sets.at(name);
}

const gateway_left_out* left_out_of(const gateway_catalog& c, const std::string& server, const std::string& name) {
  for (auto& l : c.left_out())
    if (l.server == server && l.name == name) return &l;
  return nullptr;
}

} // namespace

// ---- settings -----------------------------------------------------------------

TEST(ToolSets, ParsesServersToolsExcludeAndDescription) {
  auto set = parse_one(json::parse(R"({"toolSets": {"review": {
      "description": "code review", "servers": ["github", "docs-*"],
      "tools": ["get_*", "github/list_*"], "exclude": ["*delete*"]}}})"),
                       "review");
  EXPECT_EQ(set.name, "review");
  EXPECT_EQ(set.description, "code review");
  EXPECT_EQ(set.servers, (std::vector<std::string>{"github", "docs-*"}));
  EXPECT_EQ(set.tools, (std::vector<std::string>{"get_*", "github/list_*"}));
  EXPECT_EQ(set.exclude, (std::vector<std::string>{"*delete*"}));
  EXPECT_EQ(set.source, "/ws/.mcprt/settings.json");
  EXPECT_EQ(set.scope, "workspace");
}

TEST(ToolSets, RefusesBadShapesWithThePathAndNeverTheValue) {
  struct bad {
    const char* text;
    const char* says;
  };
  for (auto& b : {bad{R"({"toolSets": []})", "mcp.toolSets: expected an object"},
                  bad{R"({"toolSets": {"a b": {}}})", "a set's name is 1 to 64"},
                  bad{R"({"toolSets": {"..": {}}})", "a set's name is 1 to 64"},
                  bad{R"({"toolSets": {"x": []}})", "mcp.toolSets.x: expected an object"},
                  bad{R"({"toolSets": {"x": {"exlude": ["a"]}}})", "unknown key 'exlude'"},
                  bad{R"({"toolSets": {"x": {"tools": "a*"}}})", "mcp.toolSets.x.tools: expected an array"},
                  bad{R"({"toolSets": {"x": {"servers": [1]}}})", "mcp.toolSets.x.servers[0]: expected a string"},
                  bad{R"({"toolSets": {"x": {"exclude": [""]}}})", "mcp.toolSets.x.exclude[0]: empty"},
                  bad{R"({"toolSets": {"x": {"description": 5}}})", "mcp.toolSets.x.description"}}) {
    auto r = parse_tool_sets(json::parse(b.text), "f", "user");
    EXPECT_NE(r.error.find(b.says), std::string::npos) << b.text << " -> " << r.error;
    EXPECT_TRUE(r.sets.empty()) << b.text;
  }
  json many = {{"toolSets", json::object()}};
  for (int i = 0; i <= static_cast<int>(max_tool_sets_per_file); ++i)
    many["toolSets"]["s" + std::to_string(i)] = json::object();
  EXPECT_NE(parse_tool_sets(many, "f", "user").error.find("more than 100 sets"), std::string::npos);
  json long_name = {{"toolSets", {{std::string(65, 'a'), json::object()}}}};
  EXPECT_NE(parse_tool_sets(long_name, "f", "user").error.find("1 to 64"), std::string::npos);
}

TEST(ToolSets, ASettingsFileWithABadSetKeepsNothingOfIt) {
  auto doc = parse_settings_text("/ws/.mcprt/settings.json", config_scope::workspace,
                                 R"({"mcpServers": {"a": {"command": "x"}},
                                     "mcp": {"toolSets": {"r": {"tools": [7]}}}})");
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.error->message.find("mcp.toolSets.r.tools[0]"), std::string::npos) << doc.error->message;
  EXPECT_GT(doc.error->line, 0);
  EXPECT_TRUE(doc.servers.empty());
  EXPECT_TRUE(doc.tool_sets.empty());
}

TEST(ToolSets, AHigherScopeReplacesASameNamedSetWhole) {
  auto user = parse_settings_text("/home/.mcprt/settings.json", config_scope::user,
                                  R"({"mcp": {"toolSets": {"r": {"servers": ["a"], "tools": ["x"]},
                                                          "mine": {"servers": ["b"]}}}})");
  auto ws = parse_settings_text("/ws/.mcprt/settings.json", config_scope::workspace,
                                R"({"mcp": {"toolSets": {"r": {"servers": ["c"]}}}})");
  ASSERT_TRUE(user.ok() && ws.ok());
  auto merged = assemble({&user, &ws});
  ASSERT_EQ(merged.tool_sets.size(), 2u);
  EXPECT_EQ(merged.tool_sets.at("r").servers, std::vector<std::string>{"c"});
  EXPECT_TRUE(merged.tool_sets.at("r").tools.empty()) << "replaced whole, not merged";
  EXPECT_EQ(merged.tool_sets.at("r").scope, "workspace");
  EXPECT_EQ(merged.tool_sets.at("mine").scope, "user");
}

TEST(ToolSets, OnlySettingsFilesCarrySets) {
  auto doc = parse_settings_text("/ws/.mcp.json", config_scope::project,
                                 R"({"mcpServers": {}, "mcp": {"toolSets": {"r": {}}}})");
  ASSERT_TRUE(doc.ok());
  EXPECT_TRUE(doc.tool_sets.empty());
}

// ---- choosing -------------------------------------------------------------------

TEST(ToolSets, ChoosesByServerToolAndExclusionWithReasons) {
  auto set = parse_one(json::parse(R"({"toolSets": {"r": {
      "servers": ["github", "docs-*"], "tools": ["get_*", "github/list_*"],
      "exclude": ["*_admin", "docs-old/*"]}}})"),
                       "r");
  EXPECT_FALSE(tool_out_of_set(set, "github", "get_issue"));
  EXPECT_FALSE(tool_out_of_set(set, "github", "list_prs"));
  EXPECT_FALSE(tool_out_of_set(set, "docs-api", "get_page"));
  EXPECT_EQ(tool_out_of_set(set, "docs-api", "list_pages")->reason, "not_in_set")
    << "github/list_* is github's alone";
  EXPECT_EQ(tool_out_of_set(set, "slack", "get_message")->reason, "server_not_in_set");
  auto admin = tool_out_of_set(set, "github", "get_admin");
  ASSERT_TRUE(admin);
  EXPECT_EQ(admin->reason, "excluded");
  EXPECT_EQ(admin->detail, "*_admin");
  auto old = server_out_of_set(set, "docs-old");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->reason, "excluded");
  EXPECT_EQ(old->detail, "docs-old/*");
  EXPECT_FALSE(server_out_of_set(set, "docs-new"));
}

TEST(ToolSets, AnEmptySetIsTheWholeWorkspace) {
  tool_set all;
  all.name = "all";
  EXPECT_FALSE(tool_out_of_set(all, "any", "thing"));
}

// ---- names within 64 --------------------------------------------------------------

TEST(ToolSets, ShortenedNamesAreDeterministicBoundedAndDifferPerAttempt) {
  std::string full = "a_very_long_server_name__" + std::string(80, 'x');
  auto a = shortened_tool_name(full);
  EXPECT_EQ(a.size(), max_exposed_tool_name);
  EXPECT_EQ(a, shortened_tool_name(full)) << "deterministic";
  EXPECT_EQ(a.substr(0, 55), full.substr(0, 55));
  EXPECT_NE(a, shortened_tool_name(full, 1));
  EXPECT_NE(a, shortened_tool_name(full + "y"));
  EXPECT_EQ(shortened_tool_name("short"), "short");
  EXPECT_EQ(shortened_tool_name("short", 1).size(), std::string("short_").size() + 8);
  // A multi-byte character across the cut is dropped whole.
  std::string wide = std::string(54, 'a') + "\xc3\xa9" + std::string(20, 'b');
  auto w = shortened_tool_name(wide);
  EXPECT_EQ(w.substr(0, 54), std::string(54, 'a'));
  EXPECT_EQ(w[54], '_');
}

TEST(ToolSets, TheCatalogShowsEveryToolWithinSixtyFourCharactersAndRoutesIt) {
  std::string long1 = "fetch_the_complete_history_of_every_pull_request_in_this_repository_v1";
  std::string long2 = "fetch_the_complete_history_of_every_pull_request_in_this_repository_v2";
  auto c = gateway_catalog::build({server_view("github", {long1, long2, "get"})});
  auto names = tool_names(c);
  ASSERT_EQ(names.size(), 3u);
  std::set<std::string> distinct(names.begin(), names.end());
  EXPECT_EQ(distinct.size(), 3u);
  for (auto& n : names)
    EXPECT_LE(n.size(), 64u) << n;
  ASSERT_EQ(c.renamed().size(), 2u);
  for (auto& r : c.renamed()) {
    auto route = c.tool(r.exposed);
    ASSERT_TRUE(route);
    EXPECT_EQ(route->server, "github");
    EXPECT_EQ(route->name, r.name);
    EXPECT_EQ(r.full, "github__" + r.name);
  }
  // The same input gives the same names.
  EXPECT_EQ(tool_names(gateway_catalog::build({server_view("github", {long2, long1, "get"})})), names);
}

TEST(ToolSets, AShortenedNameNeverTakesAToolsOwnName) {
  std::string full = "github__" + std::string(70, 'q');
  auto taken = shortened_tool_name(full); // what the long name would become
  // Another server's tool is exactly that name: it keeps it, and the long
  // one moves on to its next attempt.
  gateway_server_view other = server_view("x", {});
  other.prefix = "";
  other.tools.push_back({{"name", taken}});
  auto c = gateway_catalog::build({server_view("github", {std::string(70, 'q')}), other});
  auto route = c.tool(taken);
  ASSERT_TRUE(route);
  EXPECT_EQ(route->server, "x");
  ASSERT_EQ(c.renamed().size(), 1u);
  EXPECT_EQ(c.renamed()[0].exposed, shortened_tool_name(full, 1));
  EXPECT_EQ(c.tool(shortened_tool_name(full, 1))->server, "github");
}

TEST(ToolSets, TwoServersWithTheSameLongNameConflictAsShortNamesDo) {
  std::string own = std::string(70, 'z');
  auto a = server_view("a", {own});
  auto b = server_view("b", {own});
  a.prefix = b.prefix = "";
  auto c = gateway_catalog::build({a, b});
  EXPECT_EQ(tool_names(c).size(), 1u);
  auto l = left_out_of(c, "b", own);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->reason, "name_conflict");
  EXPECT_EQ(l->kept_by, "a");
}

TEST(ToolSets, ToolsAreListedInNameOrderWhateverTheServersOrder) {
  auto c = gateway_catalog::build({server_view("b", {"zeta", "alpha"}), server_view("a", {"mid"})});
  EXPECT_EQ(tool_names(c), (std::vector<std::string>{"a__mid", "b__alpha", "b__zeta"}));
  auto again = gateway_catalog::build({server_view("a", {"mid"}), server_view("b", {"alpha", "zeta"})});
  EXPECT_FALSE(gateway_catalog::diff(c, again).tools) << "a server's reordering changes nothing a client sees";
}

// ---- a set's catalog ------------------------------------------------------------------

TEST(ToolSets, ASetsCatalogShowsItsToolsAndSaysWhyTheOthersAreOut) {
  auto set = parse_one(json::parse(R"({"toolSets": {"r": {
      "servers": ["github", "docs"], "tools": ["get_*", "search"], "exclude": ["github/get_secret"]}}})"),
                       "r");
  auto docs = server_view("docs", {"search", "get_page", "write_page"});
  docs.prompts.push_back({{"name", "summarize"}});
  auto slack = server_view("slack", {"get_message"});
  slack.prompts.push_back({{"name", "digest"}});
  auto c = gateway_catalog::build({server_view("github", {"get_issue", "get_secret", "merge"}), docs, slack}, {}, &set);
  EXPECT_EQ(tool_names(c),
            (std::vector<std::string>{"docs__get_page", "docs__search", "github__get_issue"}));
  EXPECT_EQ(c.prompts_list()["prompts"].size(), 1u) << "prompts of the set's servers only";
  EXPECT_FALSE(c.tool("slack__get_message"));
  EXPECT_FALSE(c.tool("github__merge"));
  EXPECT_EQ(left_out_of(c, "github", "get_secret")->reason, "excluded");
  EXPECT_EQ(left_out_of(c, "github", "get_secret")->rule, "github/get_secret");
  EXPECT_EQ(left_out_of(c, "github", "merge")->reason, "not_in_set");
  EXPECT_EQ(left_out_of(c, "docs", "write_page")->reason, "not_in_set");
  auto out = left_out_of(c, "slack", "");
  ASSERT_TRUE(out);
  EXPECT_EQ(out->kind, "server");
  EXPECT_EQ(out->reason, "server_not_in_set");
  EXPECT_EQ(c.guess_server_of_tool("slack__get_message"), std::nullopt)
    << "a server outside the set is not this endpoint's to name";
}
