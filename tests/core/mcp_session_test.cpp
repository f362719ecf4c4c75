#include "core/mcp_session.hpp"
#include "core/elicitation.hpp"
#include "core/untrusted_text.hpp"

#include <gtest/gtest.h>

#include "session_test_support.hpp"

using namespace mcprt;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

using mcprt::test::error_line;
using mcprt::test::result_line;
using time_point = mcp_session::time_point;

json parse_line(const std::string& line) {
  return json::parse(line);
}

std::vector<json> parsed(const session_effects& fx) {
  std::vector<json> out;
  for (const auto& s : fx.send) {
    EXPECT_EQ(s.find('\n'), std::string::npos) << s;
    out.push_back(parse_line(s));
  }
  return out;
}

std::string notification_line(const std::string& method) {
  return json{{"jsonrpc", "2.0"}, {"method", method}}.dump();
}

json tools_json(std::initializer_list<const char*> names) {
  json arr = json::array();
  for (auto n : names)
    arr.push_back({{"name", n},
                   {"description", std::string("does ") + n},
                   {"inputSchema", {{"type", "object"}, {"properties", json::object()}}}});
  return arr;
}

std::vector<std::string> tool_names(const std::vector<mcp_tool>& tools) {
  std::vector<std::string> out;
  for (const auto& t : tools)
    out.push_back(t.name);
  return out;
}

// A scripted server: the test plays the server by feeding lines and reads
// what the session sent.
class McpSession : public ::testing::Test {
protected:
  time_point now = time_point{} + 1000h;

  std::unique_ptr<mcp_session> make(mcp_session::options opts = {}) {
    return std::make_unique<mcp_session>(std::move(opts));
  }

  // Starts and answers initialize; returns what the session sent after it.
  session_effects initialize(mcp_session& s, const json& caps,
                             const std::string& version = "2025-11-25") {
    auto fx = s.start(now);
    auto sent = parsed(fx);
    EXPECT_EQ(sent.size(), 1u);
    auto id = sent.at(0).at("id");
    return s.on_line(result_line(id, {{"protocolVersion", version},
                                      {"capabilities", caps},
                                      {"serverInfo", {{"name", "fake"}, {"version", "1.2.3"}}}}),
                     now);
  }

  // The request with `method` among `sent`.
  static json find_request(const std::vector<json>& sent, const std::string& method) {
    for (const auto& m : sent)
      if (m.value("method", "") == method)
        return m;
    ADD_FAILURE() << "no " << method << " sent";
    return json::object();
  }

  // A session that is ready with the given tools and no prompts.
  std::unique_ptr<mcp_session> ready_with(std::initializer_list<const char*> names,
                                          mcp_session::options opts = {}) {
    auto s = make(std::move(opts));
    auto fx = initialize(*s, {{"tools", json::object()}});
    auto list = find_request(parsed(fx), "tools/list");
    fx = s->on_line(result_line(list["id"], {{"tools", tools_json(names)}}), now);
    EXPECT_TRUE(fx.ready);
    EXPECT_EQ(s->state(), session_state::ready);
    return s;
  }
};

} // namespace

// -- lifecycle ----------------------------------------------------------------

TEST_F(McpSession, HappyPathWithToolsOverThreePagesAndPrompts) {
  mcp_session::options opts;
  opts.client_version = "9.9.9";
  auto s = make(opts);
  EXPECT_EQ(s->state(), session_state::created);

  auto fx = s->start(now);
  EXPECT_EQ(s->state(), session_state::initializing);
  auto sent = parsed(fx);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["jsonrpc"], "2.0");
  EXPECT_EQ(sent[0]["method"], "initialize");
  EXPECT_EQ(sent[0]["params"]["protocolVersion"], "2025-11-25");
  EXPECT_EQ(sent[0]["params"]["capabilities"], json::object());
  EXPECT_EQ(sent[0]["params"]["clientInfo"], (json{{"name", "mcprt"}, {"version", "9.9.9"}}));
  EXPECT_EQ(s->next_deadline(), now + 30s);

  fx = s->on_line(result_line(sent[0]["id"],
                              {{"protocolVersion", "2025-11-25"},
                               {"capabilities", {{"tools", {{"listChanged", true}}}, {"prompts", json::object()}}},
                               {"serverInfo", {{"name", "everything"}, {"version", "2.0.0"}}},
                               {"instructions", "be nice"}}),
                  now);
  EXPECT_EQ(s->state(), session_state::discovering);
  sent = parsed(fx);
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[0], (json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}));
  EXPECT_EQ(sent[1]["method"], "tools/list");
  EXPECT_FALSE(sent[1].contains("params"));
  EXPECT_EQ(sent[2]["method"], "prompts/list");
  auto prompts_id = sent[2]["id"];

  // Three pages of tools.
  fx = s->on_line(result_line(sent[1]["id"], {{"tools", tools_json({"a", "b"})}, {"nextCursor", "c1"}}), now);
  sent = parsed(fx);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["method"], "tools/list");
  EXPECT_EQ(sent[0]["params"], (json{{"cursor", "c1"}}));
  fx = s->on_line(result_line(sent[0]["id"], {{"tools", tools_json({"c"})}, {"nextCursor", "c2"}}), now);
  sent = parsed(fx);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["params"], (json{{"cursor", "c2"}}));
  fx = s->on_line(result_line(sent[0]["id"], {{"tools", tools_json({"d", "e"})}}), now);
  EXPECT_TRUE(fx.send.empty());
  EXPECT_FALSE(fx.ready); // prompts still outstanding
  EXPECT_EQ(s->state(), session_state::discovering);

  fx = s->on_line(result_line(prompts_id, {{"prompts", {{{"name", "greet"}, {"description", "says hi"}},
                                                        {{"name", "bye"}}}}}),
                  now);
  EXPECT_TRUE(fx.ready);
  EXPECT_FALSE(fx.failure);
  EXPECT_EQ(s->state(), session_state::ready);
  EXPECT_EQ(tool_names(s->tools()), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(s->tools()[0].description, "does a");
  EXPECT_EQ(s->tools()[0].input_schema["type"], "object");
  ASSERT_EQ(s->prompts().size(), 2u);
  EXPECT_EQ(s->prompts()[0].name, "greet");
  EXPECT_EQ(s->prompts()[0].description, "says hi");
  EXPECT_EQ(s->negotiated_protocol(), "2025-11-25");
  EXPECT_EQ(s->server_info().name, "everything");
  EXPECT_EQ(s->server_info().version, "2.0.0");
  EXPECT_EQ(s->instructions(), "be nice");
  EXPECT_TRUE(s->server_capabilities()["tools"]["listChanged"]);
  EXPECT_EQ(s->next_deadline(), std::nullopt);
}

TEST_F(McpSession, AcceptsEachSupportedProtocolVersion) {
  for (const char* v : {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}) {
    auto s = make();
    auto fx = initialize(*s, json::object(), v);
    EXPECT_FALSE(fx.failure) << v;
    EXPECT_TRUE(fx.ready) << v; // no capabilities: nothing to list
    EXPECT_EQ(s->negotiated_protocol(), v);
    auto sent = parsed(fx);
    ASSERT_EQ(sent.size(), 1u) << v;
    EXPECT_EQ(sent[0]["method"], "notifications/initialized");
  }
}

TEST_F(McpSession, UnsupportedProtocolVersionFails) {
  auto s = make();
  auto fx = initialize(*s, {{"tools", json::object()}}, "2023-01-01");
  ASSERT_TRUE(fx.failure);
  EXPECT_EQ(*fx.failure, "server answered with unsupported protocol version 2023-01-01");
  EXPECT_TRUE(fx.send.empty()); // no initialized, no tools/list
  EXPECT_EQ(s->state(), session_state::failed);
  EXPECT_EQ(s->failure_reason(), fx.failure);
}

TEST_F(McpSession, MissingProtocolVersionFails) {
  auto s = make();
  auto id = parsed(s->start(now))[0]["id"];
  auto fx = s->on_line(result_line(id, {{"capabilities", json::object()}}), now);
  ASSERT_TRUE(fx.failure);
  EXPECT_EQ(*fx.failure, "server answered initialize without a protocolVersion");
}

TEST_F(McpSession, NoPromptsCapabilityMeansNoPromptsList) {
  auto s = make();
  auto sent = parsed(initialize(*s, {{"tools", json::object()}}));
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1]["method"], "tools/list");
  auto fx = s->on_line(result_line(sent[1]["id"], {{"tools", tools_json({"x"})}}), now);
  EXPECT_TRUE(fx.ready);
  EXPECT_TRUE(fx.send.empty());
  EXPECT_TRUE(s->prompts().empty());
}

TEST_F(McpSession, NoToolsCapabilityMeansNoToolsList) {
  auto s = make();
  auto sent = parsed(initialize(*s, {{"prompts", json::object()}}));
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1]["method"], "prompts/list");
}

TEST_F(McpSession, InitializeErrorFailsWithServerMessage) {
  auto s = make();
  auto id = parsed(s->start(now))[0]["id"];
  auto fx = s->on_line(error_line(id, -32602, "Unsupported protocol version"), now);
  ASSERT_TRUE(fx.failure);
  EXPECT_EQ(*fx.failure, "initialize failed: Unsupported protocol version (code -32602)");
  EXPECT_EQ(s->state(), session_state::failed);
}

TEST_F(McpSession, DiscoveryTimesOut) {
  mcp_session::options opts;
  opts.discovery_timeout = discovery_timeout_for(true, std::nullopt);
  auto s = make(opts);
  auto sent = parsed(initialize(*s, {{"tools", json::object()}}));
  EXPECT_EQ(s->next_deadline(), now + 5s);
  EXPECT_TRUE(s->on_tick(now + 4999ms).empty());
  auto fx = s->on_tick(now + 5s);
  ASSERT_TRUE(fx.failure);
  EXPECT_EQ(*fx.failure, "discovery timed out after 5000 ms");
  EXPECT_EQ(s->state(), session_state::failed);
  EXPECT_EQ(s->next_deadline(), std::nullopt);
  // A late answer changes nothing.
  EXPECT_TRUE(s->on_line(result_line(sent[1]["id"], {{"tools", tools_json({"x"})}}), now + 6s).empty());
  EXPECT_EQ(s->state(), session_state::failed);
}

TEST_F(McpSession, DiscoveryTimeoutDefaultsAndOverride) {
  EXPECT_EQ(discovery_timeout_for(false, std::nullopt), 30s);
  EXPECT_EQ(discovery_timeout_for(true, std::nullopt), 5s);
  EXPECT_EQ(discovery_timeout_for(true, 12s), 12s);
  EXPECT_EQ(discovery_timeout_for(false, 0ms), 30s);
}

TEST_F(McpSession, ToolsListErrorDuringDiscoveryFails) {
  auto s = make();
  auto sent = parsed(initialize(*s, {{"tools", json::object()}}));
  auto fx = s->on_line(error_line(sent[1]["id"], -32603, "boom"), now);
  ASSERT_TRUE(fx.failure);
  EXPECT_EQ(*fx.failure, "tools/list failed: boom (code -32603)");
}

TEST_F(McpSession, PromptsListErrorDuringDiscoveryLeavesNoPrompts) {
  auto s = make();
  auto sent = parsed(initialize(*s, {{"prompts", json::object()}}));
  auto fx = s->on_line(error_line(sent[1]["id"], -32601, "Method not found"), now);
  EXPECT_FALSE(fx.failure);
  EXPECT_TRUE(fx.ready);
  EXPECT_TRUE(s->prompts().empty());
}

TEST_F(McpSession, CursorLoopIsCutOff) {
  mcp_session::options opts;
  opts.max_list_pages = 5;
  auto s = make(opts);
  auto sent = parsed(initialize(*s, {{"tools", json::object()}}));
  auto id = sent[1]["id"];
  session_effects fx;
  for (int page = 0; page < 5; ++page) {
    fx = s->on_line(result_line(id, {{"tools", json::array()}, {"nextCursor", "same"}}), now);
    if (fx.failure)
      break;
    id = parsed(fx).at(0)["id"];
  }
  ASSERT_TRUE(fx.failure);
  EXPECT_EQ(*fx.failure, "server kept paginating tools/list past 5 pages");
}

TEST_F(McpSession, MalformedToolEntriesAreSkipped) {
  auto s = make();
  auto sent = parsed(initialize(*s, {{"tools", json::object()}}));
  json tools = tools_json({"ok"});
  tools.push_back({{"description", "nameless"}});
  tools.push_back(42);
  tools.push_back({{"name", "ok"}}); // duplicate
  tools.push_back({{"name", "no_schema"}});
  auto fx = s->on_line(result_line(sent[1]["id"], {{"tools", tools}}), now);
  EXPECT_TRUE(fx.ready);
  EXPECT_EQ(tool_names(s->tools()), (std::vector<std::string>{"ok", "no_schema"}));
  EXPECT_EQ(s->tools()[1].input_schema, (json{{"type", "object"}}));
}

// -- list_changed ---------------------------------------------------------------

TEST_F(McpSession, ToolsListChangedReListsWithPaginationAndPublishes) {
  auto s = ready_with({"a"});
  auto fx = s->on_line(notification_line("notifications/tools/list_changed"), now);
  auto sent = parsed(fx);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["method"], "tools/list");
  EXPECT_FALSE(fx.tools_changed);
  fx = s->on_line(result_line(sent[0]["id"], {{"tools", tools_json({"a"})}, {"nextCursor", "p2"}}), now);
  sent = parsed(fx);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["params"]["cursor"], "p2");
  EXPECT_FALSE(fx.tools_changed); // not until the listing is complete
  EXPECT_EQ(tool_names(s->tools()), (std::vector<std::string>{"a"}));
  fx = s->on_line(result_line(sent[0]["id"], {{"tools", tools_json({"b"})}}), now);
  EXPECT_TRUE(fx.tools_changed);
  EXPECT_FALSE(fx.ready);
  EXPECT_EQ(tool_names(s->tools()), (std::vector<std::string>{"a", "b"}));
}

TEST_F(McpSession, UnchangedReListDoesNotPublish) {
  auto s = ready_with({"a"});
  auto sent = parsed(s->on_line(notification_line("notifications/tools/list_changed"), now));
  auto fx = s->on_line(result_line(sent[0]["id"], {{"tools", tools_json({"a"})}}), now);
  EXPECT_FALSE(fx.tools_changed);
}

TEST_F(McpSession, ListChangedDuringReListRunsExactlyOneMore) {
  auto s = ready_with({"a"});
  auto sent = parsed(s->on_line(notification_line("notifications/tools/list_changed"), now));
  ASSERT_EQ(sent.size(), 1u);
  auto first = sent[0]["id"];
  // Three more notifications while the re-list runs: no extra requests now.
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(s->on_line(notification_line("notifications/tools/list_changed"), now).send.empty());
  auto fx = s->on_line(result_line(first, {{"tools", tools_json({"a", "b"})}}), now);
  EXPECT_TRUE(fx.tools_changed);
  // The one more waits out the re-list interval.
  EXPECT_TRUE(fx.send.empty());
  ASSERT_EQ(s->next_deadline(), std::optional<mcp_session::time_point>(now + 500ms));
  fx = s->on_tick(now + 500ms);
  sent = parsed(fx);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["method"], "tools/list");
  EXPECT_FALSE(sent[0].contains("params")); // a fresh listing from the first page
  fx = s->on_line(result_line(sent[0]["id"], {{"tools", tools_json({"a", "b", "c"})}}), now);
  EXPECT_TRUE(fx.tools_changed);
  EXPECT_TRUE(fx.send.empty()); // and no more after that
  EXPECT_EQ(s->tools().size(), 3u);
}

TEST_F(McpSession, AServerFloodingListChangedCostsOneListingPerInterval) {
  auto s = ready_with({"a"});
  int listings = 0;
  std::optional<json> in_flight;
  auto t = now;
  // A thousand notifications over two seconds, each listing answered at once.
  for (int i = 0; i < 1000; ++i) {
    t = now + std::chrono::milliseconds(i * 2);
    auto fx = s->on_tick(t);
    auto sent = parsed(fx);
    auto more = parsed(s->on_line(notification_line("notifications/tools/list_changed"), t));
    sent.insert(sent.end(), more.begin(), more.end());
    for (auto& m : sent)
      if (m.value("method", "") == "tools/list") {
        ++listings;
        s->on_line(result_line(m["id"], {{"tools", tools_json({"a", i % 2 ? "b" : "c"})}}), t);
      }
  }
  // 2 s at one per 500 ms: the first at once, then one per interval.
  EXPECT_GE(listings, 4);
  EXPECT_LE(listings, 5);
  // The last one still comes: nothing a server said is lost.
  auto deadline = s->next_deadline();
  ASSERT_TRUE(deadline);
  auto sent = parsed(s->on_tick(*deadline));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["method"], "tools/list");
}

TEST_F(McpSession, PromptsListChangedReLists) {
  auto s = make();
  auto sent = parsed(initialize(*s, {{"prompts", json::object()}}));
  EXPECT_TRUE(s->on_line(result_line(sent[1]["id"], {{"prompts", json::array()}}), now).ready);
  sent = parsed(s->on_line(notification_line("notifications/prompts/list_changed"), now));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["method"], "prompts/list");
  auto fx = s->on_line(result_line(sent[0]["id"], {{"prompts", {{{"name", "p"}}}}}), now);
  EXPECT_TRUE(fx.prompts_changed);
  EXPECT_FALSE(fx.tools_changed);
  ASSERT_EQ(s->prompts().size(), 1u);
}

TEST_F(McpSession, ListChangedForUnadvertisedCapabilityIsIgnored) {
  auto s = ready_with({"a"});
  EXPECT_TRUE(s->on_line(notification_line("notifications/prompts/list_changed"), now).empty());
}

TEST_F(McpSession, FailedReListKeepsLastGoodTools) {
  auto s = ready_with({"a"});
  auto sent = parsed(s->on_line(notification_line("notifications/tools/list_changed"), now));
  auto fx = s->on_line(error_line(sent[0]["id"], -32603, "oops"), now);
  EXPECT_FALSE(fx.failure);
  EXPECT_EQ(s->state(), session_state::ready);
  EXPECT_EQ(tool_names(s->tools()), (std::vector<std::string>{"a"}));
}

TEST_F(McpSession, TimedOutReListIsCancelledAndKeepsLastGoodTools) {
  mcp_session::options opts;
  opts.discovery_timeout = 5s;
  auto s = ready_with({"a"}, opts);
  auto sent = parsed(s->on_line(notification_line("notifications/tools/list_changed"), now));
  auto id = sent[0]["id"];
  EXPECT_EQ(s->next_deadline(), now + 5s);
  auto fx = s->on_tick(now + 5s);
  EXPECT_FALSE(fx.failure);
  sent = parsed(fx);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["method"], "notifications/cancelled");
  EXPECT_EQ(sent[0]["params"]["requestId"], id);
  EXPECT_EQ(tool_names(s->tools()), (std::vector<std::string>{"a"}));
  // A new list_changed starts a fresh re-list.
  EXPECT_EQ(parsed(s->on_line(notification_line("notifications/tools/list_changed"), now + 5s)).size(), 1u);
}

// -- server requests and pings -----------------------------------------------

TEST_F(McpSession, ServerPingIsAnsweredWithEmptyResult) {
  auto s = ready_with({"a"});
  auto sent = parsed(s->on_line(R"({"jsonrpc":"2.0","id":"srv-7","method":"ping"})", now));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0], (json{{"jsonrpc", "2.0"}, {"id", "srv-7"}, {"result", json::object()}}));
}

TEST_F(McpSession, ServerPingIsAnsweredDuringInitialization) {
  auto s = make();
  s->start(now);
  auto sent = parsed(s->on_line(R"({"jsonrpc":"2.0","id":0,"method":"ping"})", now));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["id"], 0);
  EXPECT_EQ(sent[0]["result"], json::object());
}

TEST_F(McpSession, UnofferedServerRequestsGetMethodNotFoundWithSameId) {
  auto s = ready_with({"a"});
  struct req {
    json id;
    const char* method;
  };
  // Roots and sampling are not offered by default (elicitation is declined
  // instead: see the client features tests below).
  for (const auto& r : {req{12, "sampling/createMessage"}, req{"r-1", "roots/list"},
                        req{14, "something/unknown"}}) {
    json msg = {{"jsonrpc", "2.0"}, {"id", r.id}, {"method", r.method}, {"params", json::object()}};
    auto sent = parsed(s->on_line(msg.dump(), now));
    ASSERT_EQ(sent.size(), 1u) << r.method;
    EXPECT_EQ(sent[0]["id"], r.id);
    EXPECT_EQ(sent[0]["error"]["code"], -32601);
    EXPECT_EQ(sent[0]["error"]["message"], "Method not found");
    EXPECT_FALSE(sent[0].contains("result"));
  }
}

TEST_F(McpSession, UnknownNotificationsAndResponsesAreIgnored) {
  auto s = ready_with({"a"});
  EXPECT_TRUE(s->on_line(notification_line("notifications/message"), now).empty());
  EXPECT_TRUE(s->on_line(notification_line("notifications/whatever"), now).empty());
  EXPECT_TRUE(s->on_line(result_line(999, json::object()), now).empty());
  EXPECT_TRUE(s->on_line(result_line("abc", json::object()), now).empty());
  EXPECT_EQ(s->unknown_responses(), 2u);
  EXPECT_EQ(s->state(), session_state::ready);
}

TEST_F(McpSession, OurPingIsAnsweredOrTimesOut) {
  mcp_session::options opts;
  opts.ping_timeout = 2s;
  auto s = ready_with({"a"}, opts);
  auto sent = parsed(s->send_ping(now));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["method"], "ping");
  EXPECT_FALSE(sent[0].contains("params"));
  EXPECT_TRUE(s->on_line(result_line(sent[0]["id"], json::object()), now).pong);
  EXPECT_EQ(s->next_deadline(), std::nullopt);

  sent = parsed(s->send_ping(now));
  EXPECT_EQ(s->next_deadline(), now + 2s);
  auto fx = s->on_tick(now + 2s);
  ASSERT_TRUE(fx.failure);
  EXPECT_EQ(*fx.failure, "server did not answer ping within 2000 ms");
}

TEST_F(McpSession, BatchOfMessagesIsHandled) {
  auto s = ready_with({"a"});
  auto sent = parsed(s->on_line(
      R"([{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"roots/list"}])", now));
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_TRUE(sent[0].contains("result"));
  EXPECT_EQ(sent[1]["error"]["code"], -32601);
}

// -- garbage --------------------------------------------------------------------

TEST_F(McpSession, GarbageLinesAreToleratedUpToTheBudgetThenFail) {
  mcp_session::options opts;
  opts.limits.max_garbage_lines = 3;
  auto s = make(opts);
  auto id = parsed(s->start(now))[0]["id"];
  for (const char* line : {"Starting default (STDIO) server...", "{\"level\":30,\"msg\":\"json log\"}",
                           "[1,2,3]"})
    EXPECT_FALSE(s->on_line(line, now).failure) << line;
  auto fx = s->on_line("not json either", now);
  ASSERT_TRUE(fx.failure);
  EXPECT_EQ(*fx.failure, "server wrote 4 lines that are not JSON-RPC (limit 3); last: 'not json either'");
  EXPECT_EQ(s->state(), session_state::failed);
  EXPECT_TRUE(s->on_line(result_line(id, {{"protocolVersion", "2025-11-25"}}), now).empty());
}

TEST_F(McpSession, BannerBeforeInitializeResultIsHarmless) {
  auto s = make();
  auto id = parsed(s->start(now))[0]["id"];
  std::string stream = "Secure MCP Filesystem Server running on stdio\n\n" +
                       result_line(id, {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()}}) + "\n";
  auto fx = s->on_bytes(stream.data(), stream.size(), now);
  EXPECT_FALSE(fx.failure);
  EXPECT_TRUE(fx.ready);
  EXPECT_EQ(s->reader().total_garbage_lines(), 1u);
}

TEST_F(McpSession, PartialLinesAcrossFeedsAndCrLf) {
  auto s = make();
  auto id = parsed(s->start(now))[0]["id"];
  std::string stream = result_line(id, {{"protocolVersion", "2025-03-26"},
                                        {"capabilities", {{"tools", json::object()}}}}) + "\r\n";
  session_effects fx;
  for (std::size_t i = 0; i < stream.size(); i += 7) {
    auto n = std::min<std::size_t>(7, stream.size() - i);
    auto part = s->on_bytes(stream.data() + i, n, now);
    if (i + n < stream.size()) {
      EXPECT_TRUE(part.empty());
    }
    fx = std::move(part);
  }
  auto sent = parsed(fx);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1]["method"], "tools/list");
}

TEST_F(McpSession, OversizedLineIsDroppedAndTheSessionCarriesOn) {
  mcp_session::options opts;
  opts.limits.max_line_bytes = 1 << 20;
  auto s = make(opts);
  auto id = parsed(s->start(now))[0]["id"];
  std::string chunk(256 * 1024, 'z');
  std::size_t peak = 0;
  for (int i = 0; i < 80; ++i) { // 20 MiB without a newline
    EXPECT_TRUE(s->on_bytes(chunk.data(), chunk.size(), now).empty());
    peak = std::max(peak, s->reader().buffered_bytes());
  }
  EXPECT_LE(peak, opts.limits.max_line_bytes);
  std::string rest = "\n" + result_line(id, {{"protocolVersion", "2025-11-25"}}) + "\n";
  auto fx = s->on_bytes(rest.data(), rest.size(), now);
  EXPECT_FALSE(fx.failure);
  EXPECT_TRUE(fx.ready);
  EXPECT_EQ(s->reader().oversized_lines(), 1u);
}

TEST_F(McpSession, ValidLinesBeforeAFatalOversizedLineStillCount) {
  mcp_session::options opts;
  opts.limits.max_line_bytes = 64;
  opts.limits.max_garbage_lines = 0;
  auto s = make(opts);
  s->start(now);
  std::string stream = R"({"jsonrpc":"2.0","id":5,"method":"ping"})" "\n" + std::string(100, 'x') + "\n";
  auto fx = s->on_bytes(stream.data(), stream.size(), now);
  ASSERT_EQ(fx.send.size(), 1u); // the ping answer
  ASSERT_TRUE(fx.failure);
  EXPECT_NE(fx.failure->find("line longer than 64 bytes"), std::string::npos) << *fx.failure;
}

// -- tool calls -------------------------------------------------------------------

TEST_F(McpSession, ToolCallSuccessPassesResultThrough) {
  auto s = ready_with({"echo"});
  auto fx = s->call_tool(7, "echo", {{"text", "hi"}}, now);
  EXPECT_TRUE(fx.completed_calls.empty());
  auto sent = parsed(fx);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["method"], "tools/call");
  EXPECT_EQ(sent[0]["params"], (json{{"name", "echo"}, {"arguments", {{"text", "hi"}}}}));
  EXPECT_EQ(s->in_flight_calls(), 1u);
  json result = {{"content", {{{"type", "text"}, {"text", "hi"}}}}, {"structuredContent", {{"x", 1}}}};
  fx = s->on_line(result_line(sent[0]["id"], result), now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].token, 7u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::ok);
  EXPECT_EQ(fx.completed_calls[0].result, result);
  EXPECT_FALSE(fx.completed_calls[0].error);
  EXPECT_EQ(s->in_flight_calls(), 0u);
}

TEST_F(McpSession, ToolCallIdsAreMonotonicIntegers) {
  auto s = ready_with({"echo"});
  auto a = parsed(s->call_tool(1, "echo", json::object(), now))[0]["id"];
  auto b = parsed(s->call_tool(2, "echo", nullptr, now))[0]["id"];
  ASSERT_TRUE(a.is_number_integer());
  EXPECT_GT(b.get<long long>(), a.get<long long>());
}

TEST_F(McpSession, ToolResultWithIsErrorIsPassedThrough) {
  auto s = ready_with({"echo"});
  auto id = parsed(s->call_tool(3, "echo", json::object(), now))[0]["id"];
  json result = {{"content", {{{"type", "text"}, {"text", "bad input"}}}}, {"isError", true}};
  auto fx = s->on_line(result_line(id, result), now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::ok);
  EXPECT_EQ(fx.completed_calls[0].result, result);
}

TEST_F(McpSession, ToolCallJsonRpcErrorIsReported) {
  auto s = ready_with({"echo"});
  auto id = parsed(s->call_tool(4, "echo", json::object(), now))[0]["id"];
  auto fx = s->on_line(json{{"jsonrpc", "2.0"},
                            {"id", id},
                            {"error", {{"code", -32602}, {"message", "Invalid arguments"}, {"data", "x"}}}}
                           .dump(),
                       now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  const auto& c = fx.completed_calls[0];
  EXPECT_EQ(c.token, 4u);
  EXPECT_EQ(c.outcome, call_outcome::rpc_error);
  ASSERT_TRUE(c.error);
  EXPECT_EQ(c.error->code, -32602);
  EXPECT_EQ(c.error->message, "Invalid arguments");
  EXPECT_EQ(c.error->data, "x");
}

TEST_F(McpSession, ToolCallTimeoutSendsCancelledAndIgnoresLateResponse) {
  mcp_session::options opts;
  opts.call_timeout = 1500ms;
  auto s = ready_with({"slow", "fast"}, opts);
  auto slow_id = parsed(s->call_tool(10, "slow", json::object(), now))[0]["id"];
  auto fast_id = parsed(s->call_tool(11, "fast", json::object(), now + 1s))[0]["id"];
  EXPECT_EQ(s->next_deadline(), now + 1500ms);
  EXPECT_TRUE(s->on_tick(now + 1499ms).empty());

  auto fx = s->on_tick(now + 1500ms);
  EXPECT_FALSE(fx.failure);
  auto sent = parsed(fx);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["method"], "notifications/cancelled");
  EXPECT_EQ(sent[0]["params"]["requestId"], slow_id);
  EXPECT_EQ(sent[0]["params"]["reason"], "Request timed out after 1500 ms");
  EXPECT_FALSE(sent[0].contains("id"));
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].token, 10u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::timed_out);
  EXPECT_EQ(fx.completed_calls[0].error->code, error_request_timeout);
  EXPECT_EQ(s->next_deadline(), now + 2500ms); // the other call

  // The late answer is dropped; the session stays healthy.
  fx = s->on_line(result_line(slow_id, {{"content", json::array()}}), now + 1600ms);
  EXPECT_TRUE(fx.empty());
  EXPECT_EQ(s->unknown_responses(), 1u);
  EXPECT_EQ(s->state(), session_state::ready);
  fx = s->on_line(result_line(fast_id, {{"content", json::array()}}), now + 1700ms);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].token, 11u);
}

TEST_F(McpSession, DefaultCallTimeoutIsTenMinutesAndCanBeDisabled) {
  auto s = ready_with({"t"});
  s->call_tool(1, "t", json::object(), now);
  EXPECT_EQ(s->next_deadline(), now + 600s);

  mcp_session::options opts;
  opts.call_timeout = std::nullopt;
  auto u = ready_with({"t"}, opts);
  u->call_tool(1, "t", json::object(), now);
  EXPECT_EQ(u->next_deadline(), std::nullopt);
  EXPECT_TRUE(u->on_tick(now + 24h).empty());
}

TEST_F(McpSession, CallBeforeReadyIsRejected) {
  auto s = make();
  auto fx = s->call_tool(1, "echo", json::object(), now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::rejected);
  EXPECT_EQ(fx.completed_calls[0].error->code, error_not_ready);
  EXPECT_EQ(fx.completed_calls[0].error->message, "server is not ready (state: created)");
  EXPECT_TRUE(fx.send.empty());

  initialize(*s, {{"tools", json::object()}});
  fx = s->call_tool(2, "echo", json::object(), now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].error->message, "server is not ready (state: discovering)");
  EXPECT_TRUE(fx.send.empty());
}

TEST_F(McpSession, CallToUnknownOrFilteredToolOrWithBadArgumentsIsRejected) {
  mcp_session::options opts;
  opts.exclude_tools = std::vector<std::string>{"rm"};
  auto s = ready_with({"ls", "rm"}, opts);
  auto fx = s->call_tool(1, "nope", json::object(), now);
  EXPECT_EQ(fx.completed_calls.at(0).error->message, "unknown tool 'nope'");
  fx = s->call_tool(2, "rm", json::object(), now);
  EXPECT_EQ(fx.completed_calls.at(0).outcome, call_outcome::rejected);
  EXPECT_EQ(fx.completed_calls.at(0).error->message, "tool 'rm' is filtered out by includeTools/excludeTools");
  fx = s->call_tool(3, "ls", json::array({1}), now);
  EXPECT_EQ(fx.completed_calls.at(0).error->message, "tool arguments must be a JSON object");
  EXPECT_EQ(s->in_flight_calls(), 0u);
}

TEST_F(McpSession, CancelCallSendsCancelledNotification) {
  auto s = ready_with({"t"});
  auto id = parsed(s->call_tool(5, "t", json::object(), now))[0]["id"];
  auto fx = s->cancel_call(5, "user aborted");
  auto sent = parsed(fx);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["params"], (json{{"requestId", id}, {"reason", "user aborted"}}));
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::cancelled);
  EXPECT_TRUE(s->cancel_call(5, "again").empty());
}

TEST_F(McpSession, CancelledCallsLateResponseIsDropped) {
  auto s = ready_with({"t"});
  auto id = parsed(s->call_tool(5, "t", json::object(), now))[0]["id"];
  s->cancel_call(5, "user aborted");
  auto fx = s->on_line(result_line(id, {{"content", json::array()}}), now);
  EXPECT_TRUE(fx.completed_calls.empty());
  EXPECT_FALSE(fx.failure);
  EXPECT_EQ(s->unknown_responses(), 1u);
}

std::string progress_line(const json& token, const json& progress, const json& extra = json::object()) {
  json params = {{"progressToken", token}, {"progress", progress}};
  params.update(extra);
  return json{{"jsonrpc", "2.0"}, {"method", "notifications/progress"}, {"params", params}}.dump();
}

TEST_F(McpSession, CallWithProgressSendsAUniqueTokenAndReportsItsProgress) {
  auto s = ready_with({"t"});
  auto plain = parsed(s->call_tool(1, "t", json::object(), now))[0];
  EXPECT_FALSE(plain["params"].contains("_meta")) << "no token unless asked";
  auto a = parsed(s->call_tool(2, "t", {{"x", 1}}, now, true))[0];
  auto b = parsed(s->call_tool(3, "t", json::object(), now, true))[0];
  ASSERT_TRUE(a["params"].contains("_meta")) << a.dump();
  auto ta = a["params"]["_meta"]["progressToken"];
  auto tb = b["params"]["_meta"]["progressToken"];
  EXPECT_NE(ta, tb);
  EXPECT_EQ(a["params"]["arguments"], (json{{"x", 1}}));

  auto fx = s->on_line(progress_line(tb, 1, {{"total", 4}, {"message", "one of four"}}), now);
  ASSERT_EQ(fx.progress.size(), 1u);
  EXPECT_EQ(fx.progress[0].token, 3u);
  EXPECT_EQ(fx.progress[0].progress, 1.0);
  EXPECT_EQ(fx.progress[0].total, 4.0);
  EXPECT_EQ(fx.progress[0].message, "one of four");
  EXPECT_FALSE(fx.empty());
  fx = s->on_line(progress_line(ta, 0.5), now);
  ASSERT_EQ(fx.progress.size(), 1u);
  EXPECT_EQ(fx.progress[0].token, 2u);
  EXPECT_FALSE(fx.progress[0].total);
  EXPECT_EQ(fx.progress[0].message, "");
  // Progress must increase: a repeat or a step back is dropped.
  EXPECT_TRUE(s->on_line(progress_line(tb, 1), now).progress.empty());
  EXPECT_TRUE(s->on_line(progress_line(tb, 0.5), now).progress.empty());
  EXPECT_EQ(s->on_line(progress_line(tb, 2), now).progress.size(), 1u);
  // Once the call completed its token means nothing.
  s->on_line(result_line(b["id"], {{"content", json::array()}}), now);
  EXPECT_TRUE(s->on_line(progress_line(tb, 3), now).progress.empty());
}

// Stdio servers are read in chunks of bytes: progress of every line in a
// chunk must come out, not only what on_line reports one line at a time.
TEST_F(McpSession, ProgressInAChunkOfBytesIsReported) {
  auto s = ready_with({"t"});
  auto asked = parsed(s->call_tool(1, "t", json::object(), now, true))[0];
  auto tok = asked["params"]["_meta"]["progressToken"];
  auto chunk = progress_line(tok, 1) + "\n" + progress_line(tok, 2) + "\n";
  auto fx = s->on_bytes(chunk.data(), chunk.size(), now);
  ASSERT_EQ(fx.progress.size(), 2u);
  EXPECT_EQ(fx.progress[0].progress, 1.0);
  EXPECT_EQ(fx.progress[1].progress, 2.0);
}

TEST_F(McpSession, ProgressForUnknownTokensOrMalformedIsIgnored) {
  mcp_session::options opts;
  opts.max_progress_message = 8;
  auto s = ready_with({"t"}, opts);
  auto plain = parsed(s->call_tool(1, "t", json::object(), now))[0];
  auto asked = parsed(s->call_tool(2, "t", json::object(), now, true))[0];
  auto tok = asked["params"]["_meta"]["progressToken"];
  // A call that did not ask gets no progress, even for its own id.
  EXPECT_TRUE(s->on_line(progress_line(plain["id"], 1), now).progress.empty());
  EXPECT_TRUE(s->on_line(progress_line(999, 1), now).progress.empty());
  EXPECT_TRUE(s->on_line(progress_line("x", 1), now).progress.empty());
  EXPECT_TRUE(s->on_line(progress_line(tok, "1"), now).progress.empty());
  EXPECT_TRUE(s->on_line(R"({"jsonrpc":"2.0","method":"notifications/progress","params":[]})", now).empty());
  EXPECT_TRUE(s->on_line(R"({"jsonrpc":"2.0","method":"notifications/progress"})", now).empty());
  // A long message is cut on a character boundary; a bad total is dropped.
  auto fx = s->on_line(progress_line(tok, 1, {{"message", "abcdefg\xC3\xA9xyz"}, {"total", "many"}}), now);
  ASSERT_EQ(fx.progress.size(), 1u);
  EXPECT_EQ(fx.progress[0].message, "abcdefg");
  EXPECT_FALSE(fx.progress[0].total);
  EXPECT_FALSE(fx.failure);
}

TEST_F(McpSession, InFlightCallsCompleteWhenTransportCloses) {
  auto s = ready_with({"t"});
  s->call_tool(1, "t", json::object(), now);
  s->call_tool(2, "t", json::object(), now);
  auto fx = s->on_transport_closed("process exited with code 1");
  ASSERT_TRUE(fx.failure);
  EXPECT_EQ(*fx.failure, "process exited with code 1");
  ASSERT_EQ(fx.completed_calls.size(), 2u);
  for (const auto& c : fx.completed_calls) {
    EXPECT_EQ(c.outcome, call_outcome::closed);
    EXPECT_EQ(c.error->message, "connection failed: process exited with code 1");
  }
  EXPECT_EQ(s->next_deadline(), std::nullopt);
  EXPECT_EQ(s->call_tool(3, "t", json::object(), now).completed_calls.at(0).error->code,
            error_connection_closed);
}

TEST_F(McpSession, CloseCompletesCallsWithoutFailure) {
  auto s = ready_with({"t"});
  s->call_tool(1, "t", json::object(), now);
  auto fx = s->close();
  EXPECT_FALSE(fx.failure);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::closed);
  EXPECT_EQ(s->state(), session_state::closed);
  EXPECT_TRUE(s->on_transport_closed("exited").empty());
}

// -- filter -----------------------------------------------------------------------

TEST_F(McpSession, ChangingTheFilterReFiltersWithoutReconnecting) {
  auto s = ready_with({"read", "write", "delete"});
  EXPECT_EQ(s->visible_tools().size(), 3u);
  auto fx = s->set_tool_filter(std::vector<std::string>{"read", "write(path)"},
                               std::vector<std::string>{"write"});
  EXPECT_TRUE(fx.tools_changed);
  EXPECT_TRUE(fx.send.empty());
  EXPECT_EQ(tool_names(s->visible_tools()), (std::vector<std::string>{"read"}));
  EXPECT_EQ(s->tools().size(), 3u);
  EXPECT_EQ(s->state(), session_state::ready);
  // The same view again is no change.
  EXPECT_FALSE(s->set_tool_filter(std::vector<std::string>{"read"}, std::nullopt).tools_changed);
  EXPECT_TRUE(s->set_tool_filter(std::nullopt, std::nullopt).tools_changed);
}

TEST_F(McpSession, ReListChangingOnlyFilteredToolsIsNotPublished) {
  mcp_session::options opts;
  opts.include_tools = std::vector<std::string>{"a"};
  auto s = ready_with({"a", "b"}, opts);
  auto sent = parsed(s->on_line(notification_line("notifications/tools/list_changed"), now));
  auto fx = s->on_line(result_line(sent[0]["id"], {{"tools", tools_json({"a", "c"})}}), now);
  EXPECT_FALSE(fx.tools_changed);
  EXPECT_EQ(tool_names(s->tools()), (std::vector<std::string>{"a", "c"}));
}

TEST_F(McpSession, StartTwiceIsANoOp) {
  auto s = make();
  EXPECT_EQ(s->start(now).send.size(), 1u);
  EXPECT_TRUE(s->start(now).empty());
}

TEST_F(McpSession, ListChangedDuringDiscoveryDelaysReadyUntilTheReList) {
  auto s = make();
  auto sent = parsed(initialize(*s, {{"tools", json::object()}}));
  EXPECT_TRUE(s->on_line(notification_line("notifications/tools/list_changed"), now).send.empty());
  auto fx = s->on_line(result_line(sent[1]["id"], {{"tools", tools_json({"old"})}}), now);
  EXPECT_FALSE(fx.ready);
  sent = parsed(fx);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["method"], "tools/list");
  fx = s->on_line(result_line(sent[0]["id"], {{"tools", tools_json({"new"})}}), now);
  EXPECT_TRUE(fx.ready);
  EXPECT_EQ(tool_names(s->tools()), (std::vector<std::string>{"new"}));
}

TEST_F(McpSession, JsonThatIsNotJsonRpcCountsAsGarbage) {
  mcp_session::options opts;
  opts.limits.max_garbage_lines = 100;
  auto s = make(opts);
  s->start(now);
  for (const char* line : {R"({"jsonrpc":"1.0","id":1,"result":{}})", R"({"jsonrpc":"2.0","id":1})",
                           R"({"jsonrpc":"2.0","method":7})", R"({"jsonrpc":"2.0","id":{},"method":"ping"})",
                           "[]", "\"2.0\"", "null"})
    EXPECT_TRUE(s->on_line(line, now).empty()) << line;
  EXPECT_EQ(s->reader().garbage_lines(), 7u);
  EXPECT_EQ(s->state(), session_state::initializing);
}

// -- hostile output ----------------------------------------------------------
// A server's bytes end up in JSON (events, the snapshot, tool results) and
// in log lines. Whatever it writes, what the session keeps and reports is
// valid UTF-8, a deep answer is never built, and a call is never lost to
// one bad byte.

namespace {

// `line` with every "@BAD@" replaced by raw bytes that are not UTF-8 (a
// Latin-1 "é" and a lone 0xff), which nlohmann::json cannot produce.
std::string with_bad_bytes(std::string line) {
  for (auto p = line.find("@BAD@"); p != std::string::npos; p = line.find("@BAD@"))
    line.replace(p, 5, "caf\xe9\xff");
  return line;
}

std::string nested(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

bool valid_utf8_dump(const json& j) {
  try {
    return !first_invalid_utf8(j.dump()).has_value();
  } catch (const json::exception&) {
    return false;
  }
}

} // namespace

TEST_F(McpSession, Latin1ByteInAToolResultDoesNotLoseTheCall) {
  auto s = ready_with({"echo"});
  auto sent = parsed(s->call_tool(3, "echo", {{"text", "hi"}}, now));
  auto line = with_bad_bytes(
      result_line(sent.at(0)["id"], {{"content", {{{"type", "text"}, {"text", "@BAD@"}}}}}));
  ASSERT_TRUE(first_invalid_utf8(line).has_value()); // the test sends what it means to
  auto fx = s->on_line(line, now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::ok);
  EXPECT_EQ(fx.completed_calls[0].result["content"][0]["text"], "caf\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(valid_utf8_dump(fx.completed_calls[0].result));
  EXPECT_EQ(s->reader().total_garbage_lines(), 0u);
}

TEST_F(McpSession, InvalidUtf8InDiscoveryIsReplacedEverywhere) {
  auto s = make();
  auto id = parsed(s->start(now))[0]["id"];
  auto fx = s->on_line(with_bad_bytes(result_line(
                           id, {{"protocolVersion", "2025-11-25"},
                                {"capabilities", {{"tools", json::object()}, {"prompts", json::object()}}},
                                {"serverInfo", {{"name", "srv @BAD@"}, {"version", "@BAD@"}}},
                                {"instructions", "@BAD@"}})),
                       now);
  ASSERT_FALSE(fx.failure);
  auto sent = parsed(fx);
  fx = s->on_line(with_bad_bytes(result_line(find_request(sent, "tools/list")["id"],
                                             {{"tools",
                                               {{{"name", "t@BAD@"},
                                                 {"description", "@BAD@"},
                                                 {"inputSchema", {{"type", "object"}, {"title", "@BAD@"}}}}}}})),
                  now);
  fx = s->on_line(with_bad_bytes(result_line(find_request(sent, "prompts/list")["id"],
                                             {{"prompts", {{{"name", "p@BAD@"}, {"description", "@BAD@"}}}}})),
                  now);
  ASSERT_TRUE(fx.ready);
  ASSERT_EQ(s->tools().size(), 1u);
  for (auto& text : {s->server_info().name, s->server_info().version, *s->instructions(), s->tools()[0].name,
                     s->tools()[0].description, s->prompts().at(0).name, s->prompts()[0].description})
    EXPECT_FALSE(first_invalid_utf8(text).has_value()) << text;
  EXPECT_TRUE(valid_utf8_dump(s->tools()[0].raw));
  EXPECT_TRUE(valid_utf8_dump(s->tools()[0].input_schema));
  EXPECT_TRUE(valid_utf8_dump(s->server_info().raw));
  // The tool is callable under its replaced name.
  EXPECT_TRUE(s->call_tool(1, s->tools()[0].name, json::object(), now).completed_calls.empty());
}

TEST_F(McpSession, ServerTextInAFailureReasonIsShortOneLineAndValidUtf8) {
  auto s = make();
  auto id = parsed(s->start(now))[0]["id"];
  std::string message = "bad\nINFO forged log line @BAD@ " + std::string(100000, 'x');
  auto fx = s->on_line(with_bad_bytes(error_line(id, -32602, message)), now);
  ASSERT_TRUE(fx.failure);
  EXPECT_EQ(fx.failure->find('\n'), std::string::npos) << *fx.failure;
  EXPECT_FALSE(first_invalid_utf8(*fx.failure).has_value()) << *fx.failure;
  EXPECT_LT(fx.failure->size(), 400u);
  EXPECT_NE(fx.failure->find("initialize failed: bad\\nINFO forged"), std::string::npos) << *fx.failure;

  s = make();
  fx = initialize(*s, json::object(), "2025\n-01-01@BAD@");
  ASSERT_TRUE(fx.failure);
  EXPECT_EQ(fx.failure->find('\n'), std::string::npos) << *fx.failure;
  EXPECT_FALSE(first_invalid_utf8(*fx.failure).has_value()) << *fx.failure;
}

TEST_F(McpSession, RawNonJsonLineWithInvalidUtf8IsGarbageWithAValidReason) {
  mcp_session::options opts;
  opts.limits.max_garbage_lines = 1;
  auto s = make(opts);
  s->start(now);
  std::string banner = "\xff\xfe banner\n", clear = "\xc3(\x1b[2J\n";
  EXPECT_FALSE(s->on_bytes(banner.data(), banner.size(), now).failure);
  auto fx = s->on_bytes(clear.data(), clear.size(), now);
  ASSERT_TRUE(fx.failure);
  EXPECT_FALSE(first_invalid_utf8(*fx.failure).has_value()) << *fx.failure;
  EXPECT_EQ(fx.failure->find('\x1b'), std::string::npos) << *fx.failure;
}

TEST_F(McpSession, DeeplyNestedToolResultFailsTheCallAtOnce) {
  auto s = ready_with({"echo"});
  auto sent = parsed(s->call_tool(9, "echo", json::object(), now));
  auto id = sent.at(0)["id"].get<std::int64_t>();
  // Deep enough to overflow the stack of anything that recurses per level.
  std::string line = R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"result":{"content":)" +
                     nested(200000) + "}}";
  auto fx = s->on_line(line, now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].token, 9u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::rpc_error);
  ASSERT_TRUE(fx.completed_calls[0].error);
  EXPECT_EQ(fx.completed_calls[0].error->code, error_response_refused);
  EXPECT_NE(fx.completed_calls[0].error->message.find("nested deeper than 128"), std::string::npos)
      << fx.completed_calls[0].error->message;
  EXPECT_EQ(s->in_flight_calls(), 0u);
  EXPECT_EQ(s->state(), session_state::ready);
  EXPECT_FALSE(fx.failure);
}

TEST_F(McpSession, NestingUpToTheLimitIsAccepted) {
  mcp_session::options opts;
  opts.max_message_depth = 10;
  auto s = ready_with({"echo"}, opts);
  auto id = parsed(s->call_tool(1, "echo", json::object(), now)).at(0)["id"];
  // The envelope's object and "result" take two levels.
  auto fx = s->on_line(R"({"jsonrpc":"2.0","id":)" + id.dump() + R"(,"result":{"x":)" + nested(8) + "}}", now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::ok);
  id = parsed(s->call_tool(2, "echo", json::object(), now)).at(0)["id"];
  fx = s->on_line(R"({"jsonrpc":"2.0","id":)" + id.dump() + R"(,"result":{"x":)" + nested(9) + "}}", now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::rpc_error);
}

TEST_F(McpSession, DeeplyNestedToolsListDuringDiscoveryFailsWithTheReason) {
  auto s = make();
  auto fx = initialize(*s, {{"tools", json::object()}});
  auto list = find_request(parsed(fx), "tools/list");
  fx = s->on_line(R"({"jsonrpc":"2.0","id":)" + list["id"].dump() + R"(,"result":{"tools":)" + nested(100000) +
                      "}}",
                  now);
  ASSERT_TRUE(fx.failure);
  EXPECT_NE(fx.failure->find("tools/list failed: the server's answer was refused: nested deeper"),
            std::string::npos)
      << *fx.failure;
}

TEST_F(McpSession, DeepMessagesThatAnswerNothingAreGarbage) {
  auto s = ready_with({"echo"});
  // A deep notification, a deep request, a deep answer to an unknown id.
  for (const std::string& line :
       {R"({"jsonrpc":"2.0","method":"notifications/message","params":)" + nested(50000) + "}",
        R"({"jsonrpc":"2.0","id":"x","method":"ping","params":)" + nested(50000) + "}",
        R"({"jsonrpc":"2.0","id":12345,"result":)" + nested(50000) + "}"}) {
    auto fx = s->on_line(line, now);
    EXPECT_TRUE(fx.empty());
  }
  EXPECT_EQ(s->reader().garbage_lines(), 3u);
  EXPECT_EQ(s->state(), session_state::ready);
}

TEST_F(McpSession, OversizedHttpMessageFailsTheCallItAnswers) {
  mcp_session::options opts;
  opts.limits.max_line_bytes = 1000;
  auto s = ready_with({"echo"}, opts);
  auto id = parsed(s->call_tool(4, "echo", json::object(), now)).at(0)["id"];
  // on_line is the HTTP path: no line reader has cut this message.
  auto fx = s->on_line(result_line(id, {{"content", std::string(5000, 'y')}}), now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::rpc_error);
  EXPECT_NE(fx.completed_calls[0].error->message.find("larger than 1000 bytes"), std::string::npos)
      << fx.completed_calls[0].error->message;
}

// -- client features: roots, elicitation, sampling --------------------------------

namespace {

json request_line(const json& id, const std::string& method, const json& params) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}};
}

json initialize_capabilities(mcp_session& s, time_point now) {
  auto sent = parsed(s.start(now));
  EXPECT_EQ(sent.size(), 1u);
  return sent.at(0)["params"]["capabilities"];
}

json sep1034_params() {
  return json::parse(R"({"message":"accept with defaults","requestedSchema":{"type":"object",
    "properties":{"name":{"type":"string","default":"John Doe"},"age":{"type":"integer","default":30},
    "score":{"type":"number","default":95.5},
    "status":{"type":"string","enum":["active","inactive"],"default":"active"},
    "verified":{"type":"boolean","default":true},"free":{"type":"string"}},"required":[]}})");
}

mcp_session::options with_features(client_features f) {
  mcp_session::options o;
  o.features = std::move(f);
  return o;
}

} // namespace

TEST_F(McpSession, NothingIsAdvertisedByDefault) {
  auto s = make();
  EXPECT_EQ(initialize_capabilities(*s, now), json::object());
}

TEST_F(McpSession, RootsAreAdvertisedAndListedWhenSet) {
  client_features f;
  f.roots = std::vector<mcp_root>{{"file:///work/a", "a"}, {"file:///srv", ""}};
  auto s = make(with_features(f));
  EXPECT_EQ(initialize_capabilities(*s, now), (json{{"roots", {{"listChanged", true}}}}));

  auto s2 = ready_with({"a"}, with_features(f));
  auto sent = parsed(s2->on_line(request_line("r1", "roots/list", json::object()).dump(), now));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["id"], "r1");
  EXPECT_EQ(sent[0]["result"], json::parse(R"({"roots":[{"uri":"file:///work/a","name":"a"},
                                                         {"uri":"file:///srv"}]})"));
  // A request without params is still answered.
  sent = parsed(s2->on_line(R"({"jsonrpc":"2.0","id":5,"method":"roots/list"})", now));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["result"]["roots"].size(), 2u);
}

TEST_F(McpSession, ChangedRootsAreAnnouncedOnlyAfterInitializeAndOnlyWhenTheyDiffer) {
  client_features f;
  f.roots = std::vector<mcp_root>{{"file:///a", "a"}};
  auto s = make(with_features(f));
  s->start(now);
  // Not initialized yet: updated silently.
  EXPECT_TRUE(s->set_roots({{"file:///b", "b"}}).empty());
  EXPECT_EQ(s->roots()->at(0).uri, "file:///b");

  auto r = ready_with({"a"}, with_features(f));
  EXPECT_TRUE(r->set_roots({{"file:///a", "a"}}).empty());
  auto sent = parsed(r->set_roots({{"file:///a", "a"}, {"file:///c", "c"}}));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0], (json{{"jsonrpc", "2.0"}, {"method", "notifications/roots/list_changed"}}));
  sent = parsed(r->on_line(request_line(9, "roots/list", json::object()).dump(), now));
  EXPECT_EQ(sent.at(0)["result"]["roots"].size(), 2u);
}

TEST_F(McpSession, SetRootsIsIgnoredWhenRootsWereNotAdvertised) {
  auto s = ready_with({"a"});
  EXPECT_TRUE(s->set_roots({{"file:///x", "x"}}).empty());
  EXPECT_EQ(s->roots(), std::nullopt);
  auto sent = parsed(s->on_line(request_line(1, "roots/list", json::object()).dump(), now));
  EXPECT_EQ(sent.at(0)["error"]["code"], -32601);
}

TEST_F(McpSession, DeclinePolicyIsNotAdvertisedAndDeclines) {
  auto s = ready_with({"a"});
  auto sent = parsed(s->on_line(request_line(13, "elicitation/create", sep1034_params()).dump(), now));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["id"], 13);
  EXPECT_EQ(sent[0]["result"], (json{{"action", "decline"}}));
}

TEST_F(McpSession, AcceptDefaultsIsAdvertisedAsFormAndAnswersWithTheDefaults) {
  client_features f;
  f.elicitation = elicitation_policy::accept_defaults;
  auto fresh = make(with_features(f));
  EXPECT_EQ(initialize_capabilities(*fresh, now), (json{{"elicitation", {{"form", json::object()}}}}));

  auto s = ready_with({"a"}, with_features(f));
  auto sent = parsed(s->on_line(request_line("e1", "elicitation/create", sep1034_params()).dump(), now));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["id"], "e1");
  EXPECT_EQ(sent[0]["result"], json::parse(R"({"action":"accept","content":{"name":"John Doe","age":30,
      "score":95.5,"status":"active","verified":true}})"));

  json url = {{"mode", "url"}, {"message", "log in"}, {"url", "https://example.com/x"}, {"elicitationId", "u"}};
  sent = parsed(s->on_line(request_line("e2", "elicitation/create", url).dump(), now));
  EXPECT_EQ(sent.at(0)["result"], (json{{"action", "decline"}}));
}

TEST_F(McpSession, AskPolicyHandsElicitationToTheHostAndSendsItsAnswer) {
  client_features f;
  f.elicitation = elicitation_policy::ask;
  auto s = ready_with({"a"}, with_features(f));
  auto fx = s->on_line(request_line("q", "elicitation/create", sep1034_params()).dump(), now);
  EXPECT_TRUE(fx.send.empty());
  ASSERT_EQ(fx.host_requests.size(), 1u);
  EXPECT_EQ(fx.host_requests[0].method, "elicitation/create");
  EXPECT_EQ(fx.host_requests[0].params, sep1034_params());
  EXPECT_EQ(s->pending_host_requests(), 1u);
  auto token = fx.host_requests[0].token;

  auto sent = parsed(s->answer_host_request(token, {{"action", "cancel"}}));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0], (json{{"jsonrpc", "2.0"}, {"id", "q"}, {"result", {{"action", "cancel"}}}}));
  EXPECT_EQ(s->pending_host_requests(), 0u);
  // A second answer to the same token goes nowhere.
  EXPECT_TRUE(s->answer_host_request(token, json::object()).empty());

}

TEST_F(McpSession, AskPolicyHandsAUrlModeElicitationToTheHostOnlyWithAnHttpUrl) {
  client_features f;
  f.elicitation = elicitation_policy::ask;
  auto fresh = make(with_features(f));
  EXPECT_EQ(initialize_capabilities(*fresh, now),
            (json{{"elicitation", {{"form", json::object()}, {"url", json::object()}}}}));

  auto s = ready_with({"a"}, with_features(f));
  json url = {{"mode", "url"}, {"message", "log in"}, {"url", "https://auth.example/x?y=1"}, {"elicitationId", "u1"}};
  auto fx = s->on_line(request_line(2, "elicitation/create", url).dump(), now);
  ASSERT_EQ(fx.host_requests.size(), 1u);
  EXPECT_EQ(fx.host_requests[0].params, url);
  auto sent = parsed(s->answer_host_request(fx.host_requests[0].token, {{"action", "accept"}}));
  EXPECT_EQ(sent.at(0), (json{{"jsonrpc", "2.0"}, {"id", 2}, {"result", {{"action", "accept"}}}}));

  // What a host must never be asked to open is declined without asking.
  std::vector<json> refused;
  for (const std::string& bad : std::vector<std::string>{"javascript:alert(1)", "file:///etc/passwd", "https:/no-slashes", "HTTPS://a b",
                          "vscode://x", std::string("https://") + std::string(max_elicitation_url_bytes, 'a')})
    refused.push_back({{"mode", "url"}, {"message", "m"}, {"url", bad}, {"elicitationId", "u"}});
  refused.push_back({{"mode", "url"}, {"message", "m"}, {"url", "https://x"}}); // no elicitationId
  refused.push_back({{"mode", "url"}, {"message", "m"}, {"url", 7}, {"elicitationId", "u"}});
  refused.push_back({{"mode", "telepathy"}, {"message", "m"}});
  int n = 10;
  for (auto& params : refused) {
    fx = s->on_line(request_line(n++, "elicitation/create", params).dump(), now);
    EXPECT_TRUE(fx.host_requests.empty()) << params.dump();
    EXPECT_EQ(parsed(fx).at(0)["result"], (json{{"action", "decline"}})) << params.dump();
  }
  // Upper-case scheme is still http(s).
  json upper = {{"mode", "url"}, {"message", "m"}, {"url", "HTTPS://ok.example/"}, {"elicitationId", "u2"}};
  fx = s->on_line(request_line(40, "elicitation/create", upper).dump(), now);
  EXPECT_EQ(fx.host_requests.size(), 1u);
}

TEST_F(McpSession, SamplingGoesToTheHostOnlyWhenAdvertised) {
  auto plain = ready_with({"a"});
  auto sent = parsed(plain->on_line(request_line(1, "sampling/createMessage", json::object()).dump(), now));
  EXPECT_EQ(sent.at(0)["error"]["code"], -32601);

  client_features f;
  f.sampling = true;
  auto fresh = make(with_features(f));
  EXPECT_EQ(initialize_capabilities(*fresh, now), (json{{"sampling", json::object()}}));

  auto s = ready_with({"a"}, with_features(f));
  json params = {{"messages", json::array()}, {"maxTokens", 10}};
  auto fx = s->on_line(request_line(7, "sampling/createMessage", params).dump(), now);
  ASSERT_EQ(fx.host_requests.size(), 1u);
  EXPECT_EQ(fx.host_requests[0].method, "sampling/createMessage");
  sent = parsed(s->fail_host_request(fx.host_requests[0].token, rpc_error{-1, "user rejected", json()}));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["id"], 7);
  EXPECT_EQ(sent[0]["error"]["code"], -1);
  EXPECT_EQ(sent[0]["error"]["message"], "user rejected");

  // Params that are not an object are refused without bothering the host.
  fx = s->on_line(R"({"jsonrpc":"2.0","id":8,"method":"sampling/createMessage","params":[1]})", now);
  EXPECT_TRUE(fx.host_requests.empty());
  EXPECT_EQ(parsed(fx).at(0)["error"]["code"], -32602);
}

TEST_F(McpSession, HostRequestsAreBoundedInNumber) {
  client_features f;
  f.sampling = true;
  auto o = with_features(f);
  o.max_pending_host_requests = 2;
  auto s = ready_with({"a"}, o);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(s->on_line(request_line(i, "sampling/createMessage", json::object()).dump(), now)
                  .host_requests.size(),
              1u);
  auto fx = s->on_line(request_line(2, "sampling/createMessage", json::object()).dump(), now);
  EXPECT_TRUE(fx.host_requests.empty());
  EXPECT_EQ(parsed(fx).at(0)["error"]["code"], -32603);
}

TEST_F(McpSession, UnansweredHostRequestsTimeOutWithAnAnswerForTheServer) {
  client_features f;
  f.sampling = true;
  f.elicitation = elicitation_policy::ask;
  auto o = with_features(f);
  o.host_request_timeout = 5s;
  o.call_timeout = std::nullopt;
  auto s = ready_with({"a"}, o);
  auto e = s->on_line(request_line("e", "elicitation/create", sep1034_params()).dump(), now);
  auto m = s->on_line(request_line("m", "sampling/createMessage", json::object()).dump(), now);
  EXPECT_EQ(s->next_deadline(), now + 5s);
  EXPECT_TRUE(s->on_tick(now + 4s).empty());
  auto fx = s->on_tick(now + 5s);
  auto sent = parsed(fx);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0], (json{{"jsonrpc", "2.0"}, {"id", "e"}, {"result", {{"action", "decline"}}}}));
  EXPECT_EQ(sent[1]["id"], "m");
  EXPECT_EQ(sent[1]["error"]["code"], error_request_timeout);
  EXPECT_EQ(fx.withdrawn_host_requests.size(), 2u);
  EXPECT_EQ(s->pending_host_requests(), 0u);
  EXPECT_EQ(s->next_deadline(), std::nullopt);
  EXPECT_TRUE(s->answer_host_request(e.host_requests.at(0).token, json::object()).empty());
}

TEST_F(McpSession, TheServerCancellingAHostRequestWithdrawsItWithoutAnAnswer) {
  client_features f;
  f.sampling = true;
  auto s = ready_with({"a"}, with_features(f));
  auto fx = s->on_line(request_line(41, "sampling/createMessage", json::object()).dump(), now);
  auto token = fx.host_requests.at(0).token;
  fx = s->on_line(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":41}})", now);
  EXPECT_TRUE(fx.send.empty());
  EXPECT_EQ(fx.withdrawn_host_requests, std::vector<std::uint64_t>{token});
  EXPECT_TRUE(s->answer_host_request(token, json::object()).empty());
}

TEST_F(McpSession, HostRequestsAreAnsweredWithAnErrorWhenTheSessionEnds) {
  client_features f;
  f.sampling = true;
  for (bool closing : {true, false}) {
    auto s = ready_with({"a"}, with_features(f));
    auto token = s->on_line(request_line(3, "sampling/createMessage", json::object()).dump(), now)
                     .host_requests.at(0)
                     .token;
    auto fx = closing ? s->close() : s->on_transport_closed("gone");
    auto sent = parsed(fx);
    ASSERT_EQ(sent.size(), 1u) << closing;
    EXPECT_EQ(sent[0]["id"], 3);
    EXPECT_EQ(sent[0]["error"]["code"], error_connection_closed);
    EXPECT_EQ(fx.withdrawn_host_requests, std::vector<std::uint64_t>{token});
    EXPECT_EQ(s->pending_host_requests(), 0u);
    EXPECT_TRUE(s->answer_host_request(token, json::object()).empty());
  }
}

TEST_F(McpSession, HostRequestsInABatchOnStdioAreAllReported) {
  client_features f;
  f.sampling = true;
  auto s = ready_with({"a"}, with_features(f));
  std::string bytes = request_line(1, "sampling/createMessage", json::object()).dump() + "\n" +
                      request_line(2, "sampling/createMessage", json::object()).dump() + "\n";
  auto fx = s->on_bytes(bytes.data(), bytes.size(), now);
  EXPECT_EQ(fx.host_requests.size(), 2u);
}

// -- server logs (the gateway) ----------------------------------------

TEST_F(McpSession, ServerLogMessagesAreReportedBoundedAndBadOnesDropped) {
  auto s = ready_with({"a"});
  std::string big(mcprt::max_log_data_bytes + 10, 'x');
  auto line = [](json params) {
    return json{{"jsonrpc", "2.0"}, {"method", "notifications/message"}, {"params", std::move(params)}}.dump();
  };
  std::string bytes = line({{"level", "warning"}, {"logger", "db"}, {"data", {{"n", 1}}}}) + "\n" +
                      line({{"level", "loud"}, {"data", "dropped: no such level"}}) + "\n" +
                      line({{"level", "error"}, {"data", big}}) + "\n";
  auto fx = s->on_bytes(bytes.data(), bytes.size(), now);
  ASSERT_EQ(fx.logs.size(), 2u);
  EXPECT_EQ(fx.logs[0].level, "warning");
  EXPECT_EQ(fx.logs[0].logger, "db");
  EXPECT_EQ(fx.logs[0].data["n"], 1);
  EXPECT_EQ(fx.logs[1].level, "error");
  EXPECT_TRUE(fx.logs[1].data["truncated"].get<bool>());
  EXPECT_FALSE(fx.empty());
}
