// The gating actor and decisions that others write to the approvals store
// (another `mcprt approve`, another daemon): on CAF's test coordinator, with
// the store events injected as inotify would deliver them. The scoped actor
// plays the session's reconciler, so every state the gating actor pushes and
// every reconcile it asks for is counted.

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "actor_test_support.hpp"
#include "actors/event_bus.hpp"
#include "actors/gating.hpp"
#include "core/approvals_store.hpp"
#include "core/fingerprint.hpp"

using namespace mcprt;
using namespace mcprt::testing;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

class GatingStore : public actor_test {
protected:
  fs::path dir;
  fs::path ws;
  fs::path store_file;
  gating_actor gating;
  json project = {{"mcpServers", {{"proj", {{"command", "proj-server"}}}, {"other", {{"command", "other-server"}}}}}};

  void SetUp() override {
    dir = fs::temp_directory_path() / ("mcprt-gating-store-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    ws = dir / "ws";
    fs::create_directories(ws);
    store_file = dir / ".mcprt" / "mcp-approvals.json";
    auto bus = track(spawn_event_bus(sys));
    gating_options go;
    go.workspace.workspace = ws;
    go.workspace.home = dir;
    go.approvals_file = store_file;
    // go.watch_approvals stays off: events are injected.
    go.debounce = 50ms;
    gating = track(spawn_gating(sys, go, bus));
    settings_update u;
    u.forced = true;
    u.files.push_back({(ws / ".mcp.json").string(), "project", true, json_value{project}});
    self->send(gating, u);
    self->send(gating, atom::attach_v, caf::actor_cast<reconciler_actor>(self), std::vector<server_config>{});
    self->send(gating, atom::start_v);
    sched.run();
    drain_pushes();
  }

  void TearDown() override {
    actor_test::TearDown();
    fs::remove_all(dir);
  }

  struct pushes {
    std::vector<desired_state> states;
    std::size_t reconciles = 0;
  };

  pushes drain_pushes() {
    pushes out;
    for (bool more = true; more;)
      self->receive([&](desired_state& d) { out.states.push_back(std::move(d)); },
                    [&](atom::reconcile) { ++out.reconciles; }, [&](atom::start) {},
                    caf::after(std::chrono::seconds(0)) >> [&] { more = false; });
    return out;
  }

  std::string hash_of(const std::string& name) {
    auto r = parse_server_config(name, project["mcpServers"][name], config_scope::project);
    return approval_hash(*r.config);
  }

  /// Another process writes a decision straight into the store.
  void decide_elsewhere(const std::string& root, const std::string& name, const std::string& hash,
                        approval_state decision) {
    approvals_store other{store_file};
    other.set(root, name, hash, decision);
  }

  /// What inotify would report for that write, then the debounce.
  void store_event() {
    self->send(gating, atom::fs_event_v, store_file.string());
    sched.run();
    sched.clock().advance_time(50ms);
    sched.run();
  }

  static bool admits(const desired_state& d, const std::string& name) {
    for (auto& c : d.admitted)
      if (c.name == name) return true;
    return false;
  }
};

} // namespace

TEST_F(GatingStore, AnApprovalWrittenElsewhereIsPushedWithOneReconcile) {
  decide_elsewhere(ws.string(), "proj", hash_of("proj"), approval_state::approved);
  store_event();
  auto p = drain_pushes();
  ASSERT_EQ(p.states.size(), 1u);
  EXPECT_EQ(p.reconciles, 1u);
  EXPECT_TRUE(admits(p.states[0], "proj"));
  EXPECT_FALSE(admits(p.states[0], "other"));
  EXPECT_EQ(p.states[0].promptable, (std::vector<std::string>{"other"}));
}

TEST_F(GatingStore, ARejectionWrittenElsewhereTakesTheServerOut) {
  decide_elsewhere(ws.string(), "proj", hash_of("proj"), approval_state::approved);
  store_event();
  drain_pushes();
  decide_elsewhere(ws.string(), "proj", hash_of("proj"), approval_state::rejected);
  store_event();
  auto p = drain_pushes();
  ASSERT_EQ(p.states.size(), 1u);
  EXPECT_EQ(p.reconciles, 1u);
  EXPECT_FALSE(admits(p.states[0], "proj"));
  // A rejected server is out but no longer asks: not promptable.
  EXPECT_EQ(p.states[0].promptable, (std::vector<std::string>{"other"}));
}

TEST_F(GatingStore, WritesThatChangeNoDecisionHereCostNothing) {
  // Another project's decision, a decision for a config hash we do not
  // run, and our own decision written again.
  decide_elsewhere((dir / "elsewhere").string(), "proj", hash_of("proj"), approval_state::approved);
  store_event();
  decide_elsewhere(ws.string(), "proj", std::string(64, 'f'), approval_state::approved);
  store_event();
  EXPECT_TRUE(drain_pushes().states.empty());
  ASSERT_TRUE(ask<bool>(gating, atom::approve_v, std::string("proj")));
  auto own = drain_pushes();
  EXPECT_EQ(own.states.size(), 1u); // the approval itself
  store_event();                    // inotify's report of our own write
  auto echo = drain_pushes();
  EXPECT_TRUE(echo.states.empty());
  EXPECT_EQ(echo.reconciles, 0u);
}

TEST_F(GatingStore, ABurstOfStoreEventsIsReadOnceAfterTheDebounce) {
  decide_elsewhere(ws.string(), "proj", hash_of("proj"), approval_state::approved);
  for (int i = 0; i < 5; ++i) {
    self->send(gating, atom::fs_event_v, store_file.string());
    sched.run();
    sched.clock().advance_time(20ms); // inside the debounce each time
    sched.run();
  }
  EXPECT_TRUE(drain_pushes().states.empty()) << "read before the burst ended";
  sched.clock().advance_time(50ms);
  sched.run();
  auto p = drain_pushes();
  EXPECT_EQ(p.states.size(), 1u);
  EXPECT_EQ(p.reconciles, 1u);
}

// A session with no servers of its own gets its first state whole and then
// only what changed: an edit among many servers sends one config.
TEST_F(GatingStore, AfterItsFirstStateASessionGetsOnlyWhatChanged) {
  auto update = [&](const json& user) {
    settings_update u;
    u.files.push_back({(ws / ".mcp.json").string(), "project", true, json_value{project}});
    u.files.push_back({(dir / ".mcprt" / "settings.json").string(), "user", true, json_value{user}});
    self->send(gating, u);
    sched.run();
    auto p = drain_pushes();
    EXPECT_EQ(p.states.size(), 1u);
    return p.states.empty() ? desired_state{} : std::move(p.states[0]);
  };
  auto names = [](const desired_state& d) {
    std::vector<std::string> out;
    for (auto& c : d.admitted)
      out.push_back(c.name);
    return out;
  };
  using strings = std::vector<std::string>;
  json user = {{"mcpServers", {{"u1", {{"command", "one"}}}, {"u2", {{"command", "two"}}}}}};
  auto added = update(user);
  EXPECT_TRUE(added.delta);
  EXPECT_EQ(names(added), (strings{"u1", "u2"}));
  EXPECT_TRUE(added.withdrawn.empty());

  user["mcpServers"]["u2"]["args"] = {"--edited"};
  auto edited = update(user);
  EXPECT_TRUE(edited.delta);
  EXPECT_EQ(names(edited), strings{"u2"});
  ASSERT_EQ(edited.admitted.size(), 1u);
  EXPECT_EQ(edited.admitted[0].args, strings{"--edited"});
  EXPECT_TRUE(edited.withdrawn.empty());

  user["mcpServers"].erase("u1");
  auto removed = update(user);
  EXPECT_TRUE(removed.admitted.empty());
  EXPECT_EQ(removed.withdrawn, strings{"u1"});
  // The rest of the state stays whole: why u1 is out travels with it.
  bool told = false;
  for (auto& u : removed.unavailable)
    told = told || (u.server == "u1" && u.reason == "removed");
  EXPECT_TRUE(told);

  // A decision moves one server in, and out again.
  decide_elsewhere(ws.string(), "proj", hash_of("proj"), approval_state::approved);
  store_event();
  auto approved = drain_pushes();
  ASSERT_EQ(approved.states.size(), 1u);
  EXPECT_EQ(names(approved.states[0]), strings{"proj"});
  decide_elsewhere(ws.string(), "proj", hash_of("proj"), approval_state::rejected);
  store_event();
  auto rejected = drain_pushes();
  ASSERT_EQ(rejected.states.size(), 1u);
  EXPECT_TRUE(rejected.states[0].admitted.empty());
  EXPECT_EQ(rejected.states[0].withdrawn, strings{"proj"});

  // Attached again, the session starts over from a whole state.
  self->send(gating, atom::attach_v, caf::actor_cast<reconciler_actor>(self), std::vector<server_config>{});
  sched.run();
  auto again = drain_pushes();
  ASSERT_EQ(again.states.size(), 1u);
  EXPECT_FALSE(again.states[0].delta);
  EXPECT_EQ(names(again.states[0]), strings{"u2"});
}
