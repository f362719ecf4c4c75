// The client side of MCP 2026-07-28 in core/mcp_session: server/discover
// first, the stateless wire for a server that offers the revision, and the
// fall back to initialize for one that does not.
#include "core/mcp_session.hpp"

#include <gtest/gtest.h>

#include "core/mcp_headers.hpp"
#include "session_test_support.hpp"

using namespace mcprt;
using namespace std::chrono_literals;
using nlohmann::json;
using mcprt::test::error_line;
using mcprt::test::result_line;

namespace {

std::vector<json> sent_of(const session_effects& fx) {
  std::vector<json> out;
  for (const auto& s : fx.send)
    out.push_back(json::parse(s));
  return out;
}

json modern_discover_result(json versions, json caps = {{"tools", json::object()}}) {
  return {{"resultType", "complete"},
          {"supportedVersions", std::move(versions)},
          {"capabilities", std::move(caps)},
          {"_meta", {{"io.modelcontextprotocol/serverInfo", {{"name", "modern"}, {"version", "2.0"}}}}},
          {"ttlMs", 0},
          {"cacheScope", "public"}};
}

class ModernSession : public ::testing::Test {
protected:
  mcp_session::time_point now = mcp_session::time_point{} + 1000h;

  std::unique_ptr<mcp_session> make(bool http_headers = false) {
    mcp_session::options o;
    o.probe_modern = true;
    o.http_headers = http_headers;
    o.client_name = "mcprt-test";
    o.client_version = "9.9";
    return std::make_unique<mcp_session>(o);
  }

  static void expect_modern_meta(const json& request) {
    auto& meta = request.at("params").at("_meta");
    EXPECT_EQ(meta.at("io.modelcontextprotocol/protocolVersion"), "2026-07-28") << request.dump();
    EXPECT_TRUE(meta.at("io.modelcontextprotocol/clientCapabilities").is_object()) << request.dump();
    EXPECT_EQ(meta.at("io.modelcontextprotocol/clientInfo").at("name"), "mcprt-test") << request.dump();
  }

  /// Starts, answers server/discover with the modern revision, lists
  /// `tools`: the session is ready.
  std::unique_ptr<mcp_session> ready(json tools, bool http_headers = false) {
    auto s = make(http_headers);
    auto first = sent_of(s->start(now));
    EXPECT_EQ(first.at(0).at("method"), "server/discover");
    auto next = sent_of(s->on_line(result_line(first.at(0).at("id"), modern_discover_result({"2026-07-28"})), now));
    EXPECT_EQ(next.size(), 1u);
    EXPECT_EQ(next.at(0).at("method"), "tools/list");
    auto done = s->on_line(result_line(next.at(0).at("id"), {{"resultType", "complete"}, {"tools", tools}}), now);
    EXPECT_TRUE(done.ready);
    return s;
  }
};

} // namespace

TEST_F(ModernSession, AServerThatOffersTheRevisionIsSpokenToWithoutInitialize) {
  auto s = make();
  auto fx = s->start(now);
  auto sent = sent_of(fx);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["method"], "server/discover");
  expect_modern_meta(sent[0]);
  EXPECT_EQ(s->wire_protocol(), "2026-07-28") << "the probe itself declares the revision";

  auto after = sent_of(s->on_line(result_line(sent[0]["id"], modern_discover_result({"2026-07-28", "2025-11-25"})), now));
  for (auto& m : after) {
    EXPECT_NE(m.value("method", ""), "initialize");
    EXPECT_NE(m.value("method", ""), "notifications/initialized");
  }
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0]["method"], "tools/list");
  expect_modern_meta(after[0]);
  EXPECT_TRUE(s->modern());
  EXPECT_EQ(s->negotiated_protocol(), "2026-07-28");
  EXPECT_EQ(s->server_info().name, "modern") << "serverInfo from the result's _meta";

  auto ready = s->on_line(result_line(after[0]["id"], {{"tools", json::array({{{"name", "echo"}}})}}), now);
  EXPECT_TRUE(ready.ready);
  auto call = sent_of(s->call_tool(7, "echo", {{"text", "x"}}, now, true));
  ASSERT_EQ(call.size(), 1u);
  expect_modern_meta(call[0]);
  EXPECT_TRUE(call[0]["params"]["_meta"].contains("progressToken")) << "the caller's _meta is kept";
  // A result without resultType is complete (earlier servers send none).
  auto done = s->on_line(result_line(call[0]["id"], {{"content", json::array()}}), now);
  ASSERT_EQ(done.completed_calls.size(), 1u);
  EXPECT_EQ(done.completed_calls[0].outcome, call_outcome::ok);
  // No ping at this revision: the liveness check asks server/discover.
  auto ping = sent_of(s->send_ping(now));
  ASSERT_EQ(ping.size(), 1u);
  EXPECT_EQ(ping[0]["method"], "server/discover");
  EXPECT_TRUE(s->on_line(result_line(ping[0]["id"], modern_discover_result({"2026-07-28"})), now).pong);
}

TEST_F(ModernSession, AnyErrorToTheProbeFallsBackToInitialize) {
  for (int code : {-32601, -32600, -32000, -32602}) {
    auto s = make();
    auto probe = sent_of(s->start(now));
    auto next = sent_of(s->on_line(error_line(probe[0]["id"], code, "Method not found"), now));
    ASSERT_EQ(next.size(), 1u) << code;
    EXPECT_EQ(next[0]["method"], "initialize") << code;
    EXPECT_FALSE(next[0]["params"].contains("_meta")) << "a legacy request carries no modern _meta";
    EXPECT_EQ(s->wire_protocol(), std::nullopt) << "initialize goes out without a revision header";
    auto init = sent_of(s->on_line(result_line(next[0]["id"], {{"protocolVersion", "2025-11-25"},
                                                              {"capabilities", json::object()},
                                                              {"serverInfo", {{"name", "old"}, {"version", "1"}}}}),
                                  now));
    EXPECT_EQ(init.at(0)["method"], "notifications/initialized");
    EXPECT_FALSE(s->modern());
    EXPECT_EQ(s->wire_protocol(), "2025-11-25");
  }
}

TEST_F(ModernSession, AResultThatIsNoDiscoveryResultFallsBackToo) {
  auto s = make();
  auto probe = sent_of(s->start(now));
  auto next = sent_of(s->on_line(result_line(probe[0]["id"], json::object()), now));
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0]["method"], "initialize");
}

TEST_F(ModernSession, UnsupportedVersionNamingOursIsAskedOnceMore) {
  auto s = make();
  auto probe = sent_of(s->start(now));
  auto refusal = json{{"jsonrpc", "2.0"},
                      {"id", probe[0]["id"]},
                      {"error", {{"code", -32022},
                                 {"message", "Unsupported protocol version"},
                                 {"data", {{"supported", {"2026-07-28"}}, {"requested", "2026-07-28"}}}}}};
  auto again = sent_of(s->on_line(refusal.dump(), now));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0]["method"], "server/discover");
  // A server that keeps refusing what it lists is not asked forever.
  refusal["id"] = again[0]["id"];
  auto fx = s->on_line(refusal.dump(), now);
  ASSERT_TRUE(fx.failure);
  EXPECT_NE(fx.failure->find("none of the revisions"), std::string::npos) << *fx.failure;
}

TEST_F(ModernSession, UnsupportedVersionListingAnEarlierRevisionUsesInitialize) {
  auto s = make();
  auto probe = sent_of(s->start(now));
  auto refusal = json{{"jsonrpc", "2.0"},
                      {"id", probe[0]["id"]},
                      {"error", {{"code", -32022}, {"message", "no"}, {"data", {{"supported", {"2025-06-18"}}}}}}};
  auto next = sent_of(s->on_line(refusal.dump(), now));
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0]["method"], "initialize");
}

TEST_F(ModernSession, ADiscoveryListingOnlyUnknownRevisionsFails) {
  auto s = make();
  auto probe = sent_of(s->start(now));
  auto fx = s->on_line(result_line(probe[0]["id"], modern_discover_result({"2099-01-01"})), now);
  ASSERT_TRUE(fx.failure);
  EXPECT_TRUE(fx.send.empty());
}

TEST_F(ModernSession, AnInputRequiredResultEndsTheCallWithAnErrorNotAsItsAnswer) {
  auto s = ready(json::array({{{"name", "confirm"}}}));
  auto call = sent_of(s->call_tool(1, "confirm", json::object(), now));
  auto fx = s->on_line(result_line(call[0]["id"], {{"resultType", "input_required"},
                                                   {"inputRequests", {{"c", {{"method", "elicitation/create"}}}}}}),
                       now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::rpc_error);
  EXPECT_NE(fx.completed_calls[0].error->message.find("input-required"), std::string::npos);
}

TEST_F(ModernSession, ToolParametersMirroredIntoHeadersAndBadAnnotationsLeaveTheToolOut) {
  json tools = json::array({
    {{"name", "sql"},
     {"inputSchema",
      {{"type", "object"},
       {"properties",
        {{"region", {{"type", "string"}, {"x-mcp-header", "Region"}}},
         {"opts", {{"type", "object"}, {"properties", {{"dry", {{"type", "boolean"}, {"x-mcp-header", "Dry"}}}}}}},
         {"query", {{"type", "string"}}}}}}}},
    {{"name", "bad_type"},
     {"inputSchema", {{"type", "object"}, {"properties", {{"n", {{"type", "number"}, {"x-mcp-header", "N"}}}}}}}},
    {{"name", "bad_place"},
     {"inputSchema",
      {{"type", "object"},
       {"properties", {{"xs", {{"type", "array"}, {"items", {{"type", "string"}, {"x-mcp-header", "X"}}}}}}}}}},
    {{"name", "twice"},
     {"inputSchema",
      {{"type", "object"},
       {"properties",
        {{"a", {{"type", "string"}, {"x-mcp-header", "Same"}}}, {"b", {{"type", "string"}, {"x-mcp-header", "same"}}}}}}}},
  });
  auto s = ready(tools, true);
  std::vector<std::string> names;
  for (auto& t : s->tools())
    names.push_back(t.name);
  EXPECT_EQ(names, std::vector<std::string>{"sql"});
  EXPECT_EQ(s->rejected_tools().size(), 3u);
  auto fx = s->call_tool(1, "sql", {{"region", "us-west1"}, {"opts", {{"dry", true}}}, {"query", "SELECT 1"}}, now);
  ASSERT_EQ(fx.send_headers.size(), 1u);
  EXPECT_EQ(fx.send_headers[0].first, 0u);
  auto& h = fx.send_headers[0].second;
  // The standard fields first, then the parameters in the schema's key order.
  EXPECT_EQ(h, (std::vector<std::pair<std::string, std::string>>{{"Mcp-Method", "tools/call"},
                                                                 {"Mcp-Name", "sql"},
                                                                 {"Mcp-Param-Dry", "true"},
                                                                 {"Mcp-Param-Region", "us-west1"}}));
  auto none = s->call_tool(2, "sql", {{"region", nullptr}, {"query", "x"}}, now);
  ASSERT_EQ(none.send_headers.size(), 1u);
  EXPECT_EQ(none.send_headers[0].second,
            (std::vector<std::pair<std::string, std::string>>{{"Mcp-Method", "tools/call"}, {"Mcp-Name", "sql"}}))
    << "null and missing values send no Mcp-Param header";
  // Over stdio nothing is mirrored.
  auto stdio = ready(json::array({{{"name", "echo"}}}), false);
  EXPECT_TRUE(stdio->call_tool(3, "echo", json::object(), now).send_headers.empty());
}

TEST(McpHeaders, StandardHeadersAndTheirEncoding) {
  auto h = mcp_request_headers(
    {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/call"}, {"params", {{"name", "get_weather"}}}});
  EXPECT_EQ(h, (std::vector<std::pair<std::string, std::string>>{{"Mcp-Method", "tools/call"},
                                                                 {"Mcp-Name", "get_weather"}}));
  h = mcp_request_headers({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "resources/read"}, {"params", {{"uri", "file:///a b"}}}});
  EXPECT_EQ(h.at(1).second, "file:///a b");
  h = mcp_request_headers({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "tools/list"}});
  EXPECT_EQ(h.size(), 1u);
  EXPECT_TRUE(mcp_request_headers({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}}).empty());
  EXPECT_EQ(mcp_header_value("us-west1"), "us-west1");
  EXPECT_EQ(mcp_header_value("Hello, \xe4\xb8\x96\xe7\x95\x8c"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
  EXPECT_EQ(mcp_header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
  // And back: what a server compares with the body.
  for (std::string v : {"us-west1", "Hello, \xe4\xb8\x96\xe7\x95\x8c", " padded ", "", "ab", "abc"})
    EXPECT_EQ(decode_mcp_header_value(mcp_header_value(v)), v);
  EXPECT_EQ(decode_mcp_header_value("=?base64?YQ?="), std::nullopt);   // not a multiple of 4
  EXPECT_EQ(decode_mcp_header_value("=?base64?Y!==?="), std::nullopt); // not base64
  EXPECT_EQ(decode_mcp_header_value("=?base64?YQ=a?="), std::nullopt); // padding inside
  EXPECT_EQ(decode_mcp_header_value("caf\xc3\xa9"), std::nullopt);     // raw UTF-8 in a header
  EXPECT_EQ(mcp_header_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
  EXPECT_EQ(mcp_header_value("=?base64?literal?="), "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=");
  EXPECT_TRUE(is_modern_protocol("2026-07-28"));
  EXPECT_FALSE(is_modern_protocol("2025-11-25"));
  EXPECT_FALSE(is_modern_protocol(""));
}
