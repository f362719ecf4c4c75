#include <gtest/gtest.h>

#include <random>

#include "core/json_locate.hpp"
#include "core/settings.hpp"

using namespace mcprt;
using nlohmann::json;

namespace {

settings_document parse(std::string_view text, config_scope scope = config_scope::workspace) {
  return parse_settings_text("/ws/.mcprt/settings.json", scope, text);
}

} // namespace

TEST(SettingsParse, ReadsServersAndGatingLists) {
  auto d = parse(R"({
    "mcpServers": {"a": {"command": "x"}, "b": {"httpUrl": "http://h/mcp"}},
    "mcp": {"allowed": ["a", "b"], "excluded": ["tmp-*"], "serverCommand": "y"},
    "ui": {"theme": "dark"}})");
  ASSERT_TRUE(d.ok()) << d.error->message;
  EXPECT_EQ(d.servers.size(), 2u);
  EXPECT_EQ(d.servers.at("a").scope, config_scope::workspace);
  EXPECT_EQ(d.servers.at("a").source, "/ws/.mcprt/settings.json");
  EXPECT_EQ(d.allowed, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(d.excluded, (std::vector<std::string>{"tmp-*"}));
  EXPECT_EQ(d.content.at("ui").at("theme"), "dark");
}

TEST(SettingsParse, AcceptsCommentsAndByteOrderMark) {
  auto d = parse("\xEF\xBB\xBF// header\n{\n  /* block */ \"mcpServers\": {\"a\": {\"command\": \"x\"}} // tail\n}\n");
  ASSERT_TRUE(d.ok()) << d.error->message;
  EXPECT_EQ(d.servers.count("a"), 1u);
}

TEST(SettingsParse, EmptyAllowListIsKeptAsDenyAll) {
  auto d = parse(R"({"mcp": {"allowed": []}})");
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d.allowed.has_value());
  EXPECT_TRUE(d.allowed->empty());
  auto none = parse(R"({"mcp": {}})");
  EXPECT_FALSE(none.allowed.has_value());
}

TEST(SettingsParse, McpJsonCarriesOnlyServers) {
  auto d = parse(R"({"mcpServers": {"p": {"command": "x"}}, "mcp": {"allowed": []}})", config_scope::project);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d.allowed.has_value()); // a project file cannot change admission
  EXPECT_EQ(d.servers.at("p").scope, config_scope::project);
}

TEST(SettingsParse, InvalidJsonReportsLineAndColumn) {
  auto d = parse("{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error->path, "/ws/.mcprt/settings.json");
  EXPECT_EQ(d.error->line, 3);
  EXPECT_GT(d.error->column, 20);
  EXPECT_NE(d.error->message.find("invalid JSON"), std::string::npos);
  EXPECT_TRUE(d.servers.empty());
}

TEST(SettingsParse, HalfWrittenFileIsAnError) {
  auto d = parse("{\"mcpServers\": {\"a\": {\"comm");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error->line, 1);
}

TEST(SettingsParse, EmptyFileIsAnErrorNotNoServers) {
  EXPECT_FALSE(parse("").ok());
  EXPECT_FALSE(parse("  \n").ok());
}

TEST(SettingsParse, TopLevelMustBeAnObject) {
  auto d = parse("[1, 2]");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error->message.find("object"), std::string::npos);
}

TEST(SettingsParse, WrongTypesPointAtTheOffendingValue) {
  struct row {
    const char* text;
    int line;
    const char* needle;
  } rows[] = {
    {"{\n\"mcpServers\": {\n  \"s\": {\n    \"args\": \"x\"\n  }\n}\n}", 4, "mcpServers.s.args"},
    {"{\n\"mcpServers\": {\n  \"s\": {\"command\": \"c\",\n    \"env\": {\"A\": 1}\n  }\n}\n}", 4, "mcpServers.s.env.A"},
    {"{\n\n\"mcpServers\": []\n}", 3, "mcpServers"},
    {"{\"mcp\": {\n \"allowed\": \"a\"}}", 2, "mcp.allowed"},
    {"{\"mcp\": {\n \"excluded\": [\"a\",\n 3]}}", 3, "mcp.excluded[1]"},
    {"{\"mcpServers\": {\n\"s\": 5}}", 2, "mcpServers.s"},
  };
  for (auto& r : rows) {
    auto d = parse(r.text);
    ASSERT_FALSE(d.ok()) << r.text;
    EXPECT_EQ(d.error->line, r.line) << r.text << "\n" << d.error->message;
    EXPECT_NE(d.error->message.find(r.needle), std::string::npos) << d.error->message;
  }
}

TEST(SettingsParse, MissingFileIsValidAndEmpty) {
  auto d = load_settings_file("/nonexistent/dir/settings.json", config_scope::user);
  EXPECT_TRUE(d.ok());
  EXPECT_FALSE(d.exists);
  EXPECT_TRUE(d.servers.empty());
}

// Bad input never crashes: random bytes, random JSON-ish tokens and every
// prefix of a valid file go through the parser.
TEST(SettingsParse, FuzzRandomAndTruncatedInputNeverCrashes) {
  const std::string valid = R"({
  // comment
  "mcpServers": {
    "a": {"command": "x", "args": ["1", "2"], "env": {"K": "v"}, "timeout": 5},
    "b": {"httpUrl": "http://h", "headers": {"H": "1"}, "includeTools": ["t"]}
  },
  "mcp": {"allowed": ["a", "b*"], "excluded": ["c?"]}
})";
  std::size_t ok = 0, failed = 0;
  for (std::size_t n = 0; n <= valid.size(); ++n) {
    auto d = parse(valid.substr(0, n));
    (d.ok() ? ok : failed)++;
    if (!d.ok()) {
      EXPECT_GE(d.error->line, 1);
      EXPECT_TRUE(d.servers.empty());
    }
  }
  EXPECT_EQ(ok, 1u); // only the complete text parses (trailing newline aside)
  std::mt19937 rng(42);
  const std::string alphabet = "{}[]\":,0123456789abcdefnulltrue \n\\/*-.eE+\x01\xff";
  const std::vector<std::string> tokens = {"{", "}", "[", "]", ",", ":", "\"mcpServers\"", "\"mcp\"",
                                           "\"allowed\"", "\"args\"", "\"env\"", "null", "1",
                                           "\"x\"", "true", "{}", "[]", "//c\n", "/*"};
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    int len = static_cast<int>(rng() % 60);
    if (i % 2) {
      for (int k = 0; k < len; ++k)
        text.push_back(alphabet[rng() % alphabet.size()]);
    } else {
      for (int k = 0; k < len; ++k)
        text += tokens[rng() % tokens.size()];
    }
    auto d = parse(text);
    if (!d.ok()) {
      EXPECT_GE(d.error->line, 1) << text;
    }
  }
}

TEST(JsonLocate, FindsNestedValuesAndIndices) {
  std::string text = "{\"a\": {\"b\": [10, {\"c\": true}]}, \"d\": 1}";
  auto off = locate_json_value(text, {"a", "b", "1", "c"});
  ASSERT_TRUE(off);
  EXPECT_EQ(text.substr(*off, 4), "true");
  off = locate_json_value(text, {"d"});
  ASSERT_TRUE(off);
  EXPECT_EQ(text[*off], '1');
  EXPECT_FALSE(locate_json_value(text, {"zz"}));
  EXPECT_FALSE(locate_json_value(text, {"a", "b", "7"}));
}

TEST(JsonLocate, DecodesUnicodeEscapesInKeys) {
  std::string text = R"({"s\u0041": {"x": 1}, "\ud83d\ude00": 2})";
  auto off = locate_json_value(text, {"sA", "x"});
  ASSERT_TRUE(off);
  EXPECT_EQ(text[*off], '1');
  off = locate_json_value(text, {"\xF0\x9F\x98\x80"});
  ASSERT_TRUE(off);
  EXPECT_EQ(text[*off], '2');
}

TEST(JsonLocate, DuplicatedKeysResolveToTheLastOneAsTheParserDoes) {
  std::string text = R"({"a": 1, "a": 2})";
  auto off = locate_json_value(text, {"a"});
  ASSERT_TRUE(off);
  EXPECT_EQ(text[*off], '2');
}

TEST(JsonLocate, PositionOfCountsLinesAndColumns) {
  auto p = position_of("ab\ncd\nef", 7);
  EXPECT_EQ(p.line, 3);
  EXPECT_EQ(p.column, 2);
}

TEST(SettingsPaths, ProfilesSwapTheConfigDirectory) {
  auto p = resolve_settings_paths("/home/u", "/ws");
  EXPECT_EQ(p.user, "/home/u/.mcprt/settings.json");
  EXPECT_EQ(p.project, "/ws/.mcp.json");
  EXPECT_EQ(p.workspace, "/ws/.mcprt/settings.json");
  auto q = resolve_settings_paths("/home/u", "/ws", *profile::parse("qwen"));
  EXPECT_EQ(q.user, "/home/u/.qwen/settings.json");
  EXPECT_EQ(q.project, "/ws/.mcp.json");
  EXPECT_EQ(q.workspace, "/ws/.qwen/settings.json");
  EXPECT_EQ(resolve_settings_paths("/h", "/w", *profile::parse("gemini")).workspace, "/w/.gemini/settings.json");
  EXPECT_FALSE(profile::parse("vscode"));
}

// Layering precedence for every pair of scopes: the higher one replaces the
// lower one's same-named server whole (no field merge).
TEST(Assemble, HigherScopeReplacesLowerWholeForEveryPair) {
  const config_scope scopes[] = {config_scope::user, config_scope::project, config_scope::workspace,
                                 config_scope::session};
  for (int lo = 0; lo < 4; ++lo) {
    for (int hi = lo + 1; hi < 4; ++hi) {
      auto low = parse_settings_text("low", scopes[lo], R"({"mcpServers": {"s": {"command": "low", "env": {"ONLY_LOW": "1"}}, "l": {"command": "l"}}})");
      auto high = parse_settings_text("high", scopes[hi], R"({"mcpServers": {"s": {"command": "high"}}})");
      ASSERT_TRUE(low.ok() && high.ok());
      assembled_settings a;
      if (scopes[hi] == config_scope::session) a = assemble({&low}, high.servers);
      else a = assemble({&low, &high});
      auto& s = a.servers.at("s");
      EXPECT_EQ(s.scope, scopes[hi]) << lo << "," << hi;
      EXPECT_EQ(s.command, "high");
      EXPECT_TRUE(s.env.empty()) << "fields must not merge across scopes";
      EXPECT_EQ(a.servers.at("l").scope, scopes[lo]);
    }
  }
}

TEST(Assemble, OverlayWinsOverEverySettingsScope) {
  auto ws = parse_settings_text("w", config_scope::workspace, R"({"mcpServers": {"s": {"command": "ws"}}})");
  auto top = parse_settings_text("t", config_scope::session, R"({"mcpServers": {"s": {"command": "top"}}})");
  auto a = assemble({&ws}, top.servers);
  EXPECT_EQ(a.servers.at("s").command, "top");
}

TEST(Assemble, ExcludedListsAddUpAcrossScopes) {
  auto user = parse_settings_text("u", config_scope::user, R"({"mcp": {"excluded": ["x"]}})");
  auto ws = parse_settings_text("w", config_scope::workspace, R"({"mcp": {"excluded": ["x", "y"]}})");
  auto a = assemble({&user, &ws});
  EXPECT_EQ(a.excluded, (std::vector<std::string>{"x", "y"}));
}

// A gated workspace file must not widen what the user's own list admits.
TEST(Assemble, AllowListsIntersectAcrossScopes) {
  auto user = parse_settings_text("u", config_scope::user,
                                  R"({"mcpServers": {"a": {"command": "a"}, "b": {"command": "b"}, "c": {"command": "c"}},
                                      "mcp": {"allowed": ["a", "b"]}})");
  auto ws = parse_settings_text("w", config_scope::workspace, R"({"mcp": {"allowed": ["b", "c"]}})");
  auto a = assemble({&user, &ws});
  EXPECT_EQ(a.allowed, std::vector<std::string>{"b"});
  auto none = assemble({});
  EXPECT_FALSE(none.allowed);
  auto deny = parse_settings_text("w", config_scope::workspace, R"({"mcp": {"allowed": []}})");
  auto d = assemble({&user, &deny});
  ASSERT_TRUE(d.allowed);
  EXPECT_TRUE(d.allowed->empty()) << "a workspace [] denies all even when the user allows some";
  auto glob = parse_settings_text("w", config_scope::workspace, R"({"mcp": {"allowed": ["*"]}})");
  EXPECT_EQ(assemble({&user, &glob}).allowed, (std::vector<std::string>{"a", "b"}));
}

TEST(Assemble, ErroredDocumentContributesNothing) {
  auto good = parse_settings_text("u", config_scope::user, R"({"mcpServers": {"a": {"command": "x"}}})");
  auto bad = parse_settings_text("w", config_scope::workspace, R"({"mcpServers": {"b": )");
  ASSERT_FALSE(bad.ok());
  auto a = assemble({&good, &bad});
  EXPECT_EQ(a.servers.size(), 1u);
  EXPECT_EQ(a.servers.count("a"), 1u);
}

// -- parse_settings_value: the gating actor's entry point -----------------------------

TEST(SettingsValue, GivesTheSameDocumentAsTheTextParser) {
  std::string text = R"({"mcpServers": {"a": {"command": "x", "args": ["1"]}}, "mcp": {"excluded": ["b*"]}})";
  auto from_text = parse_settings_text("/s.json", config_scope::user, text);
  auto from_value = parse_settings_value("/s.json", config_scope::user, json::parse(text));
  ASSERT_TRUE(from_value.ok());
  EXPECT_TRUE(servers_equal(from_text.servers, from_value.servers));
  EXPECT_EQ(from_value.servers.at("a").connection_id_cache, from_text.servers.at("a").connection_id_cache);
  EXPECT_EQ(from_value.servers.at("a").source, "/s.json");
  EXPECT_EQ(from_value.excluded, from_text.excluded);
  EXPECT_EQ(from_value.content, from_text.content);
}

TEST(SettingsValue, UnchangedServersKeepTheirParseAndChangedOnesAreParsedAgain) {
  auto before = parse_settings_value("/s.json", config_scope::user,
                                     json{{"mcpServers", {{"a", {{"command", "x"}}}, {"b", {{"command", "y"}}}}}});
  auto after = parse_settings_value(
    "/s.json", config_scope::user,
    json{{"mcpServers", {{"a", {{"command", "x"}}}, {"b", {{"command", "y"}, {"args", {"2"}}}}}}}, &before);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after.servers.at("a").connection_id_cache, before.servers.at("a").connection_id_cache);
  EXPECT_NE(after.servers.at("b").connection_id_cache, before.servers.at("b").connection_id_cache);
  EXPECT_EQ(after.servers.at("b").args, std::vector<std::string>{"2"});
  // An entry equal only after dropping nulls is parsed again, with the same result.
  auto with_null = parse_settings_value(
    "/s.json", config_scope::user,
    json{{"mcpServers", {{"a", {{"command", "x"}, {"cwd", nullptr}}}, {"b", {{"command", "y"}}}}}}, &before);
  EXPECT_TRUE(servers_equal(with_null.servers.at("a"), before.servers.at("a")));
  // A previous document of another scope is not reused.
  auto other = parse_settings_value("/s.json", config_scope::workspace,
                                    json{{"mcpServers", {{"a", {{"command", "x"}}}}}}, &before);
  EXPECT_EQ(other.servers.at("a").scope, config_scope::workspace);
}

TEST(SettingsValue, ReportsErrorsWithoutAPosition) {
  auto doc = parse_settings_value("/s.json", config_scope::user, json{{"mcpServers", {{"a", {{"args", "x"}}}}}});
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.error->line, 0);
  EXPECT_NE(doc.error->message.find("mcpServers.a"), std::string::npos) << doc.error->message;
  EXPECT_TRUE(doc.servers.empty());
  EXPECT_FALSE(parse_settings_value("/s.json", config_scope::user, json::array()).ok());
}
