// The gating actor and the per-session reconciler on CAF's test coordinator,
// with the real pool, budget and bus and fake connections: one test per item
// of the seed's verification list that concerns actors (4–8, 11–16) and the
// approval matrix of Part D/E. Settings updates are injected as the watcher
// would send them; the watcher itself is tested in watcher_test.cpp.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "actor_test_support.hpp"
#include "actors/budget.hpp"
#include "actors/event_bus.hpp"
#include "actors/gating.hpp"
#include "actors/reconciler.hpp"
#include "pool/private_pool.hpp"
#include "actors/watcher.hpp"
#include "fake_connection.hpp"
#include "messages/hot_reload.hpp"

using namespace mcprt;
using namespace mcprt::testing;
using namespace std::chrono_literals;
using nlohmann::json;
using names = std::vector<std::string>;

namespace {

namespace fs = std::filesystem;

class Reload : public actor_test {
protected:
  std::shared_ptr<fake_world> world = std::make_shared<fake_world>();
  fs::path dir;
  event_bus_actor bus;
  budget_actor budget;
  pool_actor pool;
  gating_actor gating;
  reconciler_actor session;
  uint64_t batch = 0;
  json user = json::object(), project = json::object(), workspace = json::object();

  void SetUp() override {
    dir = fs::temp_directory_path() / ("mcprt-reload-" + std::to_string(::getpid()) + "-"
                                       + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir / "ws");
    bus = track(spawn_event_bus(sys));
    ask<uint64_t>(bus, atom::subscribe_v, self_sink(), std::vector<event_kind>{});
  }

  void TearDown() override {
    for (auto& s : world->spawns)
      caf::anon_send_exit(s.conn, caf::exit_reason::user_shutdown);
    actor_test::TearDown();
    fs::remove_all(dir);
  }

  struct setup {
    bool pool = true;
    std::optional<std::size_t> budget;
    budget_mode mode = budget_mode::off;
    std::optional<std::vector<std::string>> launch_bound;
    bool trusted = true;
    std::vector<server_config> session_servers;
    bool start = true;
  };

  /// A setup with some fields changed: `with([](setup& s) { s.trusted = false; })`.
  template <class F>
  static setup with(F change) {
    setup s;
    change(s);
    return s;
  }

  void start(setup s) {
    if (s.mode != budget_mode::off)
      budget = track(spawn_budget(sys, s.budget, s.mode, s.pool ? "workspace" : "session", bus));
    reconciler_options ro;
    ro.session = "s1";
    ro.pool_session = 1;
    ro.bus = bus;
    ro.budget = budget;
    if (s.pool) {
      pool_options po;
      po.table.drain_delay = 1s;
      pool = track(spawn_pool(sys, fake_factory(world), budget, bus, po));
      ro.pool = pool;
    } else {
      pool = track(spawn_private_pool(sys, fake_factory(world), budget));
      ro.pool = pool;
    }
    gating_options go;
    go.workspace.workspace = dir / "ws";
    go.workspace.home = dir;
    go.workspace.launch_bound = s.launch_bound;
    go.workspace.trusted = s.trusted;
    go.approvals_file = dir / "approvals.json";
    gating = track(spawn_gating(sys, go, bus));
    session = track(spawn_reconciler(sys, ro));
    push(true); // the watcher's first reading
    self->send(gating, atom::attach_v, session, s.session_servers);
    if (s.start) self->send(gating, atom::start_v);
    sched.run();
  }

  /// Sends the current documents as one watcher batch.
  void push(bool forced = false) {
    settings_update u;
    u.batch = batch++;
    u.forced = forced;
    auto file = [&](const char* scope, fs::path p, const json& content) {
      u.files.push_back({p.string(), scope, !content.empty(), json_value{content}});
    };
    file("user", dir / ".mcprt/settings.json", user);
    file("project", dir / "ws/.mcp.json", project);
    file("workspace", dir / "ws/.mcprt/settings.json", workspace);
    self->send(gating, u);
    sched.run();
  }

  static json stdio(const std::string& mode = "ok", names args = {}, names tools = {"t1", "t2"}) {
    return {{"command", "fake-server"}, {"args", args}, {"fake", mode}, {"tools", tools}};
  }

  static server_config config(const std::string& name, json spec, config_scope scope = config_scope::session) {
    auto r = parse_server_config(name, spec, scope, {});
    EXPECT_TRUE(r.config);
    return *r.config;
  }

  std::vector<event> events(std::optional<event_kind> kind = std::nullopt) {
    sched.run();
    auto all = drain<event>();
    if (!kind) return all;
    std::vector<event> out;
    for (auto& e : all)
      if (e.kind == *kind) out.push_back(e);
    return out;
  }

  std::size_t spawns_of(const std::string& name) const {
    return static_cast<std::size_t>(std::count_if(world->spawns.begin(), world->spawns.end(),
                                                  [&](const auto& s) { return s.cfg.server.name == name; }));
  }

  std::size_t stops_of(const std::string& name) const {
    std::size_t n = 0;
    for (auto& [id, gen] : world->stopped)
      n += id.rfind(name + "::", 0) == 0 ? 1 : 0;
    return n;
  }

  session_snapshot snap() { return ask<session_snapshot>(session, atom::snapshot_v).value_or(session_snapshot{}); }

  names live_names() {
    names out;
    for (auto& s : snap().servers)
      out.push_back(s.name);
    return out;
  }

  void advance(caf::timespan d) {
    sched.clock().advance_time(d);
    sched.run();
  }

  static names strings(const json& j) { return j.get<names>(); }

  /// The reconcile_finished events since the last call.
  std::vector<json> finished() {
    std::vector<json> out;
    for (auto& e : events(event_kind::reconcile_finished))
      out.push_back(e.data.value);
    return out;
  }

  /// Why a call of `tool` cannot go to `server`: the session's answer to
  /// the broker's lookup of its connection.
  caf::error call_error(const std::string& server, const std::string& tool = "t1") {
    auto rh = self->request(session, caf::infinite, atom::lookup_v, server, tool);
    sched.run();
    caf::error out;
    rh.receive([](connection_actor&) {}, [&](caf::error& e) { out = e; });
    return out;
  }
};

} // namespace

// -- start -------------------------------------------------------------------------------

TEST_F(Reload, AReconcileBeforeStartIsANoOp) {
  user["mcpServers"]["a"] = stdio();
  start(with([](setup& s) { s.start = false; }));
  self->send(session, atom::reconcile_v);
  push(true);
  EXPECT_TRUE(events(event_kind::reconcile_started).empty());
  EXPECT_EQ(world->spawns.size(), 0u);
  self->send(gating, atom::start_v);
  auto f = finished();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(strings(f[0]["added"]), names{"a"});
}

// -- item 4: servers change → reconcile with the assembled map incl. top tier --------

TEST_F(Reload, AServerEditReconcilesTheAssembledMapIncludingTheTopTier) {
  user["mcpServers"]["a"] = stdio();
  start(with([](setup& s) { s.session_servers = {config("top", stdio())}; }));
  EXPECT_EQ(live_names(), (names{"a", "top"}));
  events();
  user["mcpServers"]["b"] = stdio();
  push();
  auto f = finished();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(strings(f[0]["added"]), names{"b"});
  EXPECT_EQ(strings(f[0]["kept"]), (names{"a", "top"}));
  EXPECT_EQ(live_names(), (names{"a", "b", "top"}));
  // The session's own server wins over a settings server of the same name.
  user["mcpServers"]["top"] = stdio("ok", {"--other"});
  push();
  EXPECT_EQ(spawns_of("top"), 1u);
}

// -- item 5: a gating-only edit still reconciles, with the new lists ---------------------

TEST_F(Reload, AGatingOnlyEditReconcilesWithTheNewListsInPlace) {
  user["mcpServers"]["a"] = stdio();
  user["mcpServers"]["b"] = stdio();
  start({});
  events();
  user["mcp"]["excluded"] = {"a"};
  push();
  auto f = finished();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(strings(f[0]["removed"]), names{"a"});
  EXPECT_EQ(live_names(), names{"b"});
  auto err = call_error("a");
  EXPECT_TRUE(is(err, errc::unavailable)) << sys.render(err);
  EXPECT_NE(sys.render(err).find("excluded"), std::string::npos) << sys.render(err);
}

// -- item 6: an unrelated edit does nothing ------------------------------------------------

TEST_F(Reload, AnUnrelatedEditDoesNotReconcile) {
  user["mcpServers"]["a"] = stdio();
  start({});
  events();
  user["theme"] = "dark";
  push();
  EXPECT_TRUE(events(event_kind::reconcile_started).empty());
  EXPECT_EQ(spawns_of("a"), 1u);
}

// -- item 7: two changes during a pass → exactly one more pass --------------------------

TEST_F(Reload, TwoChangesDuringAPassGiveExactlyOneMorePass) {
  user["mcpServers"]["slow"] = stdio("hang");
  start({});
  ASSERT_EQ(events(event_kind::reconcile_started).size(), 1u); // in progress: slow hangs
  user["mcpServers"]["b"] = stdio();
  push();
  user["mcpServers"]["c"] = stdio();
  push();
  EXPECT_TRUE(events(event_kind::reconcile_started).empty()); // coalesced behind the pass
  self->send(world->spawns.at(0).conn, atom::tick_v);       // slow connects: the pass ends
  auto all = events();
  std::size_t started = 0, done = 0;
  for (auto& e : all) {
    started += e.kind == event_kind::reconcile_started;
    done += e.kind == event_kind::reconcile_finished;
  }
  EXPECT_EQ(started, 1u); // exactly one more
  EXPECT_EQ(done, 2u);
  EXPECT_EQ(live_names(), (names{"b", "c", "slow"}));
  EXPECT_EQ(spawns_of("b"), 1u);
}

TEST_F(Reload, ACallToAServerStillConnectingWaitsForIt) {
  user["mcpServers"]["slow"] = stdio("hang");
  start({});
  auto rh = self->request(session, caf::infinite, atom::lookup_v, std::string{"slow"}, std::string{"t1"});
  events(); // drains the bus events: only a reply could be left
  EXPECT_FALSE(self->has_next_message()); // waiting, not failed
  self->send(world->spawns.at(0).conn, atom::tick_v);
  sched.run();
  connection_actor named;
  rh.receive([&](connection_actor& c) { named = c; }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  EXPECT_EQ(named, world->spawns.at(0).conn) << "the lookup did not name the server's connection once it was up";
}

// -- item 8: a burst of saves under the debounce gives one reconcile -----------------------

TEST_F(Reload, ABurstOfSavesThroughTheWatcherGivesOneReconcile) {
  start({});
  auto file = dir / ".mcprt" / "settings.json";
  fs::create_directories(file.parent_path());
  watcher_options wo;
  wo.files = {{config_scope::user, file}, {config_scope::project, dir / "ws/.mcp.json"},
              {config_scope::workspace, dir / "ws/.mcprt/settings.json"}};
  wo.debounce = 300ms;
  wo.use_inotify = false;
  auto watcher = track(spawn_watcher(sys, wo, gating, bus));
  sched.run();
  events();
  for (int i = 0; i < 5; ++i) {
    std::ofstream(file) << json{{"mcpServers", {{"s" + std::to_string(i), stdio()}}}}.dump();
    self->send(watcher, atom::fs_event_v, file.string());
    advance(100ms); // each save within the debounce of the one before
  }
  EXPECT_TRUE(events(event_kind::reconcile_started).empty());
  advance(300ms);
  auto all = events();
  std::size_t started = 0;
  for (auto& e : all)
    started += e.kind == event_kind::reconcile_started;
  EXPECT_EQ(started, 1u);
  EXPECT_EQ(live_names(), names{"s4"}); // only the last save's server ever started
  EXPECT_EQ(world->spawns.size(), 1u);
}

// -- item 11: the launch bound narrows, never widens --------------------------------------

TEST_F(Reload, TheLaunchBoundNarrowsAndSettingsCannotWidenIt) {
  user["mcpServers"]["a"] = stdio();
  user["mcpServers"]["b"] = stdio();
  user["mcpServers"]["c"] = stdio();
  start(with([](setup& s) { s.launch_bound = names{"a", "b"}; }));
  EXPECT_EQ(live_names(), (names{"a", "b"}));
  user["mcp"]["allowed"] = {"a", "c"}; // narrows to a; cannot add c
  push();
  EXPECT_EQ(live_names(), names{"a"});
  EXPECT_EQ(spawns_of("c"), 0u);
  user["mcp"].erase("allowed");
  push();
  EXPECT_EQ(live_names(), (names{"a", "b"}));
  auto err = call_error("c");
  EXPECT_NE(sys.render(err).find("not_allowed"), std::string::npos) << sys.render(err);
}

TEST_F(Reload, AnEmptyAllowListDeniesEverything) {
  user["mcpServers"]["a"] = stdio();
  user["mcp"]["allowed"] = json::array();
  start({});
  EXPECT_TRUE(live_names().empty());
  EXPECT_EQ(world->spawns.size(), 0u);
}

// -- item 12: pool mode never acquires a pending or rejected server ----------------------

TEST_F(Reload, PendingAndRejectedServersAreNeverSpawnedAndApprovalStartsThem) {
  project["mcpServers"]["p"] = stdio();
  user["mcpServers"]["a"] = stdio();
  start({});
  EXPECT_EQ(live_names(), names{"a"});
  EXPECT_EQ(spawns_of("p"), 0u);
  auto prompts = events(event_kind::pending_approval_changed);
  ASSERT_FALSE(prompts.empty());
  EXPECT_EQ(strings(prompts.back().data.value["promptable"]), names{"p"});
  auto err = call_error("p");
  EXPECT_TRUE(is(err, errc::unavailable));
  EXPECT_NE(sys.render(err).find("mcprt approve p"), std::string::npos) << sys.render(err);

  EXPECT_EQ(ask<bool>(gating, atom::reject_v, std::string{"p"}), true);
  EXPECT_EQ(spawns_of("p"), 0u);
  auto after_reject = events(event_kind::pending_approval_changed);
  ASSERT_EQ(after_reject.size(), 1u); // the list changed: told once, now empty
  EXPECT_TRUE(after_reject[0].data.value["promptable"].empty());
  EXPECT_NE(sys.render(call_error("p")).find("rejected"), std::string::npos);

  EXPECT_EQ(ask<bool>(gating, atom::approve_v, std::string{"p"}), true);
  EXPECT_EQ(live_names(), (names{"a", "p"}));
  EXPECT_EQ(spawns_of("p"), 1u);
}

TEST_F(Reload, ApprovalIsBoundToTheConfigHash) {
  project["mcpServers"]["p"] = stdio();
  start({});
  ask<bool>(gating, atom::approve_v, std::string{"p"});
  EXPECT_EQ(live_names(), names{"p"});
  events();
  // Changing the config asks again; nothing of the new config starts.
  project["mcpServers"]["p"] = stdio("ok", {"--v2"});
  push();
  EXPECT_TRUE(live_names().empty());
  auto prompts = events(event_kind::pending_approval_changed);
  ASSERT_EQ(prompts.size(), 1u);
  EXPECT_EQ(strings(prompts[0].data.value["promptable"]), names{"p"});
  // Back to the approved config: it reconnects without a prompt.
  project["mcpServers"]["p"] = stdio();
  push();
  EXPECT_EQ(live_names(), names{"p"});
}

TEST_F(Reload, ApprovedRemovedAndReAddedReconnectsSilently) {
  project["mcpServers"]["p"] = stdio();
  start({});
  ask<bool>(gating, atom::approve_v, std::string{"p"});
  project["mcpServers"].erase("p");
  push();
  EXPECT_TRUE(live_names().empty());
  EXPECT_NE(sys.render(call_error("p")).find("removed"), std::string::npos);
  events();
  project["mcpServers"]["p"] = stdio();
  push();
  EXPECT_EQ(live_names(), names{"p"});
  for (auto& e : events(event_kind::pending_approval_changed))
    EXPECT_TRUE(e.data.value["promptable"].empty());
}

TEST_F(Reload, ARejectedServerWhoseConfigChangesIsPromptedAgain) {
  workspace["mcpServers"]["w"] = stdio();
  start({});
  ask<bool>(gating, atom::reject_v, std::string{"w"});
  events();
  // An unrelated edit reconciles but prompts nothing.
  user["mcpServers"]["x"] = stdio();
  push();
  auto unrelated = events();
  EXPECT_TRUE(std::any_of(unrelated.begin(), unrelated.end(),
                          [](const event& e) { return e.kind == event_kind::reconcile_finished; }));
  EXPECT_TRUE(std::none_of(unrelated.begin(), unrelated.end(),
                           [](const event& e) { return e.kind == event_kind::pending_approval_changed; }));
  workspace["mcpServers"]["w"] = stdio("ok", {"--changed"});
  push();
  auto prompts = events(event_kind::pending_approval_changed);
  ASSERT_EQ(prompts.size(), 1u);
  EXPECT_EQ(strings(prompts[0].data.value["promptable"]), names{"w"});
  EXPECT_EQ(spawns_of("w"), 0u);
}

TEST_F(Reload, ApproveAnswersUnknownServerAndNotGated) {
  user["mcpServers"]["a"] = stdio();
  start({});
  auto try_approve = [&](const std::string& name) {
    auto rh = self->request(gating, caf::infinite, atom::approve_v, name);
    sched.run();
    caf::error out;
    rh.receive([](bool) {}, [&](caf::error& e) { out = e; });
    return out;
  };
  EXPECT_TRUE(is(try_approve("nope"), errc::unknown_server));
  EXPECT_TRUE(is(try_approve("a"), errc::not_gated));
}

// -- item 13: 0 ↔ 1 servers, nothing left behind ----------------------------------------

TEST_F(Reload, FromNoServerToOneAndBackLeavesNothingBehind) {
  start({});
  EXPECT_TRUE(live_names().empty());
  user["mcpServers"]["a"] = stdio();
  push();
  EXPECT_EQ(live_names(), names{"a"});
  user["mcpServers"] = json::object();
  push();
  EXPECT_TRUE(live_names().empty());
  advance(2s); // the pool's drain delay
  EXPECT_EQ(stops_of("a"), 1u);
  EXPECT_TRUE(ask<pool_snapshot>(pool, atom::snapshot_v)->entries.empty());
}

// -- item 14: a changed server restarts alone --------------------------------------------

TEST_F(Reload, AChangedServerRestartsAloneAndTheOthersKeepTheirConnection) {
  user["mcpServers"]["a"] = stdio();
  user["mcpServers"]["b"] = stdio();
  user["mcpServers"]["c"] = stdio();
  start({});
  auto before = snap();
  events();
  user["mcpServers"]["a"] = stdio("ok", {"--v2"});
  push();
  auto f = finished();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(strings(f[0]["restarted"]), names{"a"});
  EXPECT_EQ(strings(f[0]["kept"]), (names{"b", "c"}));
  EXPECT_TRUE(f[0]["added"].empty());
  EXPECT_EQ(spawns_of("a"), 2u);
  EXPECT_EQ(spawns_of("b"), 1u);
  EXPECT_EQ(spawns_of("c"), 1u);
  auto after = snap();
  ASSERT_EQ(after.servers.size(), 3u);
  EXPECT_NE(after.servers[0].connection_id, before.servers[0].connection_id);
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(after.servers[i].pid, before.servers[i].pid);
    EXPECT_EQ(after.servers[i].tools, 2u); // never a moment with 0 tools
  }
  advance(2s);
  EXPECT_EQ(stops_of("a"), 1u);
  EXPECT_EQ(stops_of("b") + stops_of("c"), 0u);
}

/// A changed server is replaced make-before-break, by either pool.
class ReloadReplacement : public Reload {
protected:
  void old_stops_once_the_new_is_up(bool shared_pool) {
    user["mcpServers"]["a"] = stdio();
    start(with([&](setup& s) { s.pool = shared_pool; }));
    events();
    // The new config starts but is slow to connect: the old process keeps
    // running meanwhile (it is not stopped while the new one starts).
    user["mcpServers"]["a"] = stdio("hang", {"--v2"});
    push();
    ASSERT_EQ(spawns_of("a"), 2u);
    EXPECT_EQ(stops_of("a"), 0u);
    EXPECT_TRUE(finished().empty()) << "the pass waits for the new connection";
    // Meanwhile the old connection stays the session's: listed with its
    // tools (the gateway's catalog never sees a moment with none).
    ASSERT_EQ(snap().servers.size(), 1u);
    EXPECT_EQ(snap().servers[0].tools, 2u);
    EXPECT_EQ(snap().servers[0].status, connection_status::connected);
    // Connected: the old one is stopped at once (no drain: the settings
    // changed it), and the pass reports the restart.
    self->send(world->spawns.back().conn, atom::tick_v);
    sched.run();
    EXPECT_EQ(stops_of("a"), 1u);
    auto f = finished();
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(strings(f[0]["restarted"]), names{"a"});
    EXPECT_TRUE(f[0]["errors"].empty());
    // A replacement that fails leaves the old one in place, and says so.
    auto v2 = world->spawns[1].cfg; // a copy: the next spawn may move the vector
    EXPECT_FALSE(world->was_stopped(connection_id(v2.server), v2.generation));
    user["mcpServers"]["a"] = stdio("fail", {"--v3"});
    push();
    EXPECT_FALSE(world->was_stopped(connection_id(v2.server), v2.generation));
    f = finished();
    ASSERT_EQ(f.size(), 1u);
    ASSERT_EQ(f[0]["errors"].size(), 1u);
    EXPECT_NE(f[0]["errors"][0].dump().find("previous connection stays"), std::string::npos) << f[0].dump();
    EXPECT_EQ(live_names(), names{"a"});
    EXPECT_EQ(snap().servers.at(0).tools, 2u);
  }
};

TEST_F(ReloadReplacement, TheWorkspacePoolStopsTheOldConnectionOnlyOnceTheNewIsUp) {
  old_stops_once_the_new_is_up(true);
}

TEST_F(ReloadReplacement, ThePrivatePoolStopsTheOldConnectionOnlyOnceTheNewIsUp) {
  old_stops_once_the_new_is_up(false);
}

TEST_F(Reload, AFilterOnlyEditRefiltersWithoutReconnecting) {
  user["mcpServers"]["a"] = stdio();
  start({});
  EXPECT_EQ(snap().servers.at(0).tools, 2u);
  events();
  auto spec = stdio();
  spec["excludeTools"] = {"t2"};
  user["mcpServers"]["a"] = spec;
  push();
  auto f = finished();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(strings(f[0]["refiltered"]), names{"a"});
  EXPECT_EQ(spawns_of("a"), 1u);
  EXPECT_EQ(snap().servers.at(0).tools, 1u);
  auto tools = ask<std::vector<tool_info>>(session, atom::tools_v, std::string{"a"});
  ASSERT_TRUE(tools);
  ASSERT_EQ(tools->size(), 1u);
  EXPECT_EQ(tools->at(0).name, "t1");
  EXPECT_TRUE(is(call_error("a", "t2"), errc::unknown_tool));
}

// -- item 15: untrusted folder --------------------------------------------------------------

TEST_F(Reload, AnUntrustedFolderStartsNothing) {
  user["mcpServers"]["a"] = stdio();
  start(with([](setup& s) { s.trusted = false; }));
  push(true);
  EXPECT_TRUE(events(event_kind::reconcile_started).empty());
  EXPECT_EQ(world->spawns.size(), 0u);
  EXPECT_NE(sys.render(call_error("a")).find("untrusted"), std::string::npos);
}

// -- item 16: excluded toggle -------------------------------------------------------------------

TEST_F(Reload, ExcludingAndReIncludingAServer) {
  user["mcpServers"]["a"] = stdio();
  user["mcpServers"]["b"] = stdio();
  start({});
  user["mcp"]["excluded"] = {"a"};
  push();
  EXPECT_EQ(live_names(), names{"b"});
  user["mcp"]["excluded"] = json::array();
  push();
  EXPECT_EQ(live_names(), (names{"a", "b"}));
  EXPECT_EQ(spawns_of("b"), 1u);
}

// -- budget -------------------------------------------------------------------------------------

TEST_F(Reload, RefusalsOfOnePassComeAsOneBatchAndNameTheReason) {
  user["mcpServers"]["a"] = stdio();
  user["mcpServers"]["b"] = stdio();
  user["mcpServers"]["c"] = stdio();
  start(with([](setup& s) {
    s.budget = 1;
    s.mode = budget_mode::enforce;
  }));
  auto all = events();
  std::size_t batches = 0;
  json last_finished;
  for (auto& e : all) {
    if (e.kind == event_kind::child_refused_batch) {
      ++batches;
      EXPECT_EQ(e.data.value["refused"].size(), 2u);
      EXPECT_EQ(e.data.value["scope"], "workspace");
    }
    if (e.kind == event_kind::reconcile_finished) last_finished = e.data.value;
  }
  EXPECT_EQ(batches, 1u);
  EXPECT_EQ(last_finished["skipped"].size(), 2u);
  EXPECT_EQ(live_names(), names{"a"});
  auto err = call_error("b");
  EXPECT_NE(sys.render(err).find("budget_exhausted"), std::string::npos) << sys.render(err);
}

TEST_F(Reload, TheKillSwitchRunsSessionOwnedConnectionsUnderASessionBudget) {
  user["mcpServers"]["a"] = stdio();
  user["mcpServers"]["b"] = stdio();
  start(with([](setup& s) {
    s.pool = false;
    s.budget = 1;
    s.mode = budget_mode::enforce;
  }));
  auto all = events();
  bool batch = false;
  for (auto& e : all)
    if (e.kind == event_kind::child_refused_batch) {
      batch = true;
      EXPECT_EQ(e.data.value["scope"], "session");
    }
  EXPECT_TRUE(batch);
  EXPECT_EQ(live_names(), names{"a"});
  // Removing a frees the session slot for b; a's connection is stopped at once.
  user["mcpServers"].erase("a");
  push();
  EXPECT_EQ(live_names(), names{"b"});
  EXPECT_EQ(stops_of("a"), 1u);
  EXPECT_EQ(ask<bool>(session, atom::stop_v), true);
  EXPECT_EQ(stops_of("b"), 1u);
}

TEST_F(Reload, StoppingASessionReleasesItsPoolEntries) {
  user["mcpServers"]["a"] = stdio();
  start({});
  EXPECT_EQ(ask<pool_snapshot>(pool, atom::snapshot_v)->entries.at(0).refs, 1u);
  EXPECT_EQ(ask<bool>(session, atom::stop_v), true);
  EXPECT_EQ(ask<pool_snapshot>(pool, atom::snapshot_v)->entries.at(0).refs, 0u);
}

// -- the pool tells its holders; the budget tells its listeners -------------------------

TEST_F(Reload, AnEntryThePoolGaveUpOnLeavesTheLiveSetAndIsAcquiredAgainAfterItsBackoff) {
  user["mcpServers"]["a"] = stdio();
  start(with([](setup& s) { s.pool = false; }));
  ASSERT_EQ(live_names(), names{"a"});
  auto id = snap().servers.at(0).connection_id;
  events();
  // The server crashes; the kill switch's pool does not restart it: it
  // tells the session that the entry failed.
  self->send(world->spawns.back().conn, atom::io_exit_v, std::string("crashed with exit code 6"));
  sched.run();
  // Out of the live set at once (never counted as kept), and not acquired
  // again before its backoff.
  EXPECT_TRUE(live_names().empty());
  auto f = finished();
  ASSERT_FALSE(f.empty());
  EXPECT_TRUE(f.back()["kept"].empty()) << f.back().dump();
  ASSERT_EQ(f.back()["skipped"].size(), 1u) << f.back().dump();
  EXPECT_EQ(f.back()["skipped"][0]["reason"], "backoff");
  auto err = call_error("a");
  EXPECT_NE(sys.render(err).find("exit code 6"), std::string::npos) << sys.render(err);
  EXPECT_EQ(spawns_of("a"), 1u);
  advance(1500ms); // the first retry: 1 s ± 10 %
  EXPECT_EQ(spawns_of("a"), 2u);
  EXPECT_EQ(live_names(), names{"a"});
  // A notification for a connection the session no longer holds changes nothing.
  self->send(session, pool_entry_changed{id, "a", pool_entry_event::failed, 1, "late"});
  sched.run();
  EXPECT_EQ(live_names(), names{"a"});
}

TEST_F(Reload, RetriesOfAFailingServerBackOffExponentially) {
  user["mcpServers"]["a"] = stdio();
  start(with([](setup& s) { s.pool = false; }));
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(live_names(), names{"a"}) << "round " << round;
    self->send(world->spawns.back().conn, atom::io_exit_v, std::string("exit code 1"));
    sched.run();
    // Retry n waits 2^n s (± 10 %): 0.85 of it is too early, 1.15 is enough.
    auto wait = std::chrono::milliseconds(1000 << round);
    advance(wait * 85 / 100);
    EXPECT_TRUE(live_names().empty()) << "round " << round;
    advance(wait * 30 / 100);
    EXPECT_EQ(live_names(), names{"a"}) << "round " << round;
  }
}

TEST_F(Reload, ASlotFreedElsewhereLetsARefusedServerConnectWithoutAReload) {
  user["mcpServers"]["a"] = stdio();
  start(with([](setup& s) {
    s.budget = 1;
    s.mode = budget_mode::enforce;
  }));
  ASSERT_EQ(live_names(), names{"a"});
  // A second session wants b; the one slot is a's.
  reconciler_options ro;
  ro.session = "s2";
  ro.pool_session = 2;
  ro.bus = bus;
  ro.budget = budget;
  ro.pool = pool;
  auto second = track(spawn_reconciler(sys, ro));
  desired_state d;
  d.trusted = true;
  d.admitted.push_back(config("b", stdio()));
  self->send(second, d);
  self->send(second, atom::start_v);
  sched.run();
  auto second_live = [&] {
    names out;
    auto snapshot = ask<session_snapshot>(second, atom::snapshot_v);
    for (auto& s : snapshot.value_or(session_snapshot{}).servers)
      out.push_back(s.name);
    return out;
  };
  EXPECT_TRUE(second_live().empty());
  EXPECT_EQ(spawns_of("b"), 0u);
  // The first session closes; once a's drain ends its slot frees, and the
  // budget tells the second session, which acquires b by itself.
  EXPECT_EQ(ask<bool>(session, atom::stop_v), true);
  advance(2s); // the pool's drain delay in this fixture
  EXPECT_EQ(spawns_of("b"), 1u);
  EXPECT_EQ(second_live(), names{"b"});
}
