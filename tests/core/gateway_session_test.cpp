#include "core/gateway_session.hpp"

#include <gtest/gtest.h>

using namespace mcprt;
using nlohmann::json;

namespace {

gateway_catalog two_servers() {
  gateway_server_view fs;
  fs.name = "fs";
  fs.prefix = "fs__";
  fs.available = true;
  fs.capabilities = {{"tools", json::object()}, {"prompts", json::object()}, {"resources", {{"subscribe", true}}}};
  fs.tools.push_back({{"name", "read"}, {"inputSchema", {{"type", "object"}}}, {"annotations", {{"readOnlyHint", true}}}});
  fs.prompts.push_back({{"name", "summarize"}});
  fs.resources.push_back({{"uri", "file:///a.txt"}, {"name", "a"}});
  gateway_server_view off;
  off.name = "off";
  off.prefix = "off__";
  off.available = false;
  return gateway_catalog::build({fs, off});
}

json request(int id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

json initialize(const std::string& version = "2025-06-18", json caps = json::object()) {
  return request(1, "initialize",
                 {{"protocolVersion", version},
                  {"capabilities", std::move(caps)},
                  {"clientInfo", {{"name", "test-client"}, {"version", "9.9"}}}});
}

gateway_session ready_session(const gateway_catalog& cat, json caps = json::object()) {
  gateway_session s({});
  s.on_message(initialize("2025-06-18", std::move(caps)), cat);
  s.on_message({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, cat);
  return s;
}

} // namespace

TEST(GatewaySession, InitializeAnswersTheClientsRevisionAndTheCatalogsCapabilities) {
  auto cat = two_servers();
  gateway_session s({"mcprt", "1.0", ""});
  auto fx = s.on_message(initialize("2025-03-26"), cat);
  ASSERT_EQ(fx.send.size(), 1u);
  auto& r = fx.send[0]["result"];
  EXPECT_EQ(r["protocolVersion"], "2025-03-26");
  EXPECT_EQ(r["serverInfo"]["name"], "mcprt");
  EXPECT_TRUE(r["capabilities"]["tools"]["listChanged"].get<bool>());
  EXPECT_TRUE(r["capabilities"]["resources"]["subscribe"].get<bool>());
  EXPECT_EQ(s.client_name(), "test-client");
  EXPECT_EQ(s.client_version(), "9.9");
  EXPECT_TRUE(s.initialized());
}

TEST(GatewaySession, AnUnknownRevisionGetsTheNewest) {
  auto cat = two_servers();
  gateway_session s({});
  auto fx = s.on_message(initialize("1999-01-01"), cat);
  EXPECT_EQ(fx.send.at(0)["result"]["protocolVersion"], "2025-11-25");
}

TEST(GatewaySession, RequestsBeforeInitializeAreRefusedButPingIsAnswered) {
  auto cat = two_servers();
  gateway_session s({});
  auto fx = s.on_message(request(3, "tools/list"), cat);
  ASSERT_EQ(fx.send.size(), 1u);
  EXPECT_EQ(fx.send[0]["error"]["code"], gateway_error::invalid_request);
  fx = s.on_message(request(4, "ping"), cat);
  EXPECT_EQ(fx.send.at(0)["result"], json::object());
}

TEST(GatewaySession, ASecondInitializeIsRefused) {
  auto cat = two_servers();
  auto s = ready_session(cat);
  auto fx = s.on_message(initialize(), cat);
  EXPECT_EQ(fx.send.at(0)["error"]["code"], gateway_error::invalid_request);
}

TEST(GatewaySession, ToolsListIsTheCatalogsWithPrefixedNamesAndWholeToolObjects) {
  auto cat = two_servers();
  auto s = ready_session(cat);
  auto fx = s.on_message(request(2, "tools/list"), cat);
  auto& tools = fx.send.at(0)["result"]["tools"];
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(tools[0]["name"], "fs__read");
  EXPECT_TRUE(tools[0]["annotations"]["readOnlyHint"].get<bool>());
}

TEST(GatewaySession, ToolsCallIsDispatchedToTheServerUnderItsOwnName) {
  auto cat = two_servers();
  auto s = ready_session(cat);
  auto fx = s.on_message(request(7, "tools/call",
                                 {{"name", "fs__read"}, {"arguments", {{"path", "x"}}}, {"_meta", {{"progressToken", "p1"}}}}),
                         cat);
  EXPECT_TRUE(fx.send.empty());
  ASSERT_EQ(fx.dispatch.size(), 1u);
  auto& d = fx.dispatch[0];
  EXPECT_EQ(d.server, "fs");
  EXPECT_EQ(d.name, "read");
  EXPECT_EQ(d.params["path"], "x");
  EXPECT_EQ(d.id, 7);
  ASSERT_TRUE(d.progress_token);
  EXPECT_EQ(*d.progress_token, "p1");
  EXPECT_FALSE(d.stale);
}

TEST(GatewaySession, AToolOfAServerThatIsOutIsAStaleCallNamingTheServer) {
  auto cat = two_servers();
  auto s = ready_session(cat);
  auto fx = s.on_message(request(8, "tools/call", {{"name", "off__write"}}), cat);
  ASSERT_EQ(fx.dispatch.size(), 1u);
  EXPECT_TRUE(fx.dispatch[0].stale);
  EXPECT_EQ(fx.dispatch[0].server, "off");
  fx = s.on_message(request(9, "tools/call", {{"name", "nobody"}}), cat);
  ASSERT_EQ(fx.dispatch.size(), 1u);
  EXPECT_TRUE(fx.dispatch[0].stale);
  EXPECT_EQ(fx.dispatch[0].server, "");
}

TEST(GatewaySession, BadParamsGetInvalidParams) {
  auto cat = two_servers();
  auto s = ready_session(cat);
  for (auto params : {json{{"name", 5}}, json{{"name", "fs__read"}, {"arguments", "x"}}}) {
    auto fx = s.on_message(request(10, "tools/call", params), cat);
    ASSERT_EQ(fx.send.size(), 1u) << params;
    EXPECT_EQ(fx.send[0]["error"]["code"], gateway_error::invalid_params);
    EXPECT_TRUE(fx.dispatch.empty());
  }
  auto fx = s.on_message({{"jsonrpc", "2.0"}, {"id", 11}, {"method", "tools/list"}, {"params", 3}}, cat);
  EXPECT_EQ(fx.send.at(0)["error"]["code"], gateway_error::invalid_params);
}

TEST(GatewaySession, PromptsGetAndCompletionAreRewrittenToTheServersNames) {
  auto cat = two_servers();
  auto s = ready_session(cat);
  auto fx = s.on_message(request(12, "prompts/get", {{"name", "fs__summarize"}, {"arguments", {{"a", "b"}}}}), cat);
  ASSERT_EQ(fx.dispatch.size(), 1u);
  EXPECT_EQ(fx.dispatch[0].params["name"], "summarize");
  EXPECT_EQ(fx.dispatch[0].params["arguments"]["a"], "b");
  fx = s.on_message(request(13, "completion/complete",
                            {{"ref", {{"type", "ref/prompt"}, {"name", "fs__summarize"}}},
                             {"argument", {{"name", "a"}, {"value", "x"}}}}),
                    cat);
  ASSERT_EQ(fx.dispatch.size(), 1u);
  EXPECT_EQ(fx.dispatch[0].server, "fs");
  EXPECT_EQ(fx.dispatch[0].params["ref"]["name"], "summarize");
}

TEST(GatewaySession, ResourcesAreRoutedByUriAndAnUnknownUriIsNotFound) {
  auto cat = two_servers();
  auto s = ready_session(cat);
  auto fx = s.on_message(request(14, "resources/read", {{"uri", "file:///a.txt"}}), cat);
  ASSERT_EQ(fx.dispatch.size(), 1u);
  EXPECT_EQ(fx.dispatch[0].server, "fs");
  fx = s.on_message(request(15, "resources/read", {{"uri", "file:///nope"}}), cat);
  EXPECT_EQ(fx.send.at(0)["error"]["code"], gateway_error::resource_not_found);
}

TEST(GatewaySession, UnknownMethodsAndMalformedMessagesGetJsonRpcErrors) {
  auto cat = two_servers();
  auto s = ready_session(cat);
  auto fx = s.on_message(request(16, "tools/frobnicate"), cat);
  EXPECT_EQ(fx.send.at(0)["error"]["code"], gateway_error::method_not_found);
  fx = s.on_message(json::array({request(17, "ping")}), cat);
  EXPECT_EQ(fx.send.at(0)["error"]["code"], gateway_error::invalid_request);
  fx = s.on_message({{"jsonrpc", "2.0"}, {"id", json::array()}, {"method", "ping"}}, cat);
  EXPECT_EQ(fx.send.at(0)["error"]["code"], gateway_error::invalid_request);
  fx = s.on_message({{"jsonrpc", "2.0"}, {"id", 18}, {"method", 5}}, cat);
  EXPECT_EQ(fx.send.at(0)["error"]["code"], gateway_error::invalid_request);
  fx = s.on_message("just a string", cat);
  EXPECT_EQ(fx.send.size(), 1u);
}

TEST(GatewaySession, LoggingSetLevelIsAnsweredAndPassedOn) {
  auto cat = two_servers();
  auto s = ready_session(cat);
  auto fx = s.on_message(request(19, "logging/setLevel", {{"level", "warning"}}), cat);
  EXPECT_EQ(fx.send.at(0)["result"], json::object());
  ASSERT_TRUE(fx.log_level);
  EXPECT_EQ(*fx.log_level, "warning");
  EXPECT_EQ(s.log_level(), "warning");
  fx = s.on_message(request(20, "logging/setLevel", {{"level", "loud"}}), cat);
  EXPECT_EQ(fx.send.at(0)["error"]["code"], gateway_error::invalid_params);
}

TEST(GatewaySession, CancelAndRootsNotificationsBecomeEffects) {
  auto cat = two_servers();
  gateway_session s({});
  s.on_message(initialize(), cat);
  auto fx = s.on_message({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, cat);
  EXPECT_TRUE(fx.initialized);
  fx = s.on_message({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 7}}}}, cat);
  ASSERT_EQ(fx.cancelled.size(), 1u);
  EXPECT_EQ(fx.cancelled[0], 7);
  fx = s.on_message({{"jsonrpc", "2.0"}, {"method", "notifications/roots/list_changed"}}, cat);
  EXPECT_TRUE(fx.roots_changed);
  EXPECT_TRUE(fx.send.empty());
}

TEST(GatewaySession, TheClientsAnswersAreMatchedToOurRequestsOnce) {
  auto cat = two_servers();
  auto s = ready_session(cat, {{"sampling", json::object()}});
  EXPECT_TRUE(s.client_can("sampling"));
  EXPECT_FALSE(s.client_can("roots"));
  auto [id, msg] = s.request("sampling/createMessage", {{"messages", json::array()}});
  EXPECT_EQ(msg["method"], "sampling/createMessage");
  EXPECT_EQ(msg["id"], id);
  json answer{{"jsonrpc", "2.0"}, {"id", id}, {"result", {{"role", "assistant"}}}};
  auto fx = s.on_message(answer, cat);
  ASSERT_EQ(fx.answers.size(), 1u);
  EXPECT_EQ(fx.answers[0].first, id);
  // A second answer to the same id, or one to an id never sent, is dropped.
  EXPECT_TRUE(s.on_message(answer, cat).answers.empty());
  answer["id"] = 999;
  EXPECT_TRUE(s.on_message(answer, cat).answers.empty());
}

TEST(GatewaySession, ElicitationModesFollowTheClientsCapability) {
  auto cat = two_servers();
  auto plain = ready_session(cat, {{"elicitation", json::object()}});
  EXPECT_TRUE(plain.client_elicits("form"));
  EXPECT_FALSE(plain.client_elicits("url"));
  auto url = ready_session(cat, {{"elicitation", {{"url", json::object()}}}});
  EXPECT_FALSE(url.client_elicits("form"));
  EXPECT_TRUE(url.client_elicits("url"));
  auto none = ready_session(cat);
  EXPECT_FALSE(none.client_elicits("form"));
}

// -- 2026-07-28: stateless requests ---------------------------------------------------

namespace {

json modern_meta(json caps = json::object()) {
  return {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
          {"io.modelcontextprotocol/clientCapabilities", std::move(caps)},
          {"io.modelcontextprotocol/clientInfo", {{"name", "next-client"}, {"version", "2.0"}}}};
}

json modern(int id, const std::string& method, json params = json::object(), json caps = json::object()) {
  params["_meta"] = modern_meta(std::move(caps));
  return request(id, method, std::move(params));
}

modern_headers headers_for(const std::string& method, std::optional<std::string> name = std::nullopt) {
  modern_headers h;
  h.protocol = "2026-07-28";
  h.method = method;
  h.name = std::move(name);
  return h;
}

int error_code(const gateway_effects& fx) {
  return fx.send.empty() ? 0 : fx.send[0]["error"].value("code", 0);
}

} // namespace

TEST(GatewaySessionModern, DiscoverNamesEveryRevisionTheCatalogAndTheGatewayInMeta) {
  auto cat = two_servers();
  gateway_session s({"mcprt", "1.0", ""});
  auto fx = s.on_modern_message(modern(1, "server/discover"), headers_for("server/discover"), cat);
  ASSERT_EQ(fx.send.size(), 1u);
  EXPECT_EQ(fx.status, 200);
  auto& r = fx.send[0]["result"];
  EXPECT_EQ(r["resultType"], "complete");
  EXPECT_EQ(r["supportedVersions"][0], "2026-07-28");
  EXPECT_EQ(r["supportedVersions"].size(), 5u);
  EXPECT_TRUE(r["capabilities"].contains("tools"));
  EXPECT_FALSE(r["capabilities"].contains("logging")); // no logging/setLevel in 2026-07-28
  EXPECT_EQ(r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcprt");
  EXPECT_EQ(r["ttlMs"], 0);
  EXPECT_EQ(r["cacheScope"], "private");
  EXPECT_TRUE(s.modern());
  EXPECT_EQ(s.client_name(), "next-client");
}

TEST(GatewaySessionModern, MetaWithoutRevisionOrCapabilitiesIsInvalidParamsWith400) {
  auto cat = two_servers();
  for (auto drop : {"io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"}) {
    auto msg = modern(4, "tools/list");
    msg["params"]["_meta"].erase(drop);
    gateway_session s({});
    auto fx = s.on_modern_message(msg, headers_for("tools/list"), cat);
    EXPECT_EQ(fx.status, 400) << drop;
    EXPECT_EQ(error_code(fx), gateway_error::invalid_params) << drop;
    EXPECT_EQ(fx.send[0]["id"], 4) << drop;
  }
  gateway_session s({});
  auto fx = s.on_modern_message(request(5, "tools/list"), headers_for("tools/list"), cat);
  EXPECT_EQ(error_code(fx), gateway_error::invalid_params);
  // clientInfo is a SHOULD: a request without it is served.
  auto msg = modern(6, "tools/list");
  msg["params"]["_meta"].erase("io.modelcontextprotocol/clientInfo");
  fx = s.on_modern_message(msg, headers_for("tools/list"), cat);
  ASSERT_EQ(fx.send.size(), 1u);
  EXPECT_TRUE(fx.send[0].contains("result"));
}

TEST(GatewaySessionModern, HeadersMustMirrorTheBody) {
  auto cat = two_servers();
  gateway_session s({});
  auto call = modern(7, "tools/call", {{"name", "fs__read"}, {"arguments", json::object()}});
  // A revision header that differs from _meta's.
  auto h = headers_for("tools/call", "fs__read");
  h.protocol = "2025-11-25";
  auto fx = s.on_modern_message(call, h, cat);
  EXPECT_EQ(fx.status, 400);
  EXPECT_EQ(error_code(fx), gateway_error::header_mismatch);
  // No Mcp-Method, or another one.
  h = headers_for("tools/call", "fs__read");
  h.method.reset();
  EXPECT_EQ(error_code(s.on_modern_message(call, h, cat)), gateway_error::header_mismatch);
  h.method = "tools/list";
  EXPECT_EQ(error_code(s.on_modern_message(call, h, cat)), gateway_error::header_mismatch);
  // Mcp-Name missing, or naming another tool.
  EXPECT_EQ(error_code(s.on_modern_message(call, headers_for("tools/call"), cat)), gateway_error::header_mismatch);
  EXPECT_EQ(error_code(s.on_modern_message(call, headers_for("tools/call", "fs__write"), cat)),
            gateway_error::header_mismatch);
  // The base64 form of the right name is the right name.
  fx = s.on_modern_message(call, headers_for("tools/call", "=?base64?ZnNfX3JlYWQ=?="), cat);
  EXPECT_TRUE(fx.send.empty());
  ASSERT_EQ(fx.dispatch.size(), 1u);
  EXPECT_EQ(fx.dispatch[0].name, "read");
  // Over stdio there are no headers to check.
  modern_headers none;
  none.http = false;
  fx = s.on_modern_message(call, none, cat);
  EXPECT_EQ(fx.dispatch.size(), 1u);
}

TEST(GatewaySessionModern, AnUnknownRevisionGetsUnsupportedProtocolVersionNamingBoth) {
  auto cat = two_servers();
  gateway_session s({});
  auto msg = modern(8, "server/discover");
  msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "v999";
  auto h = headers_for("server/discover");
  h.protocol = "v999";
  auto fx = s.on_modern_message(msg, h, cat);
  EXPECT_EQ(fx.status, 400);
  ASSERT_EQ(error_code(fx), gateway_error::unsupported_protocol_version);
  auto& data = fx.send[0]["error"]["data"];
  EXPECT_EQ(data["requested"], "v999");
  EXPECT_EQ(data["supported"][0], "2026-07-28");
  EXPECT_EQ(fx.send[0]["id"], 8);
}

TEST(GatewaySessionModern, RemovedAndUnknownMethodsAre404MethodNotFound) {
  auto cat = two_servers();
  for (auto m : {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "no/such"}) {
    gateway_session s({});
    auto fx = s.on_modern_message(modern(9, m), headers_for(m), cat);
    EXPECT_EQ(fx.status, 404) << m;
    EXPECT_EQ(error_code(fx), gateway_error::method_not_found) << m;
  }
}

TEST(GatewaySessionModern, ListsCarryResultTypeAndCachingHints) {
  auto cat = two_servers();
  gateway_session s({});
  for (auto m : {"tools/list", "prompts/list", "resources/list", "resources/templates/list"}) {
    auto fx = s.on_modern_message(modern(10, m), headers_for(m), cat);
    ASSERT_EQ(fx.send.size(), 1u) << m;
    auto& r = fx.send[0]["result"];
    EXPECT_EQ(r["resultType"], "complete") << m;
    EXPECT_EQ(r["ttlMs"], 0) << m;
    EXPECT_EQ(r["cacheScope"], "private") << m;
  }
  // A server's own hint is kept; an input_required result gets none.
  auto read = gateway_session::modern_result("resources/read", {{"contents", json::array()}, {"ttlMs", 5000}});
  EXPECT_EQ(read["ttlMs"], 5000);
  EXPECT_EQ(read["cacheScope"], "private");
  auto asked = gateway_session::modern_result("tools/call", {{"resultType", "input_required"}});
  EXPECT_FALSE(asked.contains("ttlMs"));
}

TEST(GatewaySessionModern, ARetryWithRequestStateIsNotDispatchedAndAFreshCallDropsStrayInputs) {
  auto cat = two_servers();
  gateway_session s({});
  auto retry = modern(11, "tools/call",
                      {{"name", "fs__read"},
                       {"arguments", json::object()},
                       {"requestState", "abc"},
                       {"inputResponses", {{"input-1", {{"action", "accept"}}}}}});
  auto fx = s.on_modern_message(retry, headers_for("tools/call", "fs__read"), cat);
  EXPECT_TRUE(fx.dispatch.empty());
  ASSERT_TRUE(fx.retry);
  EXPECT_EQ(fx.retry->request_state, "abc");
  EXPECT_EQ(fx.retry->name, "fs__read");
  EXPECT_TRUE(fx.retry->input_responses.contains("input-1"));
  // inputResponses that are not an object: invalid.
  retry["params"]["inputResponses"] = 12345;
  EXPECT_EQ(error_code(s.on_modern_message(retry, headers_for("tools/call", "fs__read"), cat)),
            gateway_error::invalid_params);
  // Without requestState there is nothing to continue: a fresh call.
  auto fresh = modern(12, "tools/call",
                      {{"name", "fs__read"}, {"arguments", {{"x", 1}}}, {"inputResponses", {{"k", 1}}}});
  fx = s.on_modern_message(fresh, headers_for("tools/call", "fs__read"), cat);
  ASSERT_EQ(fx.dispatch.size(), 1u);
  EXPECT_EQ(fx.dispatch[0].params, (json{{"x", 1}}));
}

TEST(GatewaySessionModern, ListenTakesItsFilterAndBoundsIt) {
  auto cat = two_servers();
  gateway_session s({});
  auto fx = s.on_modern_message(
    modern(13, "subscriptions/listen",
           {{"notifications", {{"toolsListChanged", true}, {"promptsListChanged", false},
                               {"resourceSubscriptions", {"file:///a.txt", "file:///a.txt"}}}}}),
    headers_for("subscriptions/listen"), cat);
  ASSERT_TRUE(fx.listen);
  EXPECT_EQ(fx.listen->id, 13);
  EXPECT_TRUE(fx.listen->tools);
  EXPECT_FALSE(fx.listen->prompts);
  EXPECT_EQ(fx.listen->uris, std::vector<std::string>{"file:///a.txt"});
  json many = json::array();
  for (int i = 0; i < 300; ++i)
    many.push_back("file:///" + std::to_string(i));
  fx = s.on_modern_message(modern(14, "subscriptions/listen", {{"notifications", {{"resourceSubscriptions", many}}}}),
                           headers_for("subscriptions/listen"), cat);
  EXPECT_FALSE(fx.listen);
  EXPECT_EQ(error_code(fx), gateway_error::invalid_params);
}

TEST(GatewaySessionModern, LogsOnlyWhenTheRequestAsksAndCapabilitiesArePerRequest) {
  auto cat = two_servers();
  gateway_session s({});
  s.on_modern_message(modern(15, "tools/list", json::object(), {{"sampling", json::object()}}),
                      headers_for("tools/list"), cat);
  EXPECT_TRUE(s.client_can("sampling"));
  EXPECT_FALSE(s.log_level());
  auto msg = modern(16, "tools/list");
  msg["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "warning";
  s.on_modern_message(msg, headers_for("tools/list"), cat);
  EXPECT_FALSE(s.client_can("sampling"));
  EXPECT_EQ(s.log_level(), std::optional<std::string>("warning"));
}

TEST(GatewaySessionModern, AToolsHeaderParametersMustComeAsHeadersSayingTheSame) {
  gateway_server_view geo;
  geo.name = "geo";
  geo.prefix = "";
  geo.available = true;
  geo.capabilities = {{"tools", json::object()}};
  json region{{"type", "string"}, {"x-mcp-header", "Region"}};
  json schema{{"type", "object"}, {"properties", {{"region", region}}}};
  geo.tools.push_back({{"name", "where"}, {"inputSchema", schema}});
  auto cat = gateway_catalog::build({geo});
  gateway_session s({});
  auto call = [&](json args) { return modern(20, "tools/call", {{"name", "where"}, {"arguments", std::move(args)}}); };
  auto h = headers_for("tools/call", "where");
  // Missing while the body has the value.
  EXPECT_EQ(error_code(s.on_modern_message(call({{"region", "eu"}}), h, cat)), gateway_error::header_mismatch);
  // Present and equal, in either form, and any case of the name.
  h.params = {{"region", "eu"}};
  EXPECT_EQ(s.on_modern_message(call({{"region", "eu"}}), h, cat).dispatch.size(), 1u);
  h.params = {{"REGION", "=?base64?ZXU=?="}};
  EXPECT_EQ(s.on_modern_message(call({{"region", "eu"}}), h, cat).dispatch.size(), 1u);
  // Different, or broken base64.
  h.params = {{"Region", "us"}};
  EXPECT_EQ(error_code(s.on_modern_message(call({{"region", "eu"}}), h, cat)), gateway_error::header_mismatch);
  h.params = {{"Region", "=?base64?ZX!=?="}};
  EXPECT_EQ(error_code(s.on_modern_message(call({{"region", "eu"}}), h, cat)), gateway_error::header_mismatch);
  // No value in the body: no header is expected.
  h.params.clear();
  EXPECT_EQ(s.on_modern_message(call(json::object()), h, cat).dispatch.size(), 1u);
}
