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
