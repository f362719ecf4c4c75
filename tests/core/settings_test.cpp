#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include <sys/stat.h>
#include <unistd.h>

#include "core/json_locate.hpp"
#include "core/settings.hpp"
#include "core/untrusted_text.hpp"

using namespace mcprt;
using nlohmann::json;

namespace {

settings_document parse(std::string_view text, config_scope scope = config_scope::workspace) {
  return parse_settings_text("/ws/.mcprt/settings.json", scope, text);
}

/// Valid UTF-8 without control characters (backslashes aside, nothing
/// escape_for_display would change): safe for a log line or a terminal.
bool printable(std::string_view s) {
  std::size_t backslashes = 0;
  for (char c : s)
    backslashes += c == '\\';
  return escape_for_display(s).size() == s.size() + backslashes;
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

TEST(SettingsSources, ProfilesSwapTheConfigDirectory) {
  auto p = settings_sources("/home/u", "/ws");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].path, "/home/u/.mcprt/settings.json");
  EXPECT_EQ(p[0].scope, config_scope::user);
  EXPECT_EQ(p[0].format, settings_format::settings);
  EXPECT_EQ(p[1].path, "/ws/.mcp.json");
  EXPECT_EQ(p[1].scope, config_scope::project);
  EXPECT_EQ(p[1].format, settings_format::mcp_json);
  EXPECT_EQ(p[2].path, "/ws/.mcprt/settings.json");
  EXPECT_EQ(p[2].scope, config_scope::workspace);
  auto q = settings_sources("/home/u", "/ws", *profile::parse("qwen"));
  EXPECT_EQ(q[0].path, "/home/u/.qwen/settings.json");
  EXPECT_EQ(q[1].path, "/ws/.mcp.json");
  EXPECT_EQ(q[2].path, "/ws/.qwen/settings.json");
  EXPECT_EQ(settings_sources("/h", "/w", *profile::parse("gemini"))[2].path, "/w/.gemini/settings.json");
  EXPECT_FALSE(profile::parse("zed"));
  EXPECT_FALSE(profile::parse(""));
  for (auto& name : profile::names()) {
    auto parsed = profile::parse(name);
    ASSERT_TRUE(parsed) << name;
    EXPECT_EQ(parsed->name, name);
  }
}

// Other clients' files keep the gating of their scope: what comes with the
// repository is a project file, what sits in the home directory is the
// user's. mcprt's own state stays under .mcprt for them.
TEST(SettingsSources, OtherClientsFilesKeepTheGatingOfTheirScope) {
  auto vs = *profile::parse("vscode");
  EXPECT_EQ(vs.dir_name, ".mcprt");
  auto v = settings_sources("/home/u", "/ws", vs);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].path, "/home/u/.config/Code/User/mcp.json");
  EXPECT_EQ(v[0].scope, config_scope::user);
  EXPECT_EQ(v[1].path, "/ws/.vscode/mcp.json");
  EXPECT_EQ(v[1].scope, config_scope::project);
  EXPECT_EQ(v[1].format, settings_format::vscode);
  EXPECT_TRUE(is_gated(v[1].scope));
  EXPECT_FALSE(is_gated(v[0].scope));

  auto c = settings_sources("/home/u", "/ws", *profile::parse("cursor"));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].path, "/home/u/.cursor/mcp.json");
  EXPECT_EQ(c[0].scope, config_scope::user);
  EXPECT_EQ(c[0].format, settings_format::mcp_json);
  EXPECT_EQ(c[1].path, "/ws/.cursor/mcp.json");
  EXPECT_EQ(c[1].scope, config_scope::project);

  auto cl = settings_sources("/home/u", "/ws", *profile::parse("claude"));
  ASSERT_EQ(cl.size(), 2u);
  EXPECT_EQ(cl[0].path, "/home/u/.claude.json");
  EXPECT_EQ(cl[0].format, settings_format::claude_user);
  EXPECT_EQ(cl[0].scope, config_scope::user);
  EXPECT_EQ(cl[1].path, "/ws/.mcp.json");
  EXPECT_EQ(cl[1].scope, config_scope::project);

  EXPECT_EQ(format_of(v, "/ws/.vscode/mcp.json", config_scope::project), settings_format::vscode);
  EXPECT_EQ(format_of(v, "/elsewhere.json", config_scope::session), settings_format::mcp_json);
  EXPECT_EQ(format_of(v, "/elsewhere.json", config_scope::user), settings_format::settings);
}

TEST(SettingsFormats, VsCodeFilesNameTheirServersServers) {
  auto doc = parse_settings_text("/ws/.vscode/mcp.json", config_scope::project, R"({
    // VS Code writes comments too
    "inputs": [{"type": "promptString", "id": "token", "password": true}],
    "servers": {
      "gh": {"type": "http", "url": "https://api.example/mcp", "headers": {"Authorization": "Bearer ${input:token}"}},
      "fs": {"type": "stdio", "command": "npx", "args": ["-y", "server-filesystem"], "envFile": "${workspaceFolder}/.env"}
    },
    "mcpServers": {"ignored": {"command": "never"}}
  })", settings_format::vscode);
  ASSERT_TRUE(doc.ok()) << doc.error->message;
  EXPECT_EQ(doc.format, settings_format::vscode);
  ASSERT_EQ(doc.servers.size(), 2u);
  EXPECT_EQ(doc.servers.at("gh").transport(), transport_kind::http);
  EXPECT_EQ(doc.servers.at("fs").transport(), transport_kind::stdio);
  EXPECT_EQ(doc.servers.at("fs").scope, config_scope::project);
  EXPECT_EQ(doc.servers.at("fs").source, "/ws/.vscode/mcp.json");
  EXPECT_FALSE(doc.servers.count("ignored"));

  // The gating actor re-parses the kept content in the same format.
  auto again = parse_settings_value(doc.path, doc.scope, doc.content, nullptr, settings_format::vscode);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(servers_equal(again.servers, doc.servers));
}

TEST(SettingsFormats, AVsCodeErrorNamesTheServersKeyAndItsPosition) {
  auto doc = parse_settings_text("/ws/.vscode/mcp.json", config_scope::project,
                                 "{\n  \"servers\": {\n    \"fs\": {\"command\": 7}\n  }\n}",
                                 settings_format::vscode);
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.error->line, 3);
  EXPECT_EQ(doc.error->message.rfind("servers.fs.command", 0), 0u) << doc.error->message;
  auto not_object = parse_settings_text("/ws/.vscode/mcp.json", config_scope::project, R"({"servers": []})",
                                        settings_format::vscode);
  ASSERT_FALSE(not_object.ok());
  EXPECT_EQ(not_object.error->message, "servers: expected an object");
}

TEST(SettingsFormats, ClaudeUserFileKeepsOnlyItsServers) {
  auto doc = parse_settings_text("/home/u/.claude.json", config_scope::user, R"({
    "numStartups": 12,
    "projects": {"/ws": {"mcpServers": {"local": {"command": "never"}}, "history": ["secret prompt"]}},
    "mcpServers": {"mem": {"type": "stdio", "command": "npx", "args": ["-y", "server-memory"]}},
    "mcp": {"allowed": ["nothing"]}
  })", settings_format::claude_user);
  ASSERT_TRUE(doc.ok()) << doc.error->message;
  ASSERT_EQ(doc.servers.size(), 1u);
  EXPECT_EQ(doc.servers.at("mem").scope, config_scope::user);
  EXPECT_FALSE(doc.allowed); // not a settings.json: no lists
  EXPECT_EQ(doc.content.size(), 1u);
  EXPECT_TRUE(doc.content.contains("mcpServers"));
  EXPECT_EQ(doc.content.dump().find("secret prompt"), std::string::npos);
  auto none = parse_settings_text("/home/u/.claude.json", config_scope::user, R"({"numStartups": 1})",
                                  settings_format::claude_user);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none.servers.empty());
  EXPECT_EQ(none.content, nlohmann::json::object());
}

TEST(SettingsFormats, AnMcpJsonInTheUserScopeCarriesNoLists) {
  // Cursor's ~/.cursor/mcp.json is user scope but only defines servers.
  auto text = R"({"mcpServers": {"a": {"command": "x"}}, "mcp": {"excluded": ["a"]}})";
  auto cursor = parse_settings_text("/home/u/.cursor/mcp.json", config_scope::user, text, settings_format::mcp_json);
  ASSERT_TRUE(cursor.ok());
  EXPECT_FALSE(cursor.excluded);
  auto settings = parse_settings_text("/home/u/.mcprt/settings.json", config_scope::user, text);
  ASSERT_TRUE(settings.ok());
  ASSERT_TRUE(settings.excluded);
  EXPECT_EQ(*settings.excluded, std::vector<std::string>{"a"});
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

// -- hostile text ------------------------------------------------------------

TEST(SettingsHostile, ALatin1ByteIsAnErrorAtItsPosition) {
  auto d = parse("{\n  \"mcpServers\": {\"caf\xE9\": {\"command\": \"x\"}}\n}\n");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error->line, 2);
  EXPECT_EQ(d.error->column, 22); // `  "mcpServers": {"caf` is 21 characters
  EXPECT_NE(d.error->message.find("UTF-8"), std::string::npos) << d.error->message;
  EXPECT_TRUE(printable(d.error->message)) << d.error->message;
  EXPECT_TRUE(d.servers.empty());
}

TEST(SettingsHostile, InvalidUtf8InAValueAfterAByteOrderMark) {
  // tests/fuzz/regressions/settings/crash-9257ec9a…: a BOM, then a Latin-1-ish
  // byte inside a string value. nlohmann's message quoted the byte, and the
  // JSON holding the message threw when it was dumped.
  const std::string text = "\xEF\xBB\xBF{\"mcpServers\":{\"h\":{\"httpUrl\":\"htt\xC3:://127.0.0.1:1/mcp\"}}}";
  auto d = parse(text);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error->line, 1);
  EXPECT_EQ(d.error->column, 35); // the BOM is not a column
  EXPECT_TRUE(printable(d.error->message)) << d.error->message;
  nlohmann::json shown{{"message", d.error->message}};
  EXPECT_NO_THROW((void)shown.dump());
}

TEST(SettingsHostile, NestingIsBoundedBeforeATreeIsBuilt) {
  std::string deep(1'000'000, '[');
  auto d = parse("{\"x\": " + deep);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error->line, 1);
  EXPECT_EQ(d.error->column, 6 + 64); // the 65th opening bracket
  EXPECT_NE(d.error->message.find("64"), std::string::npos) << d.error->message;
  // 64 levels in all (the top-level object is one) still parse.
  auto nest = [](std::size_t arrays) {
    return "{\"x\": " + std::string(arrays, '[') + std::string(arrays, ']') + "}";
  };
  EXPECT_TRUE(parse(nest(max_settings_depth - 1)).ok());
  EXPECT_FALSE(parse(nest(max_settings_depth)).ok());
}

TEST(SettingsHostile, NoErrorMessageQuotesAValue) {
  const std::string secret = "hunter2-SECRET";
  const std::vector<std::string> texts = {
    // a half-typed secret: the line break is still inside the string
    "{\"mcpServers\": {\"s\": {\"command\": \"x\", \"env\": {\"TOKEN\": \"" + secret + "\n",
    "{\"mcpServers\": {\"s\": {\"env\": {\"TOKEN\": \"" + secret + "\t\"}}}}",
    "{\"mcpServers\": {\"s\": {\"env\": {\"TOKEN\": \"" + secret + "\\q\"}}}}",
    "{\"mcpServers\": {\"s\": {\"env\": {\"TOKEN\": \"" + secret + "\\u12\"}}}}",
    "{\"mcpServers\": {\"s\": {\"env\": {\"TOKEN\": \"" + secret + "\xFF\"}}}}",
    "{\"mcpServers\": {\"s\": {\"env\": {\"TOKEN\": \"" + secret + "\\u0000\"}}}}",
    "{\"mcpServers\": {\"s\": {\"headers\": {\"Authorization\": \"Bearer " + secret + "\\r\\nX: y\"}}}}",
    "{\"mcpServers\": {\"s\": {\"args\": [\"--token=" + secret + "\\u0000\"]}}}",
    "{\"mcpServers\": {\"s\": {\"command\": \"" + secret + "\\u0000\"}}}",
    "{\"mcpServers\": {\"s\": {\"env\": {\"TOKEN\": " + secret + "}}}}",
    "{\"mcpServers\": {\"s\": {\"timeout\": 1e999, \"env\": {\"T\": \"" + secret + "\"}}}}",
    "{\"mcpServers\": {\"s\": {\"env\": {\"TOKEN\": \"" + secret + "\" \"x\"}}}}",
    "{\"mcpServers\": {\"s\": {\"env\": [\"" + secret + "\"]}}}",
    "{\"mcpServers\": \"" + secret + "\"}",
    "{\"mcp\": {\"allowed\": \"" + secret + "\"}}",
    "\"" + secret + "\"",
  };
  for (auto& text : texts) {
    auto d = parse(text);
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_EQ(d.error->message.find("hunter2"), std::string::npos) << d.error->message;
    EXPECT_TRUE(printable(d.error->message)) << d.error->message;
    EXPECT_GE(d.error->line, 1);
  }
}

TEST(SettingsHostile, ServerNamesThatCannotBeShownAreRefusedWhereTheyAre) {
  const std::vector<std::string> names = {
    "\\u001b[2J",                  // clears the screen
    "a\\nINFO forged log line",    // starts a line of its own
    "tab\\there",
    "\\u202egnp.exe",              // right-to-left override
    "next\\u0085line",             // C1 NEL
    "line\\u2028sep",
    std::string(max_server_name_bytes + 1, 'n'),
  };
  for (auto& name : names) {
    auto text = "{\n  \"mcpServers\": {\n    \"ok\": {\"command\": \"x\"},\n    \"" + name
                + "\": {\"command\": \"x\"}\n  }\n}\n";
    auto d = parse(text, config_scope::project);
    ASSERT_FALSE(d.ok()) << name;
    EXPECT_EQ(d.error->line, 4) << name;
    EXPECT_NE(d.error->message.find("printable"), std::string::npos) << d.error->message;
    EXPECT_TRUE(printable(d.error->message)) << d.error->message;
    EXPECT_LT(d.error->message.size(), 400u) << d.error->message;
    EXPECT_TRUE(d.servers.empty());
  }
  // What people do name servers stays fine.
  for (std::string ok : std::vector<std::string>{"github", "brave-search", "fs.local", "@scope/pkg", "my server", "caf\xC3\xA9",
                         "\xE6\x96\x87\xE4\xBB\xB6", "a\\\\b", std::string(max_server_name_bytes, 'n')}) {
    auto d = parse("{\"mcpServers\": {\"" + ok + "\": {\"command\": \"x\"}}}");
    EXPECT_TRUE(d.ok()) << ok << ": " << (d.error ? d.error->message : "");
  }
  // An empty name is refused too.
  EXPECT_FALSE(parse(R"({"mcpServers": {"": {"command": "x"}}})").ok());
}

TEST(SettingsHostile, KeyPathsInMessagesAreEscapedAndShort) {
  auto d = parse("{\"mcpServers\": {\"s\": {\"env\": {\"A\\nB\\u001b[2J\": 5}}}}");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error->path, "/ws/.mcprt/settings.json");
  EXPECT_NE(d.error->message.find("mcpServers.s.env.A\\nB\\x1b[2J"), std::string::npos) << d.error->message;
  EXPECT_TRUE(printable(d.error->message)) << d.error->message;
  auto long_key = std::string(100000, 'k');
  d = parse("{\"mcpServers\": {\"s\": {\"env\": {\"" + long_key + "\": 5}}}}");
  ASSERT_FALSE(d.ok());
  EXPECT_LT(d.error->message.size(), 300u);
  // Cut on a character boundary: still valid UTF-8.
  std::string wide;
  for (int i = 0; i < 100; ++i)
    wide += "\xE2\x82\xAC";
  d = parse("{\"mcpServers\": {\"s\": {\"env\": {\"x" + wide + "\": 5}}}}");
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(printable(d.error->message)) << d.error->message;
}

TEST(SettingsHostile, ColumnsCountCharactersNotBytes) {
  auto d = parse("{\"mcpServers\": {\"\xC3\xA9\xE2\x82\xAC\": {\"args\": 1}}}");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error->column, 32); // `{"mcpServers": {"é€": {"args": ` is 31 characters
  auto p = position_of("\xF0\x9F\x98\x80x", 4);
  EXPECT_EQ(p.column, 2);
}

TEST(SettingsHostile, DocumentsRebuiltFromKeptContentAreValidatedAlike) {
  // The gating actor re-parses what the watcher kept; a refused name must
  // not slip in that way either.
  auto d = parse_settings_value("/s.json", config_scope::workspace,
                                json{{"mcpServers", {{"a\nINFO x", {{"command", "x"}}}}}});
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(printable(d.error->message));
}

TEST(SettingsHostile, CountsAndLengthsThatGatingMatchesAreBounded) {
  auto servers = [](std::size_t n) {
    json doc{{"mcpServers", json::object()}};
    for (std::size_t i = 0; i < n; ++i)
      doc["mcpServers"]["s" + std::to_string(i)] = {{"command", "x"}};
    return doc;
  };
  EXPECT_TRUE(parse(servers(max_servers_per_file).dump()).ok());
  auto d = parse(servers(max_servers_per_file + 1).dump());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error->message.find("more than 2000 servers"), std::string::npos) << d.error->message;
  // A host may hand over more through the value path (benchmarks do).
  EXPECT_TRUE(parse_settings_value("/s.json", config_scope::user, servers(max_servers_per_file + 1)).ok());

  json list = json::array();
  for (std::size_t i = 0; i < max_list_entries; ++i)
    list.push_back("p" + std::to_string(i) + "*");
  EXPECT_TRUE(parse(json{{"mcp", {{"excluded", list}}}}.dump()).ok());
  list.push_back("one-more");
  d = parse(json{{"mcp", {{"excluded", list}}}}.dump());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error->message.find("mcp.excluded: more than 100 entries"), std::string::npos) << d.error->message;
  d = parse(json{{"mcp", {{"allowed", {"ok", std::string(max_pattern_bytes + 1, '*')}}}}}.dump());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error->message.find("mcp.allowed[1]: longer than 256 bytes"), std::string::npos) << d.error->message;
}

TEST(JsonLocate, EndsOnTextThatIsNotJson) {
  // Each of these once could, or could loop: the scanner must stop and say
  // "not found" (or some offset), never hang or recurse.
  const std::vector<std::string> texts = {
    "[}", "{\"a\" 1}", "[1 / 2]", "{\"a\": [1 2 3", "[[[[[", "{\"a\": \"unterminated", "{\"a\":",
    "[/", "{,,,}", "[,,,]", "{\"a\": {]}", "\"\\", "/* unterminated", "[\"a\\",
  };
  for (auto& text : texts) {
    for (auto path : {std::vector<std::string>{"a"}, std::vector<std::string>{"0"},
                      std::vector<std::string>{"999999999999"}, std::vector<std::string>{"a", "0", "b"}}) {
      auto at = locate_json_value(text, path);
      if (at) {
        EXPECT_LE(*at, text.size()) << text;
      }
    }
  }
  // A million open brackets, walked into and skipped over without recursion.
  std::string deep = "[" + std::string(1'000'000, '[') + std::string(1'000'000, ']') + ", 7]";
  auto at = locate_json_value(deep, {"1"});
  ASSERT_TRUE(at);
  EXPECT_EQ(deep[*at], '7');
  EXPECT_FALSE(locate_json_value(deep, {"0", "0", "0", "5"}));
}

// -- reading files: only regular ones, bounded, never blocking ----------------------------

namespace {

class SettingsFiles : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mcprt-settings-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  void write(const std::filesystem::path& p, const std::string& text) {
    std::ofstream(p, std::ios::binary) << text;
  }
  std::filesystem::path dir;
};

} // namespace

TEST_F(SettingsFiles, ARegularFileAndASymlinkToOneAreRead) {
  write(dir / "real.json", R"({"mcpServers": {"a": {"command": "x"}}})");
  std::filesystem::create_symlink(dir / "real.json", dir / "link.json");
  for (auto name : {"real.json", "link.json"}) {
    auto d = load_settings_file(dir / name, config_scope::project);
    ASSERT_TRUE(d.ok()) << name << ": " << d.error->message;
    EXPECT_TRUE(d.exists);
    EXPECT_EQ(d.servers.count("a"), 1u);
  }
}

TEST_F(SettingsFiles, OnlyWhatDoesNotExistIsMissing) {
  std::filesystem::create_symlink(dir / "nowhere.json", dir / "dangling.json");
  write(dir / "plain", "x");
  for (auto p : {dir / "absent.json", dir / "dangling.json", dir / "plain" / "settings.json",
                 dir / "no" / "such" / "dir.json"}) {
    auto r = read_settings_bytes(p);
    EXPECT_EQ(r.result, settings_read::outcome::missing) << p << ": " << r.reason;
    auto d = load_settings_file(p, config_scope::project);
    EXPECT_TRUE(d.ok()) << p;
    EXPECT_FALSE(d.exists) << p;
  }
}

TEST_F(SettingsFiles, ASymlinkLoopIsAnErrorNotAMissingFile) {
  std::filesystem::create_symlink(dir / "b.json", dir / "a.json");
  std::filesystem::create_symlink(dir / "a.json", dir / "b.json");
  auto r = read_settings_bytes(dir / "a.json");
  EXPECT_EQ(r.result, settings_read::outcome::failed);
  auto d = load_settings_file(dir / "a.json", config_scope::project);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(d.exists);
  EXPECT_NE(d.error->message.find("symbolic links"), std::string::npos) << d.error->message;
  EXPECT_EQ(d.error->line, 0);
}

TEST_F(SettingsFiles, ANameTooLongIsAnError) {
  auto d = load_settings_file(dir / (std::string(300, 'x') + ".json"), config_scope::project);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error->message.find("too long"), std::string::npos) << d.error->message;
}

TEST_F(SettingsFiles, AnUnreadableFileIsAnError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  write(dir / "secret.json", "{}");
  std::filesystem::permissions(dir / "secret.json", std::filesystem::perms::none);
  auto d = load_settings_file(dir / "secret.json", config_scope::project);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error->message.find("ermission"), std::string::npos) << d.error->message;
}

TEST_F(SettingsFiles, AFifoIsRefusedWithoutWaitingForAWriter) {
  ASSERT_EQ(::mkfifo((dir / "fifo.json").c_str(), 0600), 0);
  std::filesystem::create_symlink(dir / "fifo.json", dir / "to-fifo.json");
  for (auto name : {"fifo.json", "to-fifo.json"}) {
    auto started = std::chrono::steady_clock::now();
    auto d = load_settings_file(dir / name, config_scope::project);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
    ASSERT_FALSE(d.ok()) << name;
    EXPECT_TRUE(d.exists);
    EXPECT_NE(d.error->message.find("FIFO"), std::string::npos) << d.error->message;
  }
}

TEST_F(SettingsFiles, DevicesAndDirectoriesAreRefused) {
  std::filesystem::create_symlink("/dev/zero", dir / "zero.json");
  auto d = load_settings_file(dir / "zero.json", config_scope::project);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error->message.find("character device"), std::string::npos) << d.error->message;
  std::filesystem::create_directory(dir / "dir.json");
  d = load_settings_file(dir / "dir.json", config_scope::project);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error->message.find("directory"), std::string::npos) << d.error->message;
}

TEST_F(SettingsFiles, ALargerFileIsRefusedBeforeItIsRead) {
  {
    std::ofstream out(dir / "big.json", std::ios::binary);
  }
  // Sparse: 16 MiB and one byte that take no disk space.
  std::filesystem::resize_file(dir / "big.json", max_settings_bytes + 1);
  auto d = load_settings_file(dir / "big.json", config_scope::project);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error->message.find("16 MiB"), std::string::npos) << d.error->message;
  // The bound holds on what is read, whatever the size said.
  write(dir / "small.json", std::string(100, ' ') + "{}");
  auto r = read_settings_bytes(dir / "small.json", 64);
  EXPECT_EQ(r.result, settings_read::outcome::failed);
  EXPECT_TRUE(r.bytes.empty());
}

TEST(ResolveHome, TheFlagWinsThenHomeThenNothing) {
  EXPECT_EQ(resolve_home("/flag/", "/env"), std::filesystem::path("/flag/"));
  EXPECT_EQ(resolve_home("", "/env/./x/.."), std::filesystem::path("/env/"));
  EXPECT_EQ(resolve_home("rel", nullptr), (std::filesystem::current_path() / "rel").lexically_normal());
  // Unset and empty $HOME are the same: no home, and the message says how to give one.
  for (const char* env : {static_cast<const char*>(nullptr), ""}) {
    std::string why;
    EXPECT_FALSE(resolve_home("", env, &why));
    EXPECT_EQ(why, "no home directory: set $HOME or pass --home");
  }
}
