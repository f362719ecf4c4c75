// The embeddable runtime end to end: real settings files edited the way
// editors save them, real inotify, real mcprt-test-server processes. Each
// test asserts on process ids which servers restarted, and that no child
// process outlives the runtime. Waits are on events with deadlines.

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
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

using test::server;

class Runtime : public test::runtime_fixture {
protected:
  static void write_raw(const fs::path& p, const std::string& text) {
    std::ofstream out(p, std::ios::trunc);
    out << text;
  }
};

} // namespace

TEST_F(Runtime, RenameSavesRestartOnlyTheChangedServer) {
  save(user_settings(), {{"mcpServers", {{"a", server()}, {"b", server()}}}});
  start();
  auto before = wait_snapshot(connected({"a", "b"}));
  auto from = mark();
  save(user_settings(), {{"mcpServers", {{"a", server({"--tools", "2"})}, {"b", server()}, {"c", server()}}}});
  auto after = wait_snapshot([&](const json& s) {
    return connected({"a", "b", "c"})(s) && pid_of(s, "a") != pid_of(before, "a");
  });
  EXPECT_EQ(pid_of(after, "b"), pid_of(before, "b")) << "b did not change and must keep its process";
  EXPECT_EQ((*find_server(after, "a"))["tools"], 6); // echo, add, sleep, pid + 2
  auto changed = wait_event([](const event& e) { return e.kind == event_kind::settings_changed; }, from);
  ASSERT_TRUE(changed);
  auto finished = wait_event(
    [](const event& e) {
      return e.kind == event_kind::reconcile_finished && !e.data.value["restarted"].empty();
    },
    from);
  ASSERT_TRUE(finished);
  EXPECT_EQ(finished->data.value["restarted"], json({"a"}));
  EXPECT_EQ(finished->data.value["added"], json({"c"}));
  EXPECT_EQ(finished->data.value["kept"], json({"b"}));
}

TEST_F(Runtime, AHalfWrittenSaveKeepsTheLastGoodConfigAndTouchesNoConnection) {
  save(user_settings(), {{"mcpServers", {{"a", server()}}}});
  start();
  auto before = wait_snapshot(connected({"a"}));
  auto from = mark();
  write_raw(user_settings(), "{\"mcpServers\": {\"a\": {\"command\": ");
  auto err = wait_event([](const event& e) { return e.kind == event_kind::settings_error; }, from);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->data.value["path"], user_settings().string());
  EXPECT_GE(err->data.value["line"].get<int>(), 1);
  auto during = rt->snapshot();
  EXPECT_EQ(pid_of(during, "a"), pid_of(before, "a"));
  // The finished save goes through.
  save(user_settings(), {{"mcpServers", {{"a", server()}, {"b", server()}}}});
  auto after = wait_snapshot(connected({"a", "b"}));
  EXPECT_EQ(pid_of(after, "a"), pid_of(before, "a"));
}

TEST_F(Runtime, ASettingsDirectoryCreatedAfterStartIsPickedUp) {
  // The fingerprint key lives in <home>/.mcprt by default; kept elsewhere,
  // the directory does not exist until the user makes it.
  auto o = options();
  o.fingerprint_key_file = dir / "fingerprint.key";
  start(o);
  ASSERT_FALSE(fs::exists(home / ".mcprt"));
  save(user_settings(), {{"mcpServers", {{"late", server()}}}});
  wait_snapshot(connected({"late"}));
}

TEST_F(Runtime, AProjectServerStaysUnspawnedUntilApproved) {
  save(project_file(), {{"mcpServers", {{"p", server()}}}});
  save(user_settings(), {{"mcpServers", {{"a", server()}}}});
  start();
  auto snap = wait_snapshot(connected({"a"}));
  auto p = find_server(snap, "p");
  ASSERT_TRUE(p);
  EXPECT_EQ((*p)["reason"], "pending_approval");
  EXPECT_EQ((*p)["approval"], "pending");
  EXPECT_TRUE((*p)["pid"].is_null());
  EXPECT_EQ(test::child_pids().size(), 1u) << "only a runs";
  auto call = rt->call_tool(session, "p", "echo", {{"text", "hi"}});
  ASSERT_FALSE(call);
  EXPECT_NE(sys->render(call.error()).find("mcprt approve p"), std::string::npos) << sys->render(call.error());
  ASSERT_TRUE(rt->approve("p"));
  auto after = wait_snapshot(connected({"a", "p"}));
  EXPECT_EQ((*find_server(after, "p"))["approval"], "approved");
  // A project server runs sandboxed; a user server as written.
  EXPECT_TRUE((*find_server(after, "p"))["sandbox"].is_object()) << after.dump();
  EXPECT_TRUE((*find_server(after, "a"))["sandbox"].is_null()) << after.dump();
  EXPECT_EQ(pid_of(after, "a"), pid_of(snap, "a"));
  auto ok = rt->call_tool(session, "p", "echo", {{"text", "hi"}});
  ASSERT_TRUE(ok) << sys->render(ok.error());
  EXPECT_NE(ok->dump().find("hi"), std::string::npos) << ok->dump();
}

TEST_F(Runtime, SnapshotHasTheDocumentedShapeAndNoSecrets) {
  auto spec = server();
  spec["env"] = {{"API_KEY", "sekrit-value"}};
  save(user_settings(), {{"mcpServers", {{"a", spec}}}});
  auto o = options();
  o.budget = 4;
  o.mode = budget_mode::warn;
  start(o);
  auto snap = wait_snapshot(connected({"a"}));
  EXPECT_EQ(snap["v"], 1);
  EXPECT_EQ(snap["version"], MCPRT_PROJECT_VERSION);
  EXPECT_EQ(snap["workspace"], ws.string());
  EXPECT_EQ(snap["trusted"], true);
  for (auto key : {"version", "capabilities", "reconcile", "servers", "pool", "budgets"})
    EXPECT_TRUE(snap.contains(key)) << key;
  auto& a = snap["servers"][0];
  for (auto key : {"name", "scope", "transport", "status", "reason", "approval", "fingerprint", "pid", "tools",
                   "prompts", "restarts", "last_error"})
    EXPECT_TRUE(a.contains(key)) << key;
  EXPECT_EQ(snap["pool"]["subprocess_count"], 1);
  ASSERT_EQ(snap["budgets"].size(), 1u);
  EXPECT_EQ(snap["budgets"][0]["scope"], "workspace");
  EXPECT_EQ(snap["budgets"][0]["reserved"], json({"a"}));
  EXPECT_EQ(snap.dump().find("sekrit"), std::string::npos);
}

TEST_F(Runtime, TheKillSwitchHasNoPoolAndDropsItsCapabilities) {
  save(user_settings(), {{"mcpServers", {{"a", server()}}}});
  auto o = options();
  o.pool = false;
  o.budget = 2;
  o.mode = budget_mode::enforce;
  start(o);
  auto snap = wait_snapshot(connected({"a"}));
  EXPECT_TRUE(snap["pool"].is_null());
  for (auto& c : snap["capabilities"]) {
    EXPECT_NE(c, "mcp_workspace_pool");
    EXPECT_NE(c, "mcp_pool_restart");
  }
  ASSERT_EQ(snap["budgets"].size(), 1u);
  EXPECT_EQ(snap["budgets"][0]["scope"], "session");
  auto ok = rt->call_tool(session, "a", "add", {{"a", 2}, {"b", 3}});
  ASSERT_TRUE(ok) << sys->render(ok.error());
}

TEST_F(Runtime, ASessionsOwnServersRunAndShowInTheSnapshot) {
  save(user_settings(), {{"mcpServers", {{"a", server()}}}});
  auto o = options();
  auto r = runtime::start(*sys, o);
  ASSERT_TRUE(r) << sys->render(r.error());
  rt = std::move(*r);
  ASSERT_TRUE(rt->subscribe(sink));
  auto own = parse_server_config("mine", server({"--name-prefix", "mine_"}), config_scope::session).config;
  ASSERT_TRUE(own);
  session = rt->open_session({*own});
  auto snap = wait_snapshot(connected({"a", "mine"}));
  EXPECT_EQ((*find_server(snap, "mine"))["scope"], "session");
  auto ok = rt->call_tool(session, "mine", "mine_echo", {{"text", "own"}});
  ASSERT_TRUE(ok) << sys->render(ok.error());
  auto tools = rt->tools(session, "mine");
  ASSERT_TRUE(tools);
  EXPECT_EQ(tools->size(), 4u); // echo, add, sleep, pid with the prefix
}

TEST_F(Runtime, ACallInASessionThatIsNotOpenSaysUnknownSession) {
  save(user_settings(), {{"mcpServers", {{"a", server()}}}});
  start();
  wait_snapshot(connected({"a"}));
  auto is_unknown_session = [&](const caf::error& e) {
    return e.category() == caf::atom("mcprt") && static_cast<errc>(e.code()) == errc::unknown_session;
  };
  rt->close_session(session);
  for (const std::string& id : {session, std::string("never-opened")}) {
    auto call = rt->call_tool(id, "a", "echo", {{"text", "x"}});
    ASSERT_FALSE(call);
    EXPECT_TRUE(is_unknown_session(call.error())) << sys->render(call.error());
    auto tools = rt->tools(id, "a");
    ASSERT_FALSE(tools);
    EXPECT_TRUE(is_unknown_session(tools.error())) << sys->render(tools.error());
  }
  EXPECT_EQ(to_string(errc::unknown_session), "unknown_session");
}

TEST_F(Runtime, AServerThatCannotStartShowsItsErrorInTheSnapshot) {
  save(user_settings(), {{"mcpServers", {{"a", server()}, {"broken", {{"command", "/nonexistent/mcp-server"}}}}}});
  start();
  auto snap = wait_snapshot([](const json& s) {
    auto b = find_server(s, "broken");
    return connected({"a"})(s) && b && (*b)["status"] == "error";
  });
  auto& b = *find_server(snap, "broken");
  EXPECT_NE(b["last_error"].get<std::string>().find("/nonexistent/mcp-server"), std::string::npos) << b.dump();
  EXPECT_TRUE(b["reason"].is_null());
}

TEST_F(Runtime, ShutdownLeavesNoChildProcess) {
  save(user_settings(), {{"mcpServers", {{"a", server()}, {"b", server()}}}});
  start();
  wait_snapshot(connected({"a", "b"}));
  EXPECT_EQ(test::child_pids().size(), 2u);
  auto drained = rt->shutdown();
  EXPECT_TRUE(drained.errors.empty());
  EXPECT_TRUE(test::child_pids().empty());
}

// A server that ignores stdin's end and SIGTERM keeps its connection
// stopping for seconds. Shutdown must not leave that connection behind: it
// would wait forever for an exit the torn-down reactor never reports, or
// touch that reactor after it was gone. (The race itself, a stop sent a
// moment before shutdown, is what bench.hot_reload_latency_smoke hit in CI;
// the pool's part of the fix is pinned by the actor tests
// AConnectionStillStoppingEndsWithThePool.)
TEST_F(Runtime, ShutdownEndsAConnectionThatIsStillStoppingItsServer) {
  save(user_settings(), {{"mcpServers", {{"a", server({"--ignore-sigterm"})}}}});
  start();
  auto before = wait_snapshot(connected({"a"}));
  // A changed config replaces the connection; the pool stops the old one,
  // which takes its 4 s of stdin and SIGTERM grace.
  save(user_settings(), {{"mcpServers", {{"a", server({"--ignore-sigterm", "--name-prefix", "v2_"})}}}});
  // The old entry has left the pool; its connection is still stopping.
  wait_snapshot([&](const json& s) {
    return connected({"a"})(s) && pid_of(s, "a") != pid_of(before, "a") && s["pool"]["entries"].size() == 1;
  });
  EXPECT_EQ(test::child_pids().size(), 2u) << "the old server is still being stopped";
  auto running_before = sys->registry().running();
  rt->shutdown();
  EXPECT_TRUE(test::child_pids().empty());
  // Only the test's own event sink is left (the rest end as their exit
  // messages arrive).
  std::promise<void> settled;
  auto done = settled.get_future();
  std::thread waiter([&] {
    sys->registry().await_running_count_equal(1);
    settled.set_value();
  });
  if (done.wait_for(20s) == std::future_status::ready) {
    waiter.join();
  } else {
    ADD_FAILURE() << sys->registry().running() << " actors still running 20 s after shutdown (" << running_before
                  << " before); the actor system will not end";
    waiter.detach();
  }
}

TEST_F(Runtime, ShutdownTakesEveryDescendantOfEveryServerAndTheReaper) {
  auto pid_file = dir / "a.pids";
  save(user_settings(), {{"mcpServers",
                          {{"a", server({"--pid-file", pid_file.string(), "--grandchild-in-group",
                                         "--grandchild-setsid", "--grandchild-daemon"})}}}});
  start();
  wait_snapshot(connected({"a"}));
  auto all = test::read_pid_file(pid_file, {"server", "group", "setsid", "daemon"});
  ASSERT_EQ(all.size(), 4u);
  for (auto& p : all)
    ASSERT_TRUE(test::still_there(p)) << p.kind;
  ASSERT_EQ(test::reaper_pids().size(), 1u);
  rt->shutdown();
  // Not "soon": shutdown() returns once the reaper has killed and reaped
  // them all, and has been reaped itself.
  for (auto& p : all)
    EXPECT_FALSE(test::still_there(p)) << p.kind << " " << p.pid << " outlived the runtime's shutdown";
  EXPECT_TRUE(test::reaper_pids().empty());
  for (auto& p : all)
    if (test::still_there(p)) ::kill(p.pid, SIGKILL);
}

TEST_F(Runtime, TheEmbedExampleRunsAgainstTheBundledWorkspace) {
  // A copy: the example must not write approvals into the source tree.
  fs::copy(fs::path(MCPRT_SOURCE_DIR) / "examples", dir / "examples", fs::copy_options::recursive);
  auto out_file = dir / "embed.out";
  auto bin_dir = fs::path(MCPRT_TEST_SERVER).parent_path().string();
  std::string cmd = "PATH='" + bin_dir + "':\"$PATH\" '" + std::string(MCPRT_EMBED_BIN) + "' --workspace '"
                    + (dir / "examples/workspace").string() + "' --home '" + (dir / "examples/home").string()
                    + "' --wait-connected 2 --call echo echo '{\"text\":\"from the host\"}' > '"
                    + out_file.string() + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream in(out_file);
  std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << output;
  EXPECT_NE(output.find("client_update"), std::string::npos) << output;
  EXPECT_NE(output.find("pending_approval_changed"), std::string::npos) << output;
  EXPECT_NE(output.find("from the host"), std::string::npos) << output;
  EXPECT_NE(output.find("\"reason\":\"excluded\""), std::string::npos) << output;
  EXPECT_EQ(output.find("not-a-real-secret"), std::string::npos) << output;
}

TEST(RuntimeEnvironment, TheKillSwitchAndTheBudgetComeFromTheEnvironment) {
  ::setenv("MCPRT_NO_POOL", "1", 1);
  ::setenv("MCPRT_BUDGET", "3", 1);
  ::unsetenv("MCPRT_BUDGET_MODE");
  runtime_options o;
  EXPECT_TRUE(apply_environment(o).empty());
  EXPECT_FALSE(o.pool);
  EXPECT_EQ(o.budget, std::optional<std::size_t>{3});
  EXPECT_EQ(o.mode, budget_mode::warn);
  ::setenv("MCPRT_BUDGET", "0x10", 1);
  runtime_options bad;
  auto errors = apply_environment(bad);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].find("MCPRT_BUDGET"), std::string::npos) << errors[0];
  EXPECT_TRUE(bad.pool);
  EXPECT_FALSE(bad.budget);
  ::unsetenv("MCPRT_NO_POOL");
  ::unsetenv("MCPRT_BUDGET");
}

// -- what servers may ask of the client -----------------------------

namespace {

// The reply mcprt sent to the server's request, as the test server's
// ask_client tool hands it back.
json client_reply(runtime& rt, const std::string& session, const std::string& server_name,
                  const std::string& method, const json& params = json::object()) {
  auto r = rt.call_tool(session, server_name, "ask_client", {{"method", method}, {"params", params}}, 30s);
  if (!r) return {{"call_failed", true}};
  auto& content = (*r)["content"];
  if (!content.is_array() || content.empty() || (*r).value("isError", false)) return {{"tool_failed", *r}};
  return json::parse(content[0]["text"].get<std::string>(), nullptr, false);
}

json sep1034_request() {
  return json::parse(R"({"message":"Test client default value handling - please accept with defaults",
    "requestedSchema":{"type":"object","properties":{
      "name":{"type":"string","default":"John Doe"},
      "age":{"type":"integer","default":30},
      "score":{"type":"number","default":95.5},
      "status":{"type":"string","enum":["active","inactive","pending"],"default":"active"},
      "verified":{"type":"boolean","default":true}},"required":[]}})");
}

} // namespace

TEST_F(Runtime, ServersGetTheWorkspaceAsTheirRootAndElicitationDeclinedByDefault) {
  save(user_settings(), {{"mcpServers", {{"a", server({"--client-tool"})}}}});
  start();
  wait_snapshot(connected({"a"}));

  auto roots = client_reply(*rt, session, "a", "roots/list");
  auto canonical = fs::canonical(ws);
  ASSERT_TRUE(roots.contains("result")) << roots.dump();
  EXPECT_EQ(roots["result"], (json{{"roots", {{{"uri", "file://" + canonical.string()},
                                               {"name", canonical.filename().string()}}}}}));

  auto elicit = client_reply(*rt, session, "a", "elicitation/create", sep1034_request());
  EXPECT_EQ(elicit["result"], (json{{"action", "decline"}})) << elicit.dump();

  // Nobody can sample: not offered, so the server is told at once.
  auto sample = client_reply(*rt, session, "a", "sampling/createMessage",
                             {{"messages", json::array()}, {"maxTokens", 5}});
  EXPECT_EQ(sample["error"]["code"], -32601) << sample.dump();
}

TEST_F(Runtime, ElicitationPolicyComesFromTheRuntimeAndEachServersSettings) {
  save(user_settings(), {{"mcpServers",
                          {{"a", server({"--client-tool"})},
                           {"d", [] {
                              auto s = server({"--client-tool"});
                              s["elicitation"] = "decline";
                              return s;
                            }()}}}});
  auto o = options();
  o.elicitation = elicitation_policy::accept_defaults;
  start(o);
  wait_snapshot(connected({"a", "d"}));

  auto accepted = client_reply(*rt, session, "a", "elicitation/create", sep1034_request());
  EXPECT_EQ(accepted["result"], json::parse(R"({"action":"accept","content":{"name":"John Doe","age":30,
      "score":95.5,"status":"active","verified":true}})")) << accepted.dump();
  auto declined = client_reply(*rt, session, "d", "elicitation/create", sep1034_request());
  EXPECT_EQ(declined["result"], (json{{"action", "decline"}})) << declined.dump();
}

TEST_F(Runtime, ChangingAServersElicitationKeyReplacesItsConnection) {
  save(user_settings(), {{"mcpServers", {{"a", server({"--client-tool"})}}}});
  start();
  auto before = wait_snapshot(connected({"a"}));
  EXPECT_EQ(client_reply(*rt, session, "a", "elicitation/create", sep1034_request())["result"]["action"],
            "decline");

  auto changed = server({"--client-tool"});
  changed["elicitation"] = "accept-defaults";
  save(user_settings(), {{"mcpServers", {{"a", changed}}}});
  auto old_pid = pid_of(before, "a");
  wait_snapshot([&](const json& snap) {
    return connected({"a"})(snap) && pid_of(snap, "a") != old_pid;
  });
  auto after = client_reply(*rt, session, "a", "elicitation/create", sep1034_request());
  EXPECT_EQ(after["result"]["action"], "accept") << after.dump();
  EXPECT_EQ(after["result"]["content"]["name"], "John Doe");
}

TEST_F(Runtime, ABadElicitationValueIsASettingsErrorThatKeepsTheLastGoodConfig) {
  save(user_settings(), {{"mcpServers", {{"a", server({"--client-tool"})}}}});
  start();
  auto before = wait_snapshot(connected({"a"}));
  auto from = mark();
  auto bad = server({"--client-tool"});
  bad["elicitation"] = "sometimes";
  save(user_settings(), {{"mcpServers", {{"a", bad}}}});
  auto err = wait_event([](const event& e) { return e.kind == event_kind::settings_error; }, from);
  ASSERT_TRUE(err);
  auto text = err->data.value.dump();
  EXPECT_NE(text.find("mcpServers.a.elicitation"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(expected \"decline\" or \"accept-defaults\")"), std::string::npos) << text;
  EXPECT_EQ(text.find("sometimes"), std::string::npos) << text;
  EXPECT_EQ(pid_of(rt->snapshot(), "a"), pid_of(before, "a"));
}
