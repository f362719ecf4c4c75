#include <gtest/gtest.h>

#include "core/fingerprint.hpp"
#include "test_support.hpp"

using namespace mcprt;
using mcprt::test::make_server;
using nlohmann::json;

// Vectors computed with the reference implementation's algorithm in Node.js
// (JSON.stringify of the canonical object, SHA-256, first 16 hex), so the
// connection ids are byte-compatible across the two systems.
TEST(Fingerprint, MatchesPinnedReferenceVectors) {
  auto fs = make_server("fs", json::parse(R"({"command": "node", "args": ["server.js", "--root", "/tmp"], "env": {"B": "2", "A": "1"}})"));
  EXPECT_EQ(canonical_transport(fs),
            R"({"transport":"stdio","command":"node","args":["server.js","--root","/tmp"],"cwd":null,"env":[["A","1"],["B","2"]],"url":null,"httpUrl":null,"tcp":null,"headers":[],"timeout":null,"oauth":null,"authProviderType":null,"targetAudience":null,"targetServiceAccount":null})");
  EXPECT_EQ(connection_id(fs), "fs::8b3e79662bd0fa53");
  auto web = make_server("web", json::parse(R"({"httpUrl": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}, "timeout": 5000})"));
  EXPECT_EQ(connection_id(web), "web::37e3ac3d55443687");
  EXPECT_EQ(connection_id(make_server("a::b", {{"command", "echo"}})), "a::b::bd5f37ca8a99bc7b");
}

TEST(Fingerprint, ProducesA16CharHexSuffix) {
  auto id = connection_id(make_server("s", {{"command", "x"}}));
  auto parsed = parse_connection_id(id);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->first, "s");
  EXPECT_EQ(parsed->second.size(), 16u);
  EXPECT_EQ(parsed->second.find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(Fingerprint, StableAcrossEnvKeyPermutations) {
  auto a = make_server("s", json::parse(R"({"command": "x", "env": {"A": "1", "B": "2", "C": "3"}})"));
  auto b = make_server("s", json::parse(R"({"env": {"C": "3", "A": "1", "B": "2"}, "command": "x"})"));
  EXPECT_EQ(connection_id(a), connection_id(b));
}

TEST(Fingerprint, DivergesOnAnyByteChangeInEnvOrHeaderValues) {
  auto a = make_server("s", json::parse(R"({"command": "x", "env": {"TOKEN": "abc"}})"));
  auto b = make_server("s", json::parse(R"({"command": "x", "env": {"TOKEN": "abd"}})"));
  EXPECT_NE(connection_id(a), connection_id(b));
  auto h1 = make_server("s", json::parse(R"({"httpUrl": "u", "headers": {"A": "1", "B": "2"}})"));
  auto h2 = make_server("s", json::parse(R"({"httpUrl": "u", "headers": {"B": "2", "A": "1"}})"));
  auto h3 = make_server("s", json::parse(R"({"httpUrl": "u", "headers": {"A": "1", "B": "3"}})"));
  EXPECT_EQ(connection_id(h1), connection_id(h2));
  EXPECT_NE(connection_id(h1), connection_id(h3));
}

TEST(Fingerprint, AProxyOrCaFileIsPartOfTheWayAndLeavesOtherIdsAlone) {
  auto base = json::parse(R"({"httpUrl": "https://example.com/mcp"})");
  auto id = connection_id(make_server("s", base));
  auto with_proxy = base;
  with_proxy["proxy"] = "http://proxy:3128";
  auto with_ca = base;
  with_ca["caFile"] = "/etc/ca.pem";
  EXPECT_NE(connection_id(make_server("s", with_proxy)), id);
  EXPECT_NE(connection_id(make_server("s", with_ca)), id);
  EXPECT_NE(connection_id(make_server("s", with_proxy)), connection_id(make_server("s", with_ca)));
  // The pinned reference vectors above are ids of servers without them.
}

TEST(Fingerprint, DivergesOnTransportFields) {
  auto base = json::parse(R"({"command": "x", "args": ["1", "2"], "cwd": "/a", "timeout": 10})");
  auto id = connection_id(make_server("s", base));
  for (auto [path, value] : std::vector<std::pair<std::string, json>>{
         {"/command", "y"}, {"/args/0", "9"}, {"/cwd", "/b"}, {"/timeout", 11}}) {
    auto changed = base;
    changed[json::json_pointer(path)] = value;
    EXPECT_NE(connection_id(make_server("s", changed)), id) << path;
  }
  auto reordered = base;
  reordered["args"] = {"2", "1"};
  EXPECT_NE(connection_id(make_server("s", reordered)), id);
}

TEST(Fingerprint, SameKeyWhenOnlyFiltersTrustOrDescriptionDiffer) {
  auto a = make_server("s", json::parse(R"({"command": "x"})"));
  auto b = make_server("s", json::parse(R"({"command": "x", "trust": true, "includeTools": ["a"], "excludeTools": ["b"], "description": "hello"})"));
  EXPECT_EQ(connection_id(a), connection_id(b));
  EXPECT_NE(filter_key(a), filter_key(b));
}

TEST(Fingerprint, NameIsPartOfTheId) {
  EXPECT_NE(connection_id(make_server("a", {{"command", "x"}})), connection_id(make_server("b", {{"command", "x"}})));
}

TEST(Fingerprint, CanonicalOAuthCollapsesDisabledForms) {
  auto none = connection_id(make_server("s", {{"command", "x"}}));
  for (auto oauth : {json(nullptr), json::object(), json{{"enabled", false}, {"clientId", "c"}}})
    EXPECT_EQ(connection_id(make_server("s", {{"command", "x"}, {"oauth", oauth}})), none) << oauth;
  auto s1 = make_server("s", json::parse(R"({"command": "x", "oauth": {"enabled": true, "scopes": ["b", "a"], "audiences": ["y", "x"]}})"));
  auto s2 = make_server("s", json::parse(R"({"command": "x", "oauth": {"enabled": true, "scopes": ["a", "b"], "audiences": ["x", "y"]}})"));
  EXPECT_EQ(connection_id(s1), connection_id(s2));
  EXPECT_NE(connection_id(s1), none);
}

TEST(ConnectionId, RoundTripsNormalNames) {
  auto p = parse_connection_id("github::0123456789abcdef");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->first, "github");
  EXPECT_EQ(p->second, "0123456789abcdef");
}

TEST(ConnectionId, SplitsOnTheLastSeparator) {
  auto c = make_server("team::github", {{"command", "x"}});
  auto p = parse_connection_id(connection_id(c));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->first, "team::github");
}

TEST(ConnectionId, RejectsMalformedIds) {
  EXPECT_FALSE(parse_connection_id("nofingerprint"));
  EXPECT_FALSE(parse_connection_id("::abc"));
  EXPECT_FALSE(parse_connection_id("name::"));
}

// Approval hash (reference configHash tests).
TEST(ApprovalHash, MatchesPinnedReferenceVectors) {
  EXPECT_EQ(approval_hash(make_server("fs", json::parse(R"({"command": "node", "args": ["server.js", "--root", "/tmp"], "env": {"B": "2", "A": "1"}, "description": "d"})"))),
            "ecc1184a18f8644b1f69e68e314ca2508231711f66b19030cecf9db111f39098");
  EXPECT_EQ(approval_hash(make_server("w", json::parse(R"({"httpUrl": "https://example.com/mcp", "trust": true})"))),
            "b685787b5b94b1e8797ed35e1e5068d3911f279c44bf07eb51d9a994a47f15df");
}

TEST(ApprovalHash, ReturnsAStableFullSha256) {
  auto c = make_server("s", {{"command", "x"}});
  auto h = approval_hash(c);
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(h, approval_hash(make_server("s", {{"command", "x"}})));
}

TEST(ApprovalHash, IndependentOfKeyOrderAtEveryDepth) {
  auto a = make_server("s", json::parse(R"({"command": "x", "env": {"A": "1", "B": "2"}, "extra": {"p": 1, "q": 2}})"));
  auto b = make_server("s", json::parse(R"({"extra": {"q": 2, "p": 1}, "env": {"B": "2", "A": "1"}, "command": "x"})"));
  EXPECT_EQ(approval_hash(a), approval_hash(b));
}

TEST(ApprovalHash, AbsentAndNullFieldsHashTheSame) {
  EXPECT_EQ(approval_hash(make_server("s", {{"command", "x"}, {"cwd", nullptr}})),
            approval_hash(make_server("s", {{"command", "x"}})));
}

TEST(ApprovalHash, IgnoresProvenanceAndCosmeticFields) {
  auto base = approval_hash(make_server("s", {{"command", "x"}}));
  for (auto key : {"scope", "extensionName", "description"})
    EXPECT_EQ(approval_hash(make_server("s", {{"command", "x"}, {key, "whatever"}})), base) << key;
  // Only top-level: a user key named "description" inside env still counts.
  EXPECT_NE(approval_hash(make_server("s", {{"command", "x"}, {"env", {{"description", "v"}}}})), base);
}

TEST(ApprovalHash, BehaviouralChangesChangeTheHash) {
  auto base = json::parse(R"({"command": "x", "args": ["1", "2"], "env": {"A": "1"}, "httpUrl": "u", "headers": {"H": "1"}})");
  auto h = approval_hash(make_server("s", base));
  std::vector<std::pair<std::string, json>> edits = {
    {"/command", "y"}, {"/args/0", "9"}, {"/env/A", "2"}, {"/trust", true},
    {"/httpUrl", "v"}, {"/url", "w"}, {"/headers/H", "2"}, {"/includeTools", json::array({"t"})}};
  for (auto& [path, value] : edits) {
    auto changed = base;
    changed[json::json_pointer(path)] = value;
    EXPECT_NE(approval_hash(make_server("s", changed)), h) << path;
  }
  auto reordered = base;
  reordered["args"] = {"2", "1"};
  EXPECT_NE(approval_hash(make_server("s", reordered)), h);
}

TEST(Fingerprint, ParsedConfigsCarryTheirIdAndItMatchesAFreshComputation) {
  auto c = make_server("fs", json::parse(R"({"command": "node", "args": ["a"]})"));
  EXPECT_EQ(c.connection_id_cache, compute_connection_id(c));
  EXPECT_EQ(connection_id(c), compute_connection_id(c));
  server_config bare = c;
  bare.connection_id_cache.clear();
  EXPECT_EQ(connection_id(bare), connection_id(c));
}

// A config a host builds in code is not checked for UTF-8 like a settings
// file: its id and approval hash must still be computed (nlohmann's dump
// throws on such text), never an exception in the actor that asks.
TEST(Fingerprint, ConfigWithInvalidUtf8GetsAnIdInsteadOfAnException) {
  server_config c;
  c.name = "host";
  c.spec = {{"command", "srv\xff"}, {"args", {"caf\xe9"}}, {"env", {{"K", "\xfe"}}}};
  c.include_tools = std::vector<std::string>{"t\xff"};
  std::string id, hash, filter;
  EXPECT_NO_THROW(id = compute_connection_id(c));
  EXPECT_NO_THROW(hash = approval_hash(c));
  EXPECT_NO_THROW(filter = filter_key(c));
  EXPECT_EQ(id.rfind("host::", 0), 0u);
  EXPECT_EQ(hash.size(), 64u);
}

TEST(Fingerprint, ElicitationPolicyChangesTheIdOnlyWhenSet) {
  auto plain = make_server("fs", json::parse(R"({"command": "node", "args": ["server.js", "--root", "/tmp"], "env": {"B": "2", "A": "1"}})"));
  auto declining = make_server("fs", json::parse(R"({"command": "node", "args": ["server.js", "--root", "/tmp"], "env": {"B": "2", "A": "1"}, "elicitation": "decline"})"));
  auto accepting = make_server("fs", json::parse(R"({"command": "node", "args": ["server.js", "--root", "/tmp"], "env": {"B": "2", "A": "1"}, "elicitation": "accept-defaults"})"));
  // Unset: still the reference implementation's id.
  EXPECT_EQ(connection_id(plain), "fs::8b3e79662bd0fa53");
  // Set: a hot reload that changes it replaces the connection.
  EXPECT_NE(connection_id(declining), connection_id(plain));
  EXPECT_NE(connection_id(accepting), connection_id(plain));
  EXPECT_NE(connection_id(accepting), connection_id(declining));
}
