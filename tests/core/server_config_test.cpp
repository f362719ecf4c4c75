#include <gtest/gtest.h>

#include "core/server_config.hpp"
#include "test_support.hpp"

using namespace mcprt;
using mcprt::test::make_map;
using mcprt::test::make_server;
using nlohmann::json;

TEST(ServerConfig, ParsesEveryKnownFieldAndKeepsUnknownOnes) {
  auto c = make_server("fs", json::parse(R"({
    "command": "node", "args": ["a", "b"], "env": {"K": "v"}, "cwd": "/tmp",
    "headers": {"H": "x"}, "timeout": 1500, "trust": true, "includeTools": ["t1"],
    "excludeTools": ["t2"], "disabled": false, "description": "d", "futureField": {"x": 1}})"));
  EXPECT_EQ(c.command, "node");
  EXPECT_EQ(c.args, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c.env.at("K"), "v");
  EXPECT_EQ(c.cwd, "/tmp");
  EXPECT_EQ(c.headers.at("H"), "x");
  EXPECT_EQ(c.timeout_ms, 1500);
  EXPECT_EQ(c.trust, true);
  EXPECT_EQ(c.include_tools, std::vector<std::string>{"t1"});
  EXPECT_EQ(c.exclude_tools, std::vector<std::string>{"t2"});
  EXPECT_FALSE(c.disabled);
  EXPECT_EQ(c.description, "d");
  EXPECT_EQ(c.spec.at("futureField").at("x"), 1);
}

TEST(ServerConfig, AProtocolVersionIsARevisionDate) {
  auto ok = parse_server_config("s", json::parse(R"({"command": "x", "protocolVersion": "2025-11-25"})"),
                                config_scope::user);
  ASSERT_TRUE(ok.config) << ok.error->message;
  for (auto bad : {R"({"command": "x", "protocolVersion": 2025})", R"({"command": "x", "protocolVersion": "latest"})"}) {
    auto r = parse_server_config("s", json::parse(bad), config_scope::user);
    ASSERT_TRUE(r.error) << bad;
    EXPECT_NE(r.error->path_string().find("protocolVersion"), std::string::npos) << r.error->path_string();
  }
}

TEST(ServerConfig, TransportClassification) {
  EXPECT_EQ(make_server("a", {{"command", "x"}}).transport(), transport_kind::stdio);
  EXPECT_EQ(make_server("a", {{"url", "http://h/sse"}}).transport(), transport_kind::sse);
  EXPECT_EQ(make_server("a", {{"httpUrl", "http://h/mcp"}}).transport(), transport_kind::http);
  // httpUrl wins over url, url over command, as in the reference.
  EXPECT_EQ(make_server("a", {{"httpUrl", "h"}, {"url", "u"}, {"command", "c"}}).transport(),
            transport_kind::http);
  EXPECT_EQ(make_server("a", {{"url", "u"}, {"command", "c"}}).transport(), transport_kind::sse);
  EXPECT_EQ(make_server("a", {{"url", "u"}, {"type", "http"}}).transport(), transport_kind::http);
  EXPECT_EQ(make_server("a", json::object()).transport(), transport_kind::unknown);
}

TEST(ServerConfig, ProxyAndCaFileAreTheWayToAnHttpServer) {
  auto res = parse_server_config(
    "s", json::parse(R"({"httpUrl": "https://mcp.example.com/mcp", "proxy": "http://proxy:3128", "caFile": "/etc/corp-ca.pem"})"),
    config_scope::user);
  ASSERT_TRUE(res.config);
  EXPECT_EQ(res.config->proxy, "http://proxy:3128");
  EXPECT_EQ(res.config->ca_file, "/etc/corp-ca.pem");
  auto bare = parse_server_config("s", json::parse(R"({"httpUrl": "https://mcp.example.com/mcp"})"), config_scope::user);
  ASSERT_TRUE(bare.config);
  EXPECT_FALSE(bare.config->proxy);
  EXPECT_FALSE(bare.config->ca_file);
}

TEST(ServerConfig, WrongTypesNameTheFieldPath) {
  struct row {
    const char* spec;
    const char* path;
  } rows[] = {
    {R"({"command": 3})", "mcpServers.s.command"},
    {R"({"args": "x"})", "mcpServers.s.args"},
    {R"({"args": ["a", 1]})", "mcpServers.s.args[1]"},
    {R"({"env": {"A": 1}})", "mcpServers.s.env.A"},
    {R"({"env": []})", "mcpServers.s.env"},
    {R"({"headers": {"H": true}})", "mcpServers.s.headers.H"},
    {R"({"timeout": "5"})", "mcpServers.s.timeout"},
    {R"({"timeout": -1})", "mcpServers.s.timeout"},
    {R"({"timeout": 1.5})", "mcpServers.s.timeout"},
    {R"({"trust": "yes"})", "mcpServers.s.trust"},
    {R"({"disabled": 1})", "mcpServers.s.disabled"},
    {R"({"includeTools": [1]})", "mcpServers.s.includeTools[0]"},
    {R"({"elicitation": true})", "mcpServers.s.elicitation"},
    {R"({"elicitation": "maybe"})", "mcpServers.s.elicitation"},
    {R"({"elicitation": "ask"})", "mcpServers.s.elicitation"},
    {R"({"proxy": 8080})", "mcpServers.s.proxy"},
    {R"({"caFile": ["a.pem"]})", "mcpServers.s.caFile"},
    {R"("just a string")", "mcpServers.s"},
  };
  for (auto& r : rows) {
    auto res = parse_server_config("s", json::parse(r.spec), config_scope::user, {"mcpServers", "s"});
    ASSERT_FALSE(res.config) << r.spec;
    ASSERT_TRUE(res.error) << r.spec;
    EXPECT_EQ(res.error->path_string(), r.path) << r.spec;
    EXPECT_NE(res.error->message.find("expected"), std::string::npos) << res.error->message;
  }
}

TEST(ServerConfig, NullFieldsAreTheSameAsAbsentOnes) {
  auto a = make_server("s", {{"command", "x"}, {"cwd", nullptr}});
  auto b = make_server("s", {{"command", "x"}});
  EXPECT_TRUE(servers_equal(a, b));
  EXPECT_FALSE(a.cwd);
}

// Seed verification item 9: mcpServersEqual.
TEST(ServersEqual, KeyOrderDifferencesAreEqual) {
  auto a = make_map(json::parse(R"({"s": {"command": "x", "args": ["1"], "env": {"A": "1", "B": "2"}}})"));
  auto b = make_map(json::parse(R"({"s": {"env": {"B": "2", "A": "1"}, "args": ["1"], "command": "x"}})"));
  EXPECT_TRUE(servers_equal(a, b));
}

TEST(ServersEqual, MissingMapEqualsEmptyMap) {
  EXPECT_TRUE(servers_equal(server_map{}, make_map(json::object())));
}

TEST(ServersEqual, DetectsNestedFieldChanges) {
  auto base = json::parse(R"({"s": {"command": "x", "args": ["1"], "env": {"A": "1"}, "headers": {"H": "h"}}})");
  for (auto path : {"/s/args/0", "/s/env/A", "/s/headers/H", "/s/command"}) {
    auto changed = base;
    changed[json::json_pointer(path)] = "changed";
    EXPECT_FALSE(servers_equal(make_map(base), make_map(changed))) << path;
  }
}

TEST(ServersEqual, DetectsAddingAndRemovingAServer) {
  auto one = make_map(json::parse(R"({"a": {"command": "x"}})"));
  auto two = make_map(json::parse(R"({"a": {"command": "x"}, "b": {"command": "y"}})"));
  EXPECT_FALSE(servers_equal(one, two));
  EXPECT_FALSE(servers_equal(two, one));
}

TEST(ServersEqual, ArgsReorderIsNotEqual) {
  auto a = make_map(json::parse(R"({"s": {"command": "x", "args": ["1", "2"]}})"));
  auto b = make_map(json::parse(R"({"s": {"command": "x", "args": ["2", "1"]}})"));
  EXPECT_FALSE(servers_equal(a, b));
}

TEST(ServersEqual, ScopeChangeIsAChange) {
  auto a = make_map(json::parse(R"({"s": {"command": "x"}})"), config_scope::user);
  auto b = make_map(json::parse(R"({"s": {"command": "x"}})"), config_scope::workspace);
  EXPECT_FALSE(servers_equal(a, b));
}

TEST(ServersEqual, UnknownFieldsTakePart) {
  auto a = make_map(json::parse(R"({"s": {"command": "x", "extra": 1}})"));
  auto b = make_map(json::parse(R"({"s": {"command": "x", "extra": 2}})"));
  EXPECT_FALSE(servers_equal(a, b));
}

// -- what would run differently from what was written ---------------------------

TEST(ServerConfig, RefusesWhatExecAndHttpWouldCutOrSplit) {
  struct row {
    json spec;
    const char* path;
    const char* needle;
  } rows[] = {
    {{{"command", std::string("node\0 --evil", 12)}}, "mcpServers.s.command", "NUL"},
    {{{"command", "x"}, {"args", {"ok", std::string("a\0b", 3)}}}, "mcpServers.s.args[1]", "NUL"},
    {{{"command", "x"}, {"cwd", std::string("/tmp\0/x", 7)}}, "mcpServers.s.cwd", "NUL"},
    {{{"command", "x"}, {"env", {{"K", std::string("v\0w", 3)}}}}, "mcpServers.s.env.K", "NUL"},
    {{{"command", "x"}, {"env", {{"A=B", "v"}}}}, "mcpServers.s.env.A=B", "'='"},
    {{{"command", "x"}, {"env", {{"", "v"}}}}, "mcpServers.s.env.", "empty"},
    {{{"httpUrl", std::string("http://h/\0", 10)}}, "mcpServers.s.httpUrl", "NUL"},
    {{{"url", std::string("http://h/\0", 10)}}, "mcpServers.s.url", "NUL"},
    {{{"httpUrl", "http://h"}, {"headers", {{"X-A", "v\r\nHost: evil"}}}}, "mcpServers.s.headers.X-A", "line break"},
    {{{"httpUrl", "http://h"}, {"headers", {{"X-A", "v\nw"}}}}, "mcpServers.s.headers.X-A", "line break"},
    {{{"httpUrl", "http://h"}, {"headers", {{"Bad Name", "v"}}}}, "mcpServers.s.headers.Bad Name", "token"},
    {{{"httpUrl", "http://h"}, {"headers", {{"X:Y", "v"}}}}, "mcpServers.s.headers.X:Y", "token"},
  };
  for (auto& r : rows) {
    auto res = parse_server_config("s", r.spec, config_scope::project, {"mcpServers", "s"});
    ASSERT_FALSE(res.config) << r.spec.dump();
    ASSERT_TRUE(res.error);
    EXPECT_EQ(res.error->path_string(), r.path);
    EXPECT_NE(res.error->message.find(r.needle), std::string::npos) << res.error->message;
    // The message says what is wrong, never what the value was.
    EXPECT_EQ(res.error->message.find("evil"), std::string::npos) << res.error->message;
  }
  // Headers and env as people write them stay fine.
  auto ok = parse_server_config("s", json::parse(R"({"httpUrl": "http://h", "headers":
    {"Authorization": "Bearer a.b-c_d", "X-Api-Key": "k", "Accept": "text/event-stream, application/json"},
    "env": {"PATH": "/usr/bin:/bin", "EMPTY": ""}, "description": "any\ttext"})"), config_scope::user);
  EXPECT_TRUE(ok.config) << (ok.error ? ok.error->message : "");
}

TEST(ServerConfig, ServerNameRule) {
  EXPECT_FALSE(server_name_problem("github"));
  EXPECT_FALSE(server_name_problem("caf\xC3\xA9 tools"));
  EXPECT_TRUE(server_name_problem(""));
  EXPECT_TRUE(server_name_problem("a\x1b[2J"));
  EXPECT_TRUE(server_name_problem("a\nb"));
  EXPECT_TRUE(server_name_problem("a\x7f"));
  EXPECT_TRUE(server_name_problem("\xE2\x80\xAE" "abc")); // U+202E
  EXPECT_TRUE(server_name_problem("caf\xE9"));            // not UTF-8 (a host may hand it over)
  EXPECT_TRUE(server_name_problem(std::string(max_server_name_bytes + 1, 'a')));
  auto why = server_name_problem("a\nb");
  ASSERT_TRUE(why);
  EXPECT_EQ(why->find('\n'), std::string::npos);
  // Host-provided configs go through the same door.
  auto r = parse_server_config("a\nINFO forged", json{{"command", "x"}}, config_scope::session);
  EXPECT_FALSE(r.config);
}

TEST(ServerConfig, ElicitationPolicyPerServer) {
  EXPECT_EQ(make_server("s", json::parse(R"({"command":"x"})")).elicitation, std::nullopt);
  EXPECT_EQ(make_server("s", json::parse(R"({"command":"x","elicitation":"decline"})")).elicitation,
            elicitation_policy::decline);
  EXPECT_EQ(make_server("s", json::parse(R"({"command":"x","elicitation":"accept-defaults"})")).elicitation,
            elicitation_policy::accept_defaults);
  // The message names what is allowed, never the value written.
  auto res = parse_server_config("s", json::parse(R"({"command":"x","elicitation":"s3cret"})"),
                                 config_scope::user, {"mcpServers", "s"});
  ASSERT_TRUE(res.error);
  EXPECT_EQ(res.error->message, R"(expected "decline" or "accept-defaults")");
}
