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
    return ready(make(http_headers), std::move(tools));
  }

  /// A session of `o` at 2026-07-28 (discovered), with one tool `t`.
  std::unique_ptr<mcp_session> ready_with(mcp_session::options o) {
    o.probe_modern = true;
    return ready(std::make_unique<mcp_session>(o), json::array({{{"name", "t"}}}));
  }

  std::unique_ptr<mcp_session> ready(std::unique_ptr<mcp_session> s, json tools) {
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

TEST_F(ModernSession, InputRequiredIsAnsweredThroughTheHostAndTheCallRetriedWithTheState) {
  mcp_session::options o;
  o.probe_modern = true;
  o.features.elicitation = elicitation_policy::ask;
  o.features.sampling = true;
  o.features.roots = std::vector<mcp_root>{{"file:///ws", "ws"}};
  o.client_name = "mcprt-test";
  auto s = std::make_unique<mcp_session>(o);
  auto first = sent_of(s->start(now));
  auto next = sent_of(s->on_line(result_line(first.at(0).at("id"), modern_discover_result({"2026-07-28"})), now));
  ASSERT_TRUE(s->on_line(result_line(next.at(0).at("id"), {{"tools", json::array({{{"name", "book"}}})}}), now).ready);

  auto call = sent_of(s->call_tool(5, "book", {{"city", "Oslo"}}, now));
  ASSERT_EQ(call.size(), 1u);
  auto fx = s->on_line(result_line(call[0]["id"],
                                   {{"resultType", "input_required"},
                                    {"inputRequests",
                                     {{"who", {{"method", "elicitation/create"}, {"params", {{"message", "name?"}}}}},
                                      {"llm", {{"method", "sampling/createMessage"}, {"params", {{"maxTokens", 5}}}}},
                                      {"where", {{"method", "roots/list"}}}}},
                                    {"requestState", "opaque-\u00e9-1"}}),
                       now);
  EXPECT_TRUE(fx.completed_calls.empty()) << "the call waits for its inputs";
  EXPECT_TRUE(fx.send.empty()) << "nothing goes to the server until every input is in";
  ASSERT_EQ(fx.host_requests.size(), 2u);
  EXPECT_EQ(s->in_flight_calls(), 1u);
  std::map<std::string, std::uint64_t> token_of;
  for (auto& h : fx.host_requests) {
    EXPECT_EQ(h.call, std::optional<std::uint64_t>(5));
    token_of[h.input_key] = h.token;
  }
  ASSERT_TRUE(token_of.count("who") && token_of.count("llm"));
  EXPECT_TRUE(s->answer_host_request(token_of["who"], {{"action", "accept"}, {"content", {{"n", "Ada"}}}}).send.empty());
  auto retry = sent_of(s->answer_host_request(token_of["llm"], {{"role", "assistant"}, {"content", {{"type", "text"}}}}));
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_NE(retry[0]["id"], call[0]["id"]) << "a retry is a new request";
  EXPECT_EQ(retry[0]["method"], "tools/call");
  EXPECT_EQ(retry[0]["params"]["name"], "book");
  EXPECT_EQ(retry[0]["params"]["arguments"], (json{{"city", "Oslo"}}));
  EXPECT_EQ(retry[0]["params"]["requestState"], "opaque-\u00e9-1") << "echoed exactly";
  auto& in = retry[0]["params"]["inputResponses"];
  EXPECT_EQ(in["who"]["content"]["n"], "Ada");
  EXPECT_EQ(in["llm"]["role"], "assistant");
  EXPECT_EQ(in["where"]["roots"][0]["uri"], "file:///ws") << "roots come from the session";
  expect_modern_meta(retry[0]);
  auto done = s->on_line(result_line(retry[0]["id"], {{"content", json::array()}}), now);
  ASSERT_EQ(done.completed_calls.size(), 1u);
  EXPECT_EQ(done.completed_calls[0].token, 5u);
  EXPECT_EQ(done.completed_calls[0].outcome, call_outcome::ok);
}

// Roots asked for in a round are the one request's: the host may know
// them (a gateway's client); a host that does not leaves the session's.
TEST_F(ModernSession, RootsOfARoundGoToTheHostWhenItAnswersThemAndTheSessionsOtherwise) {
  mcp_session::options o;
  o.probe_modern = true;
  o.features.elicitation = elicitation_policy::ask;
  o.features.roots = std::vector<mcp_root>{{"file:///ws", "ws"}};
  o.host_answers_input_roots = true;
  auto s = ready_with(o);
  auto ask = [&](std::uint64_t token) {
    auto call = sent_of(s->call_tool(token, "t", json::object(), now));
    return s->on_line(result_line(call[0]["id"], {{"resultType", "input_required"},
                                                  {"inputRequests",
                                                   {{"who", {{"method", "elicitation/create"}}},
                                                    {"where", {{"method", "roots/list"}}}}}}),
                      now);
  };
  auto fx = ask(1);
  ASSERT_EQ(fx.host_requests.size(), 2u);
  std::map<std::string, host_request> by_key;
  for (auto& h : fx.host_requests) {
    EXPECT_EQ(h.round_size, 2u) << "the host hears how many of the round come to it";
    by_key[h.input_key] = h;
  }
  ASSERT_EQ(by_key.count("where"), 1u);
  EXPECT_EQ(by_key["where"].method, "roots/list");
  s->answer_host_request(by_key["who"].token, {{"action", "decline"}});
  auto retry = sent_of(s->answer_host_request(by_key["where"].token, {{"roots", {{{"uri", "file:///theirs"}}}}}));
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_EQ(retry[0]["params"]["inputResponses"]["where"]["roots"][0]["uri"], "file:///theirs");

  fx = ask(2);
  ASSERT_EQ(fx.host_requests.size(), 2u);
  for (auto& h : fx.host_requests)
    by_key[h.input_key] = h;
  s->answer_host_request(by_key["who"].token, {{"action", "decline"}});
  retry = sent_of(s->fail_host_request(by_key["where"].token, {-32601, "no roots here", json()}));
  ASSERT_EQ(retry.size(), 1u) << "a host without the request's roots does not end the call";
  EXPECT_EQ(retry[0]["params"]["inputResponses"]["where"]["roots"][0]["uri"], "file:///ws");
}

// 2026-07-28's URL mode has no elicitationId (the retry ends it): such an
// input reaches the host; a URL that is not http(s) is still declined.
TEST_F(ModernSession, AUrlModeInputWithoutAnElicitationIdReachesTheHost) {
  mcp_session::options o;
  o.probe_modern = true;
  o.features.elicitation = elicitation_policy::ask;
  auto s = ready_with(o);
  auto call = sent_of(s->call_tool(1, "t", json::object(), now));
  auto url_input = [](const std::string& url) {
    return json{{"method", "elicitation/create"},
                {"params", {{"mode", "url"}, {"message", "sign in"}, {"url", url}}}};
  };
  auto fx = s->on_line(result_line(call[0]["id"], {{"resultType", "input_required"},
                                                   {"inputRequests",
                                                    {{"open", url_input("https://example.com/pay")},
                                                     {"bad", url_input("javascript:alert(1)")}}}}),
                       now);
  ASSERT_EQ(fx.host_requests.size(), 1u);
  EXPECT_EQ(fx.host_requests[0].input_key, "open");
  auto retry = sent_of(s->answer_host_request(fx.host_requests[0].token, {{"action", "accept"}}));
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_EQ(retry[0]["params"]["inputResponses"]["open"]["action"], "accept");
  EXPECT_EQ(retry[0]["params"]["inputResponses"]["bad"]["action"], "decline");
}

TEST_F(ModernSession, InputRequiredWithoutStateRetriesWithoutOneAndWhatCannotBeGivenEndsTheCall) {
  auto s = ready(json::array({{{"name", "confirm"}}}));
  // Elicitation is declined by default policy: answered at once, no host.
  auto call = sent_of(s->call_tool(1, "confirm", json::object(), now));
  auto retry = sent_of(s->on_line(
    result_line(call[0]["id"], {{"resultType", "input_required"},
                                {"inputRequests", {{"c", {{"method", "elicitation/create"}, {"params", json::object()}}}}}}),
    now));
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_FALSE(retry[0]["params"].contains("requestState"));
  EXPECT_EQ(retry[0]["params"]["inputResponses"]["c"]["action"], "decline");
  // Sampling the session does not offer: the call ends, saying so.
  auto fx = s->on_line(
    result_line(retry[0]["id"], {{"resultType", "input_required"},
                                 {"inputRequests", {{"s", {{"method", "sampling/createMessage"}}}}}}),
    now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::rpc_error);
  EXPECT_EQ(fx.completed_calls[0].error->code, error_missing_client_capability);
  EXPECT_EQ(s->in_flight_calls(), 0u);
}

TEST_F(ModernSession, ARoundWaitingOnTheHostCanBeCancelledAndEndsWithTheConnection) {
  mcp_session::options o;
  o.probe_modern = true;
  o.features.sampling = true;
  auto s = ready_with(o);
  auto ask = [&](std::uint64_t token) {
    auto call = sent_of(s->call_tool(token, "t", json::object(), now));
    return s->on_line(result_line(call[0]["id"], {{"resultType", "input_required"},
                                                  {"inputRequests", {{"s", {{"method", "sampling/createMessage"}}}}}}),
                      now);
  };
  auto fx = ask(1);
  ASSERT_EQ(fx.host_requests.size(), 1u);
  auto cancelled = s->cancel_call(1, "user");
  ASSERT_EQ(cancelled.completed_calls.size(), 1u);
  EXPECT_EQ(cancelled.completed_calls[0].outcome, call_outcome::cancelled);
  EXPECT_EQ(cancelled.withdrawn_host_requests, std::vector<std::uint64_t>{fx.host_requests[0].token});
  EXPECT_TRUE(cancelled.send.empty()) << "nothing at the server to cancel between rounds";
  // A late answer finds nothing.
  EXPECT_TRUE(s->answer_host_request(fx.host_requests[0].token, {{"role", "assistant"}}).send.empty());
  // The host failing a sampling input ends the call.
  fx = ask(2);
  auto failed = s->fail_host_request(fx.host_requests[0].token, {-1, "no model", json()});
  ASSERT_EQ(failed.completed_calls.size(), 1u);
  EXPECT_EQ(failed.completed_calls[0].token, 2u);
  // The connection ending ends a round that waits.
  fx = ask(3);
  auto closed = s->on_transport_closed("the server exited");
  bool ended = false;
  for (auto& c : closed.completed_calls)
    ended = ended || (c.token == 3 && c.outcome == call_outcome::closed);
  EXPECT_TRUE(ended);
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

TEST_F(ModernSession, ListChangesComeOnAListenRequestKeptOpenAndOpenedAgain) {
  mcp_session::options o;
  o.probe_modern = true;
  o.listen_modern = true;
  o.client_name = "mcprt-test";
  auto s = std::make_unique<mcp_session>(o);
  auto first = sent_of(s->start(now));
  auto discover = modern_discover_result({"2026-07-28"});
  discover["capabilities"] = {{"tools", {{"listChanged", true}}}, {"resources", {{"subscribe", true}}}};
  auto next = sent_of(s->on_line(result_line(first.at(0).at("id"), discover), now));
  ASSERT_EQ(next.size(), 1u);
  auto ready = s->on_line(result_line(next.at(0).at("id"), {{"tools", json::array({{{"name", "a"}}})}}), now);
  ASSERT_TRUE(ready.ready);
  auto listen = sent_of(ready);
  ASSERT_EQ(listen.size(), 1u);
  EXPECT_EQ(listen[0]["method"], "subscriptions/listen");
  EXPECT_EQ(listen[0]["params"]["notifications"], (json{{"toolsListChanged", true}}));
  expect_modern_meta(listen[0]);
  EXPECT_EQ(s->in_flight_calls(), 0u) << "a listen is no call";
  EXPECT_FALSE(s->next_deadline()) << "and has no deadline";
  // The acknowledgement needs nothing; a list change re-lists.
  EXPECT_TRUE(s->on_line(R"({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}})", now)
                .send.empty());
  auto relist = sent_of(s->on_line(R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed",)"
                                   R"("params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}})",
                                   now));
  ASSERT_EQ(relist.size(), 1u);
  EXPECT_EQ(relist[0]["method"], "tools/list");
  // Subscribing to a resource opens the listen again with it, and is done here.
  auto sub = s->request(9, "resources/subscribe", {{"uri", "file:///a"}}, now);
  ASSERT_EQ(sub.completed_calls.size(), 1u);
  EXPECT_EQ(sub.completed_calls[0].outcome, call_outcome::ok);
  auto sent = sent_of(sub);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0]["method"], "notifications/cancelled");
  EXPECT_EQ(sent[0]["params"]["requestId"], listen[0]["id"]);
  EXPECT_EQ(sent[1]["method"], "subscriptions/listen");
  EXPECT_EQ(sent[1]["params"]["notifications"]["resourceSubscriptions"], (json{"file:///a"}));
  // The server ends the stream: it is opened again a moment later.
  auto ended = s->on_line(result_line(sent[1]["id"], {{"resultType", "complete"}}), now);
  EXPECT_TRUE(sent_of(ended).empty());
  ASSERT_TRUE(s->next_deadline());
  auto again = sent_of(s->on_tick(*s->next_deadline()));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0]["method"], "subscriptions/listen");
  // A stream that breaks once it was acknowledged is opened again soon; one
  // refused before its acknowledgement, only after a while.
  auto later = now + std::chrono::seconds(5);
  s->on_line(R"({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}})", later);
  auto broken = json{{"jsonrpc", "2.0"}, {"id", again[0]["id"]}, {"error", {{"code", -32000}, {"message", "cut"}}}};
  s->on_line(broken.dump(), later);
  ASSERT_TRUE(s->next_deadline());
  EXPECT_LE(*s->next_deadline() - later, std::chrono::milliseconds(1000));
  auto reopened = sent_of(s->on_tick(*s->next_deadline()));
  ASSERT_EQ(reopened.size(), 1u);
  EXPECT_EQ(reopened[0]["method"], "subscriptions/listen");
  auto at = later + std::chrono::seconds(10);
  auto refused = json{{"jsonrpc", "2.0"}, {"id", reopened[0]["id"]}, {"error", {{"code", -32601}, {"message", "no"}}}};
  s->on_line(refused.dump(), at);
  auto is_listen = [](const json& m) { return m.value("method", "") == "subscriptions/listen"; };
  auto early = sent_of(s->on_tick(at + std::chrono::seconds(29)));
  EXPECT_TRUE(std::none_of(early.begin(), early.end(), is_listen));
  auto late = sent_of(s->on_tick(at + std::chrono::seconds(30)));
  EXPECT_TRUE(std::any_of(late.begin(), late.end(), is_listen));
}

TEST_F(ModernSession, WithoutListenAModernResourceSubscribeIsRefusedSayingWhy) {
  auto s = make(true); // streamable HTTP: no listen kept open
  auto first = sent_of(s->start(now));
  auto caps = json{{"resources", {{"subscribe", true}}}};
  auto next = sent_of(s->on_line(result_line(first.at(0).at("id"), modern_discover_result({"2026-07-28"}, caps)), now));
  EXPECT_TRUE(next.empty());
  auto fx = s->request(3, "resources/subscribe", {{"uri", "file:///a"}}, now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::rejected);
  EXPECT_NE(fx.completed_calls[0].error->message.find("subscriptions/listen"), std::string::npos);
  EXPECT_TRUE(sent_of(fx).empty());
}
