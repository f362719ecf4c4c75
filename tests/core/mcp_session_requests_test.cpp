// mcp_session::request(): resources, prompts/get and completion/complete,
// played against a scripted server.
#include "core/mcp_session.hpp"

#include <gtest/gtest.h>

#include "session_test_support.hpp"

using namespace mcprt;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

using mcprt::test::error_line;
using mcprt::test::result_line;
using time_point = mcp_session::time_point;

std::vector<json> sent_messages(const session_effects& fx) {
  std::vector<json> out;
  for (const auto& s : fx.send)
    out.push_back(json::parse(s));
  return out;
}

std::string updated_line(const std::string& uri) {
  return json{{"jsonrpc", "2.0"}, {"method", "notifications/resources/updated"}, {"params", {{"uri", uri}}}}
      .dump();
}

json everything_caps() {
  return {{"tools", json::object()},
          {"resources", {{"subscribe", true}, {"listChanged", true}}},
          {"prompts", json::object()},
          {"completions", json::object()}};
}

class McpSessionRequests : public ::testing::Test {
protected:
  time_point now = time_point{} + 1000h;

  // A ready session whose server advertised `caps` (tools, no prompts listed).
  std::unique_ptr<mcp_session> ready(json caps = everything_caps(), mcp_session::options opts = {}) {
    auto s = std::make_unique<mcp_session>(std::move(opts));
    auto init = sent_messages(s->start(now)).at(0);
    auto fx = s->on_line(result_line(init["id"], {{"protocolVersion", "2025-11-25"}, {"capabilities", caps}}), now);
    for (auto& m : sent_messages(fx)) {
      if (m.value("method", "") == "tools/list")
        fx = s->on_line(result_line(m["id"], {{"tools", json::array()}}), now);
      else if (m.value("method", "") == "prompts/list")
        fx = s->on_line(result_line(m["id"], {{"prompts", json::array()}}), now);
    }
    EXPECT_EQ(s->state(), session_state::ready);
    return s;
  }

  // The one request `fx` sent.
  static json sent_request(const session_effects& fx) {
    auto sent = sent_messages(fx);
    EXPECT_EQ(sent.size(), 1u);
    return sent.empty() ? json::object() : sent[0];
  }
};

} // namespace

TEST_F(McpSessionRequests, ReadGoesOutAndItsAnswerCompletesLikeACall) {
  auto s = ready();
  auto fx = s->request(7, "resources/read", {{"uri", "demo://a"}}, now);
  auto req = sent_request(fx);
  EXPECT_EQ(req["method"], "resources/read");
  EXPECT_EQ(req["params"], (json{{"uri", "demo://a"}}));
  EXPECT_TRUE(fx.completed_calls.empty());
  EXPECT_EQ(s->in_flight_calls(), 1u);
  json contents = {{"contents", {{{"uri", "demo://a"}, {"text", "hello"}}}}};
  fx = s->on_line(result_line(req["id"], contents), now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].token, 7u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::ok);
  EXPECT_EQ(fx.completed_calls[0].result, contents);
  EXPECT_EQ(s->in_flight_calls(), 0u);
}

TEST_F(McpSessionRequests, PromptGetAndCompletionPassTheirParamsThrough) {
  auto s = ready();
  json get = {{"name", "args-prompt"}, {"arguments", {{"city", "Oslo"}}}};
  auto req = sent_request(s->request(1, "prompts/get", get, now));
  EXPECT_EQ(req["method"], "prompts/get");
  EXPECT_EQ(req["params"], get);
  json complete = {{"ref", {{"type", "ref/prompt"}, {"name", "completable-prompt"}}},
                   {"argument", {{"name", "department"}, {"value", "E"}}},
                   {"context", {{"arguments", {{"x", "y"}}}}}};
  req = sent_request(s->request(2, "completion/complete", complete, now));
  EXPECT_EQ(req["method"], "completion/complete");
  EXPECT_EQ(req["params"], complete);
}

TEST_F(McpSessionRequests, AMethodTheServerDidNotAdvertiseIsRefusedAtOnce) {
  auto s = ready({{"tools", json::object()}, {"resources", json::object()}});
  struct probe {
    const char* method;
    json params;
    const char* names;
  } probes[] = {
      {"prompts/get", {{"name", "p"}}, "prompts"},
      {"completion/complete",
       {{"ref", {{"type", "ref/prompt"}, {"name", "p"}}}, {"argument", {{"name", "a"}, {"value", ""}}}},
       "completions"},
      // resources without subscribe: true
      {"resources/subscribe", {{"uri", "demo://a"}}, "resources.subscribe"},
      {"resources/unsubscribe", {{"uri", "demo://a"}}, "resources.subscribe"},
  };
  for (auto& p : probes) {
    auto fx = s->request(3, p.method, p.params, now);
    EXPECT_TRUE(fx.send.empty()) << p.method;
    ASSERT_EQ(fx.completed_calls.size(), 1u) << p.method;
    auto& r = fx.completed_calls[0];
    EXPECT_EQ(r.outcome, call_outcome::rejected);
    ASSERT_TRUE(r.error);
    EXPECT_EQ(r.error->code, error_method_not_found);
    EXPECT_NE(r.error->message.find(p.names), std::string::npos) << r.error->message;
  }
  // Advertised: goes out.
  EXPECT_EQ(s->request(4, "resources/list", nullptr, now).send.size(), 1u);

  auto none = ready({{"tools", json::object()}});
  auto fx = none->request(5, "resources/read", {{"uri", "demo://a"}}, now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].error->code, error_method_not_found);
  EXPECT_NE(fx.completed_calls[0].error->message.find("did not advertise resources"), std::string::npos);
}

TEST_F(McpSessionRequests, UnknownMethodsBadParamsAndANotReadySessionAreRefused) {
  auto s = ready();
  auto code_of = [&](const std::string& method, json params) {
    auto fx = s->request(9, method, std::move(params), now);
    EXPECT_TRUE(fx.send.empty()) << method;
    EXPECT_EQ(fx.completed_calls.size(), 1u);
    return fx.completed_calls.empty() ? 0 : fx.completed_calls[0].error->code;
  };
  EXPECT_EQ(code_of("tools/call", {{"name", "x"}}), error_method_not_found);
  EXPECT_EQ(code_of("sampling/createMessage", json::object()), error_method_not_found);
  EXPECT_EQ(code_of("resources/read", json::object()), error_invalid_params);
  EXPECT_EQ(code_of("resources/read", {{"uri", 3}}), error_invalid_params);
  EXPECT_EQ(code_of("resources/read", {{"uri", std::string(9000, 'a')}}), error_invalid_params);
  EXPECT_EQ(code_of("resources/read", json::array()), error_invalid_params);
  EXPECT_EQ(code_of("resources/list", {{"cursor", 5}}), error_invalid_params);
  EXPECT_EQ(code_of("prompts/get", {{"name", "p"}, {"arguments", {{"n", 1}}}}), error_invalid_params);
  EXPECT_EQ(code_of("completion/complete", {{"ref", {{"type", "ref/prompt"}}}}), error_invalid_params);
  EXPECT_EQ(s->in_flight_calls(), 0u);

  mcp_session fresh{{}};
  auto fx = fresh.request(1, "resources/list", nullptr, now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].error->code, error_not_ready);
}

TEST_F(McpSessionRequests, AListingFollowsNextCursorAndAnswersEveryItemOnce) {
  auto s = ready();
  auto req = sent_request(s->request(4, "resources/list", nullptr, now));
  EXPECT_FALSE(req.contains("params") && req["params"].contains("cursor"));
  auto fx = s->on_line(result_line(req["id"], {{"resources", {{{"uri", "a"}}, {{"uri", "b"}}}}, {"nextCursor", "p2"}}), now);
  EXPECT_TRUE(fx.completed_calls.empty());
  req = sent_request(fx);
  EXPECT_EQ(req["method"], "resources/list");
  EXPECT_EQ(req["params"], (json{{"cursor", "p2"}}));
  fx = s->on_line(result_line(req["id"], {{"resources", {{{"uri", "c"}}}}}), now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].token, 4u);
  EXPECT_EQ(fx.completed_calls[0].result, (json{{"resources", {{{"uri", "a"}}, {{"uri", "b"}}, {{"uri", "c"}}}}}));
  EXPECT_EQ(s->in_flight_calls(), 0u);

  // Templates gather under their own key, from the caller's cursor.
  req = sent_request(s->request(5, "resources/templates/list", {{"cursor", "t1"}}, now));
  EXPECT_EQ(req["params"], (json{{"cursor", "t1"}}));
  fx = s->on_line(result_line(req["id"], {{"resourceTemplates", {{{"uriTemplate", "x/{id}"}}}}}), now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].result, (json{{"resourceTemplates", {{{"uriTemplate", "x/{id}"}}}}}));
}

TEST_F(McpSessionRequests, AListingStopsAtItsBoundsAndHandsBackTheCursor) {
  mcp_session::options opts;
  opts.max_request_pages = 2;
  auto s = ready(everything_caps(), opts);
  auto req = sent_request(s->request(1, "resources/list", nullptr, now));
  auto fx = s->on_line(result_line(req["id"], {{"resources", {{{"uri", "a"}}}}, {"nextCursor", "p2"}}), now);
  req = sent_request(fx);
  fx = s->on_line(result_line(req["id"], {{"resources", {{{"uri", "b"}}}}, {"nextCursor", "p3"}}), now);
  EXPECT_TRUE(fx.send.empty()) << "a third page was asked for";
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].result, (json{{"resources", {{{"uri", "a"}}, {{"uri", "b"}}}}, {"nextCursor", "p3"}}));

  mcp_session::options few;
  few.max_request_items = 3;
  s = ready(everything_caps(), few);
  req = sent_request(s->request(2, "resources/list", nullptr, now));
  fx = s->on_line(result_line(req["id"], {{"resources", {{{"uri", "a"}}, {{"uri", "b"}}, {{"uri", "c"}}}},
                                          {"nextCursor", "more"}}),
                  now);
  EXPECT_TRUE(fx.send.empty());
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].result["resources"].size(), 3u);
  EXPECT_EQ(fx.completed_calls[0].result["nextCursor"], "more");
}

TEST_F(McpSessionRequests, AMalformedPageFailsTheListingNotTheSession) {
  auto s = ready();
  auto req = sent_request(s->request(1, "resources/list", nullptr, now));
  auto fx = s->on_line(result_line(req["id"], {{"items", json::array()}}), now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::rpc_error);
  EXPECT_NE(fx.completed_calls[0].error->message.find("no 'resources' array"), std::string::npos);
  EXPECT_EQ(s->state(), session_state::ready);
}

TEST_F(McpSessionRequests, AListingHasOneDeadlineAcrossItsPages) {
  mcp_session::options opts;
  opts.call_timeout = 1000ms;
  auto s = ready(everything_caps(), opts);
  auto req = sent_request(s->request(1, "resources/list", nullptr, now));
  auto fx = s->on_line(result_line(req["id"], {{"resources", json::array()}, {"nextCursor", "p2"}}), now + 600ms);
  auto page2 = sent_request(fx);
  EXPECT_EQ(s->next_deadline(), now + 1000ms);
  fx = s->on_tick(now + 1000ms);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::timed_out);
  auto sent = sent_messages(fx);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["method"], "notifications/cancelled");
  EXPECT_EQ(sent[0]["params"]["requestId"], page2["id"]);
  // A late page is an unknown response, not a second completion.
  fx = s->on_line(result_line(page2["id"], {{"resources", json::array()}}), now + 1100ms);
  EXPECT_TRUE(fx.completed_calls.empty());
}

TEST_F(McpSessionRequests, CancelAndErrorsWorkAsForCalls) {
  auto s = ready();
  auto req = sent_request(s->request(3, "resources/list", nullptr, now));
  auto fx = s->on_line(result_line(req["id"], {{"resources", json::array()}, {"nextCursor", "p2"}}), now);
  auto page2 = sent_request(fx);
  fx = s->cancel_call(3, "host gave up");
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::cancelled);
  EXPECT_EQ(sent_messages(fx).at(0)["params"]["requestId"], page2["id"]);

  req = sent_request(s->request(4, "resources/read", {{"uri", "nope"}}, now));
  fx = s->on_line(error_line(req["id"], -32002, "Resource not found"), now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::rpc_error);
  EXPECT_EQ(fx.completed_calls[0].error->code, -32002);
  EXPECT_EQ(fx.completed_calls[0].error->message, "Resource not found");

  // The transport goes: a listing in flight completes as closed.
  sent_request(s->request(5, "resources/templates/list", nullptr, now));
  fx = s->on_transport_closed("gone");
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].token, 5u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::closed);
}

TEST_F(McpSessionRequests, UpdatesReachTheCallerOnlyForSubscribedUris) {
  auto s = ready();
  // Not subscribed: dropped.
  auto fx = s->on_line(updated_line("demo://a"), now);
  EXPECT_TRUE(fx.resources_updated.empty());
  EXPECT_TRUE(fx.empty());

  auto req = sent_request(s->request(1, "resources/subscribe", {{"uri", "demo://a"}}, now));
  EXPECT_EQ(req["method"], "resources/subscribe");
  EXPECT_EQ(s->resource_subscriptions().count("demo://a"), 1u);
  fx = s->on_line(result_line(req["id"], json::object()), now);
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].result, json::object());

  fx = s->on_line(updated_line("demo://a"), now);
  EXPECT_EQ(fx.resources_updated, std::vector<std::string>{"demo://a"});
  EXPECT_FALSE(fx.empty());
  fx = s->on_line(updated_line("demo://other"), now);
  EXPECT_TRUE(fx.resources_updated.empty());

  // A burst in one read is one update.
  auto burst = updated_line("demo://a") + "\n" + updated_line("demo://a") + "\n";
  fx = s->on_bytes(burst.data(), burst.size(), now);
  EXPECT_EQ(fx.resources_updated, std::vector<std::string>{"demo://a"});

  sent_request(s->request(2, "resources/unsubscribe", {{"uri", "demo://a"}}, now));
  EXPECT_TRUE(s->resource_subscriptions().empty());
  fx = s->on_line(updated_line("demo://a"), now);
  EXPECT_TRUE(fx.resources_updated.empty());
}

TEST_F(McpSessionRequests, SubscriptionsAreBounded) {
  mcp_session::options opts;
  opts.max_resource_subscriptions = 2;
  auto s = ready(everything_caps(), opts);
  EXPECT_EQ(s->request(1, "resources/subscribe", {{"uri", "a"}}, now).send.size(), 1u);
  EXPECT_EQ(s->request(2, "resources/subscribe", {{"uri", "b"}}, now).send.size(), 1u);
  // Again for one already there: fine.
  EXPECT_EQ(s->request(3, "resources/subscribe", {{"uri", "a"}}, now).send.size(), 1u);
  auto fx = s->request(4, "resources/subscribe", {{"uri", "c"}}, now);
  EXPECT_TRUE(fx.send.empty());
  ASSERT_EQ(fx.completed_calls.size(), 1u);
  EXPECT_EQ(fx.completed_calls[0].outcome, call_outcome::rejected);
  EXPECT_EQ(s->resource_subscriptions().size(), 2u);
}

TEST_F(McpSessionRequests, ListChangedIsAnEffectWhenResourcesWereAdvertised) {
  auto s = ready();
  auto line = json{{"jsonrpc", "2.0"}, {"method", "notifications/resources/list_changed"}}.dump();
  EXPECT_TRUE(s->on_line(line, now).resources_changed);
  auto bare = ready({{"tools", json::object()}});
  EXPECT_FALSE(bare->on_line(line, now).resources_changed);
}
