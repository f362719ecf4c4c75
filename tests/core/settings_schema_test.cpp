#include "core/settings_schema.hpp"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using nlohmann::json;
using testing::ElementsAre;
using testing::IsEmpty;

namespace mcprt {
namespace {

// Runs the watcher's decision end to end: diff two documents, then ask
// whether anyone should hear about it.
bool notifies(const json& before, const json& after) {
  return should_notify(changed_keys(before, after));
}

// -- restart-required suppression (reference settingsWatcher.test.ts) -------

TEST(SchemaSuppression, SuppressesWhenOnlyRestartRequiredKeysChangeEnv) {
  auto before = json{{"env", {{"FOO", "1"}}}};
  auto after = json{{"env", {{"FOO", "2"}, {"BAR", "x"}}}};
  EXPECT_THAT(changed_keys(before, after), ElementsAre("env.BAR", "env.FOO"));
  EXPECT_FALSE(notifies(before, after));
}

TEST(SchemaSuppression, SuppressesWhenOnlyCredentialsChange) {
  auto before = json{{"security", {{"auth", {{"apiKey", "old"}}}}}};
  auto after = json{{"security", {{"auth", {{"apiKey", "new"}}}}}};
  EXPECT_THAT(changed_keys(before, after), ElementsAre("security.auth.apiKey"));
  EXPECT_FALSE(notifies(before, after));
}

TEST(SchemaSuppression, NotifiesWhenHotKeyChangesUiTheme) {
  EXPECT_TRUE(notifies(json{{"ui", {{"theme", "dark"}}}}, json{{"ui", {{"theme", "light"}}}}));
}

TEST(SchemaSuppression, NotifiesWhenHotKeyChangesAlongsideRestartRequiredOne) {
  auto before = json{{"env", {{"FOO", "1"}}}, {"ui", {{"theme", "dark"}}}};
  auto after = json{{"env", {{"FOO", "2"}}}, {"ui", {{"theme", "light"}}}};
  EXPECT_THAT(changed_keys(before, after), ElementsAre("env.FOO", "ui.theme"));
  EXPECT_TRUE(notifies(before, after));
}

TEST(SchemaSuppression, NotifiesOnUnknownKeyRatherThanSilentlySuppress) {
  EXPECT_TRUE(notifies(json::object(), json{{"brandNew", {{"key", 1}}}}));
  EXPECT_FALSE(settings_schema::standard().requires_restart("brandNew.key"));
}

TEST(SchemaSuppression, NotifiesWhenOnlyMcpServersChanges) {
  auto before = json{{"mcpServers", {{"fs", {{"command", "a"}}}}}};
  auto after = json{{"mcpServers", {{"fs", {{"command", "b"}}}}}};
  EXPECT_THAT(changed_keys(before, after), ElementsAre("mcpServers.fs.command"));
  EXPECT_TRUE(notifies(before, after));
}

TEST(SchemaSuppression, NotifiesWhenOnlyMcpExcludedChanges) {
  auto before = json{{"mcp", {{"excluded", json::array()}}}};
  auto after = json{{"mcp", {{"excluded", {"fs"}}}}};
  EXPECT_TRUE(notifies(before, after));
}

TEST(SchemaSuppression, NotifiesWhenOnlyMcpAllowedChanges) {
  auto before = json{{"mcp", {{"allowed", {"a"}}}}};
  auto after = json{{"mcp", {{"allowed", {"a", "b"}}}}};
  EXPECT_TRUE(notifies(before, after));
}

TEST(SchemaSuppression, NotifiesWhenMcpBlockWithAllowedIsAdded) {
  // The new block must be reported by its leaves, or the restart-required
  // parent `mcp` would hide the hot `mcp.allowed` inside it.
  auto after = json{{"mcp", {{"allowed", json::array()}}}};
  EXPECT_THAT(changed_keys(json::object(), after), ElementsAre("mcp.allowed"));
  EXPECT_TRUE(notifies(json::object(), after));
}

TEST(SchemaSuppression, SuppressesWhenOnlyMcpServerCommandChanges) {
  auto before = json{{"mcp", {{"serverCommand", "a"}}}};
  auto after = json{{"mcp", {{"serverCommand", "b"}}}};
  EXPECT_FALSE(notifies(before, after));
}

TEST(SchemaSuppression, SuppressesUnknownMcpKeyThroughParent) {
  auto before = json{{"mcp", {{"foo", 1}}}};
  auto after = json{{"mcp", {{"foo", 2}}}};
  EXPECT_FALSE(notifies(before, after));
}

TEST(SchemaSuppression, EmptyChangeListDoesNotNotify) {
  EXPECT_FALSE(should_notify({}));
  EXPECT_FALSE(notifies(json{{"ui", {{"theme", "x"}}}}, json{{"ui", {{"theme", "x"}}}}));
}

// -- schema pins --------------------------------------------------------------

TEST(SchemaPin, McpKeysThatMustHotReload) {
  // Changed keys are matched by longest prefix and an update whose keys all
  // need a restart is dropped: if any of these turned true, MCP-only edits
  // would never reach the reconciler.
  const auto& s = settings_schema::standard();
  EXPECT_EQ(s.find("mcpServers"), false);
  EXPECT_EQ(s.find("mcp.allowed"), false);
  EXPECT_EQ(s.find("mcp.excluded"), false);
  EXPECT_EQ(s.find("mcp.toolIdleTimeoutMs"), false);
  EXPECT_FALSE(s.requires_restart("mcp.toolSets.review.tools")) << "a tool set edit is hot";
  EXPECT_EQ(s.find("mcp"), true);
  EXPECT_EQ(s.find("mcp.serverCommand"), true);
}

TEST(SchemaPin, LongestPrefixLookup) {
  const auto& s = settings_schema::standard();
  EXPECT_FALSE(s.requires_restart("mcp.allowed"));
  EXPECT_TRUE(s.requires_restart("mcp.foo"));
  EXPECT_TRUE(s.requires_restart("mcp"));
  EXPECT_TRUE(s.requires_restart("env.FOO"));
  EXPECT_TRUE(s.requires_restart("security.auth.apiKey"));
  EXPECT_TRUE(s.requires_restart("security.auth.other"));
  EXPECT_FALSE(s.requires_restart("ui.theme"));
  EXPECT_FALSE(s.requires_restart("ui.newThing"));
  EXPECT_FALSE(s.requires_restart("mcpServers.fs.env.TOKEN"));
  EXPECT_FALSE(s.requires_restart("brandNew.key"));
  EXPECT_FALSE(s.requires_restart(""));
}

TEST(SchemaPin, LeafOverridesParentInCustomSchema) {
  settings_schema s{{"a", false}, {"a.b", true}};
  s.add("a.b.c", false);
  EXPECT_FALSE(s.requires_restart("a.x"));
  EXPECT_TRUE(s.requires_restart("a.b.x"));
  EXPECT_FALSE(s.requires_restart("a.b.c.d"));
  // A prefix must end on a segment boundary: `ab` is not under `a`.
  EXPECT_FALSE(s.requires_restart("ab"));
  EXPECT_TRUE(should_notify({"a.b.x", "a.x"}, s));
  EXPECT_FALSE(should_notify({"a.b.x"}, s));
}

// -- changed_keys -------------------------------------------------------------

TEST(ChangedKeys, IdenticalDocumentsGiveNothing) {
  auto doc = json{{"mcpServers", {{"fs", {{"args", {"-y", "x"}}}}}}, {"ui", {{"theme", "d"}}}};
  EXPECT_THAT(changed_keys(doc, doc), IsEmpty());
  EXPECT_THAT(changed_keys(json{}, json::object()), IsEmpty());
  EXPECT_THAT(changed_keys(json{}, json{}), IsEmpty());
}

TEST(ChangedKeys, KeyOrderIsIrrelevant) {
  auto a = json::parse(R"({"b": {"y": 1, "x": [1, 2]}, "a": 1})");
  auto b = json::parse(R"({"a": 1, "b": {"x": [1, 2], "y": 1}})");
  EXPECT_THAT(changed_keys(a, b), IsEmpty());
}

TEST(ChangedKeys, NestedChangeReportsLeafPath) {
  auto a = json{{"a", {{"b", {{"c", 1}, {"d", 2}}}}}};
  auto b = json{{"a", {{"b", {{"c", 1}, {"d", 3}}}}}};
  EXPECT_THAT(changed_keys(a, b), ElementsAre("a.b.d"));
}

TEST(ChangedKeys, AddedAndRemovedKeysAreChangedLeaves) {
  auto a = json{{"a", {{"gone", 1}, {"kept", 2}}}};
  auto b = json{{"a", {{"kept", 2}, {"new", 3}}}, {"top", true}};
  EXPECT_THAT(changed_keys(a, b), ElementsAre("a.gone", "a.new", "top"));
}

TEST(ChangedKeys, AddedOrRemovedObjectReportsItsLeaves) {
  auto a = json::object();
  auto b = json{{"x", {{"y", {{"z", 1}}}, {"w", 2}, {"e", json::object()}}}};
  EXPECT_THAT(changed_keys(a, b), ElementsAre("x.e", "x.w", "x.y.z"));
  EXPECT_THAT(changed_keys(b, a), ElementsAre("x.e", "x.w", "x.y.z"));
}

TEST(ChangedKeys, ArraysComparedWhole) {
  auto a = json{{"mcp", {{"allowed", {"a", "b"}}}}};
  auto reordered = json{{"mcp", {{"allowed", {"b", "a"}}}}};
  EXPECT_THAT(changed_keys(a, reordered), ElementsAre("mcp.allowed"));
  auto objs_a = json::parse(R"({"list": [{"k": 1}, {"k": 2}]})");
  auto objs_b = json::parse(R"({"list": [{"k": 1}, {"k": 3}]})");
  EXPECT_THAT(changed_keys(objs_a, objs_b), ElementsAre("list"));
}

TEST(ChangedKeys, ObjectReplacedByNonObjectReportsPath) {
  auto a = json{{"mcp", {{"allowed", {"a"}}}}};
  EXPECT_THAT(changed_keys(a, json{{"mcp", 5}}), ElementsAre("mcp"));
  EXPECT_THAT(changed_keys(json{{"mcp", "x"}}, a), ElementsAre("mcp"));
  EXPECT_THAT(changed_keys(a, json{{"mcp", json::array()}}), ElementsAre("mcp"));
}

TEST(ChangedKeys, ScalarTypeChangeIsAChange) {
  EXPECT_THAT(changed_keys(json{{"a", 1}}, json{{"a", "1"}}), ElementsAre("a"));
  EXPECT_THAT(changed_keys(json{{"a", nullptr}}, json::object()), ElementsAre("a"));
  EXPECT_THAT(changed_keys(json{{"a", 1}}, json{{"a", 1.0}}), IsEmpty());
}

TEST(ChangedKeys, NullObjectCountsAsAbsent) {
  auto b = json{{"mcp", {{"excluded", {"x"}}}}};
  EXPECT_THAT(changed_keys(json{{"mcp", nullptr}}, b), ElementsAre("mcp.excluded"));
}

TEST(ChangedKeys, NullTopLevelIsEmptyObject) {
  EXPECT_THAT(changed_keys(json{}, json{{"a", 1}}), ElementsAre("a"));
  EXPECT_THAT(changed_keys(json{{"a", {{"b", 1}}}}, json{}), ElementsAre("a.b"));
}

TEST(ChangedKeys, NonObjectTopLevelReportsRoot) {
  EXPECT_THAT(changed_keys(json::object(), json::array()), ElementsAre(""));
  EXPECT_THAT(changed_keys(json{1, 2}, json{1, 2}), IsEmpty());
}

TEST(ChangedKeys, DottedAndOddKeysAreJoinedVerbatim) {
  auto a = json{{"mcpServers", {{"a.b", {{"command", "x"}}}}}};
  auto b = json{{"mcpServers", {{"a.b", {{"command", "y"}}}, {"__proto__", {{"command", "z"}}}}}};
  EXPECT_THAT(changed_keys(a, b),
              ElementsAre("mcpServers.__proto__.command", "mcpServers.a.b.command"));
  EXPECT_TRUE(should_notify(changed_keys(a, b)));
}

} // namespace
} // namespace mcprt
