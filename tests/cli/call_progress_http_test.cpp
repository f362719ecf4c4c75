// Black-box: progress and cancel of a tool call over the daemon's HTTP API
//, with a real test server as the child: a call under a
// client-chosen call_id shows its progress on the SSE stream under that id,
// the cancel route cancels it, and the call's own response is 409
// "cancelled".

#include <future>

#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

using namespace std::chrono_literals;

class call_progress_http_test : public graceful_daemon_test {};

TEST_F(call_progress_http_test, progress_goes_to_the_event_stream_and_the_cancel_route_cancels_the_call) {
  write_file(user_settings(), json{{"mcpServers", {{"srv", test_server_config({})}}}}.dump(2));
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("srv"));
  sse_stream events(port_);
  ASSERT_EQ(events.status(), 200);

  auto call = std::async(std::launch::async, [this] {
    return post("/workspace/mcp/tools/call",
                R"({"server": "srv", "tool": "sleep", "arguments": {"ms": 30000}, "call_id": "job-42"})");
  });
  auto step = events.wait_for("call_progress", [](const json& j) { return j.value("call_id", "") == "job-42"; }, 30s);
  ASSERT_TRUE(step) << "no call_progress event for job-42";
  auto j = step->j();
  EXPECT_EQ(j["server"], "srv") << j.dump();
  EXPECT_EQ(j["tool"], "sleep") << j.dump();
  EXPECT_EQ(j["progress"], 1) << j.dump();
  EXPECT_EQ(j["total"], 2) << j.dump();
  EXPECT_EQ(j["message"], "sleeping") << j.dump();

  auto unknown = post("/workspace/mcp/calls/nobody/cancel", "{}");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404) << unknown->body;
  EXPECT_EQ(body_of(unknown)["error"], "unknown_call") << unknown->body;

  auto t0 = clock_type::now();
  auto cancel = post("/workspace/mcp/calls/job-42/cancel", "{}");
  ASSERT_TRUE(cancel);
  EXPECT_EQ(cancel->status, 200) << cancel->body;
  EXPECT_EQ(body_of(cancel)["cancelled"], true) << cancel->body;
  ASSERT_EQ(call.wait_for(10s), std::future_status::ready) << "the cancelled call did not answer";
  auto r = call.get();
  ASSERT_TRUE(r);
  EXPECT_LT(clock_type::now() - t0, 10s);
  EXPECT_EQ(r->status, 409) << r->body;
  EXPECT_TRUE(is_json_error(r));
  EXPECT_EQ(body_of(r)["error"], "cancelled") << r->body;
  EXPECT_EQ(body_of(r)["call_id"], "job-42") << r->body;
  EXPECT_EQ(r->get_header_value("Mcprt-Call-Id"), "job-42");

  // Gone once answered; the server goes on serving.
  auto again = post("/workspace/mcp/calls/job-42/cancel", "{}");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 404) << again->body;
  auto echo = post("/workspace/mcp/tools/call", R"({"server": "srv", "tool": "echo", "arguments": {"text": "hi"}})");
  ASSERT_TRUE(echo);
  ASSERT_EQ(echo->status, 200) << echo->body;
  // A call without a call_id gets one from the daemon.
  EXPECT_EQ(echo->get_header_value("Mcprt-Call-Id").rfind("http-", 0), 0u) << echo->get_header_value("Mcprt-Call-Id");
}

TEST_F(call_progress_http_test, a_bad_call_id_is_refused) {
  write_file(user_settings(), json{{"mcpServers", {{"srv", test_server_config({})}}}}.dump(2));
  ASSERT_TRUE(start());
  for (auto body : {R"({"server": "srv", "tool": "echo", "call_id": 7})",
                    R"({"server": "srv", "tool": "echo", "call_id": "with space"})",
                    R"({"server": "srv", "tool": "echo", "call_id": ""})"}) {
    auto r = post("/workspace/mcp/tools/call", body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body << " -> " << r->body;
    EXPECT_EQ(body_of(r)["error"], "bad_request") << r->body;
  }
  std::string long_id(129, 'a');
  auto r = post("/workspace/mcp/calls/" + long_id + "/cancel", "{}");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  // The route keeps the API's guards: a foreign Origin is refused.
  httplib::Headers foreign{{"Origin", "http://evil.example"}};
  auto refused = client().Post("/workspace/mcp/calls/x/cancel", foreign, "{}", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403) << refused->body;
}

} // namespace
} // namespace mcprt_cli_test
