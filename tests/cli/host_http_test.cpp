// Black-box: the daemon as host. A real `mcprt serve
// --elicitation ask --sampling ask` with our test server (`--client-tool`:
// its tool ask_client sends the client any request during a call and
// returns the client's whole reply), the event stream and the answers over
// real HTTP on loopback.

#include <future>

#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

using namespace std::chrono_literals;

class host_http_test : public graceful_daemon_test {
protected:
  /// The daemon asks for both kinds; `timeout_ms` stays under the test
  /// server's own 5 s wait for the reply.
  bool start_asking(const std::string& timeout_ms = "4000") {
    write_file(user_settings(), json{{"mcpServers", {{"asker", test_server_config({"--client-tool"})}}}}.dump(2));
    if (!start({"--elicitation", "ask", "--sampling", "ask", "--host-request-timeout", timeout_ms})) return false;
    return connected("asker");
  }

  /// ask_client(method, params) on its own thread: the call returns once
  /// the request is answered. The future holds the reply the server got.
  std::future<httplib::Result> ask_client(const std::string& method, const json& params,
                                          const std::string& call_id = "") {
    auto call = json{{"server", "asker"}, {"tool", "ask_client"}, {"arguments", {{"method", method}, {"params", params}}}};
    if (!call_id.empty()) call["call_id"] = call_id;
    auto body = call.dump();
    return std::async(std::launch::async, [this, body] { return post("/workspace/mcp/tools/call", body); });
  }

  /// The JSON-RPC reply the server got, from the tool's result text.
  static json reply_of(std::future<httplib::Result>& call) {
    if (call.wait_for(30s) != std::future_status::ready) return json{{"failure", "no tool result within 30 s"}};
    auto r = call.get();
    if (!r || r->status != 200) return json{{"failure", r ? r->body : std::string("no response")}};
    auto result = json::parse(r->body, nullptr, false);
    if (!result.is_object() || !result.contains("content") || result["content"].empty()) return result;
    return json::parse(result["content"][0].value("text", ""), nullptr, false);
  }

  static json elicit_params() {
    return {{"message", "Your name?"},
            {"requestedSchema", {{"type", "object"}, {"properties", {{"name", {{"type", "string"}}}}}}}};
  }

  static json sampling_params() {
    return {{"messages", json::array({{{"role", "user"}, {"content", {{"type", "text"}, {"text", "Say hi"}}}}})},
            {"maxTokens", 16}};
  }

  /// The `host_request_ended` event of `id`.
  static std::optional<sse_event> ended(sse_stream& events, const std::string& id) {
    return events.wait_for("host_request_ended", [&](const json& j) { return j.value("id", "") == id; }, 20s);
  }
};

TEST_F(host_http_test, an_elicitation_is_announced_and_answered_over_http) {
  ASSERT_TRUE(start_asking());
  sse_stream events(port_);
  ASSERT_EQ(events.status(), 200);
  auto call = ask_client("elicitation/create", elicit_params(), "form-call-1");

  auto asked = events.wait_for("elicitation_requested", {}, 20s);
  ASSERT_TRUE(asked) << daemon_->err();
  auto ev = asked->j();
  auto id = ev.value("id", "");
  ASSERT_GE(id.size(), 32u) << ev.dump(); // fresh and unguessable, not a counter
  EXPECT_EQ(ev["server"], "asker") << ev.dump();
  EXPECT_EQ(ev["params"]["message"], "Your name?") << ev.dump();
  EXPECT_EQ(ev["params"]["requestedSchema"]["properties"]["name"]["type"], "string") << ev.dump();
  EXPECT_EQ(ev["call"]["tool"], "ask_client") << ev.dump();
  // The call's own id: what the cancel route and progress name.
  EXPECT_EQ(ev["call"]["call_id"], "form-call-1") << ev.dump();
  EXPECT_EQ(snapshot().value("pending_host_requests", -1), 1);

  // Not an elicitation request's id on the sampling route, nor a bad answer.
  auto r = post("/workspace/mcp/sampling/" + id, R"({"error": {"message": "no"}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  r = post("/workspace/mcp/elicitations/" + id, R"({"action": "maybe"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_TRUE(is_json_error(r));
  r = post("/workspace/mcp/elicitations/" + id, R"({"action": "accept", "content": {"name": {"deep": 1}}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;

  r = post("/workspace/mcp/elicitations/" + id, R"({"action": "accept", "content": {"name": "Ada"}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  auto reply = reply_of(call);
  EXPECT_EQ(reply["result"], (json{{"action", "accept"}, {"content", {{"name", "Ada"}}}})) << reply.dump();

  auto end = ended(events, id);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->j()["outcome"], "answered");
  EXPECT_EQ(end->j()["request"], "elicitation");
  EXPECT_EQ(snapshot().value("pending_host_requests", -1), 0);

  // Answered once: a second answer is a conflict; an id never issued is unknown.
  r = post("/workspace/mcp/elicitations/" + id, R"({"action": "decline"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409) << r->body;
  EXPECT_TRUE(is_json_error(r));
  r = post("/workspace/mcp/elicitations/00112233445566778899aabbccddeeff", R"({"action": "decline"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_TRUE(is_json_error(r));
}

TEST_F(host_http_test, an_unanswered_elicitation_is_declined_after_the_timeout) {
  ASSERT_TRUE(start_asking("300"));
  sse_stream events(port_);
  ASSERT_EQ(events.status(), 200);
  auto call = ask_client("elicitation/create", elicit_params());
  auto asked = events.wait_for("elicitation_requested", {}, 20s);
  ASSERT_TRUE(asked) << daemon_->err();
  auto id = asked->j().value("id", "");

  auto reply = reply_of(call);
  EXPECT_EQ(reply["result"], (json{{"action", "decline"}})) << reply.dump();
  auto end = ended(events, id);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->j()["outcome"], "timed_out");
  auto r = post("/workspace/mcp/elicitations/" + id, R"({"action": "accept", "content": {}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409) << r->body;
}

TEST_F(host_http_test, sampling_is_announced_and_answered_or_refused_over_http) {
  ASSERT_TRUE(start_asking());
  sse_stream events(port_);
  ASSERT_EQ(events.status(), 200);

  auto call = ask_client("sampling/createMessage", sampling_params());
  auto asked = events.wait_for("sampling_requested", {}, 20s);
  ASSERT_TRUE(asked) << daemon_->err();
  auto ev = asked->j();
  auto id = ev.value("id", "");
  EXPECT_EQ(ev["server"], "asker");
  EXPECT_EQ(ev["params"]["maxTokens"], 16) << ev.dump();
  EXPECT_EQ(ev["params"]["messages"][0]["content"]["text"], "Say hi") << ev.dump();
  auto r = post("/workspace/mcp/sampling/" + id, R"({"role": "assistant", "content": "hi"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body; // no model, content not an object
  r = post("/workspace/mcp/sampling/" + id,
           R"({"role": "assistant", "content": {"type": "text", "text": "hi from the host"}, "model": "test-model"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  auto reply = reply_of(call);
  EXPECT_EQ(reply["result"]["content"]["text"], "hi from the host") << reply.dump();
  EXPECT_EQ(reply["result"]["model"], "test-model") << reply.dump();

  // A refusal reaches the server as a JSON-RPC error.
  call = ask_client("sampling/createMessage", sampling_params());
  asked = events.wait_for("sampling_requested", {}, 20s);
  ASSERT_TRUE(asked);
  id = asked->j().value("id", "");
  r = post("/workspace/mcp/sampling/" + id, R"({"error": {"message": "not today"}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  reply = reply_of(call);
  EXPECT_EQ(reply["error"]["message"], "not today") << reply.dump();
  r = post("/workspace/mcp/sampling/" + id, R"({"error": {"message": "again"}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409) << r->body;
}

TEST_F(host_http_test, answers_pass_the_same_host_and_token_checks_as_other_posts) {
  auto token_file = home_ / "token";
  write_file(token_file, "s3cret-token-8d41c7e09b2a-for-host-answers\n");
  ::chmod(token_file.c_str(), 0600);
  write_file(user_settings(), json{{"mcpServers", {{"asker", test_server_config({"--client-tool"})}}}}.dump(2));
  ASSERT_TRUE(start({"--elicitation", "ask", "--token-file", token_file.string()}));
  auto body = std::string(R"({"action": "decline"})");
  auto r = post("/workspace/mcp/elicitations/00112233445566778899aabbccddeeff", body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401) << r->body;
  r = post("/workspace/mcp/elicitations/00112233445566778899aabbccddeeff", body, "s3cret-token-8d41c7e09b2a-for-host-answers");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  auto raw = raw_request(port_, "POST /workspace/mcp/elicitations/00112233445566778899aabbccddeeff HTTP/1.1\r\n"
                                "Host: evil.example\r\nAuthorization: Bearer s3cret-token-8d41c7e09b2a-for-host-answers\r\n"
                                "Content-Type: application/json\r\nContent-Length: "
                                  + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  EXPECT_GE(raw.status, 400) << raw.head;
  EXPECT_NE(raw.status, 404) << raw.head;
}

TEST_F(host_http_test, a_waiting_request_is_declined_when_the_daemon_stops) {
  ASSERT_TRUE(start_asking());
  sse_stream events(port_);
  ASSERT_EQ(events.status(), 200);
  auto call = ask_client("elicitation/create", elicit_params());
  auto asked = events.wait_for("elicitation_requested", {}, 20s);
  ASSERT_TRUE(asked) << daemon_->err();
  auto id = asked->j().value("id", "");
  // The stop answers it (the daemon says so), well before its 4 s timeout;
  // it is not merely dropped with the connection.
  daemon_->signal(SIGTERM);
  EXPECT_TRUE(daemon_->err_contains("elicitation request " + id + " declined: the daemon stops", 3s)) << daemon_->err();
  // The call waiting on it ends too (503: the daemon stops), and so does the daemon.
  EXPECT_EQ(call.wait_for(20s), std::future_status::ready);
  EXPECT_TRUE(daemon_->wait_exit(30s));
  call.wait_for(30s);
}

// -- GET /workspace/mcp/{server}/prompts (prompts/list, every page) -----------------------

TEST_F(host_http_test, prompts_are_listed_over_http_every_page_gathered) {
  write_file(user_settings(), json{{"mcpServers",
                                    {{"lister", test_server_config({"--prompts", "5", "--page-size", "2"})},
                                     {"plain", test_server_config({"--tools", "1"})}}}}
                                .dump(2));
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("lister"));
  auto r = get("/workspace/mcp/lister/prompts");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto prompts = body_of(r)["prompts"];
  ASSERT_TRUE(prompts.is_array()) << r->body;
  ASSERT_EQ(prompts.size(), 5u) << r->body; // three pages of at most 2
  EXPECT_EQ(prompts[0]["name"], "prompt_1") << r->body;
  EXPECT_EQ(prompts[4]["name"], "prompt_5") << r->body;
  EXPECT_FALSE(body_of(r).contains("nextCursor")) << r->body;
  ASSERT_TRUE(connected("plain"));
  r = get("/workspace/mcp/plain/prompts");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 501) << r->body;
  r = get("/workspace/mcp/nobody/prompts");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  r = post("/workspace/mcp/lister/prompts", "{}");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405) << r->body;
}

} // namespace
} // namespace mcprt_cli_test
