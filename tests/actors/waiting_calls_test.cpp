// Calls that wait for their server's connection, through the call broker
// in front of a real session (reconciler, pool, gating, bus) with fake
// connections, on CAF's test coordinator. A call waiting while its server
// connects is cancelled at once and never reaches the server; a call id is
// unique among its owner's calls. A call that comes before the session's
// first desired state (a session opened a moment ago) waits for it instead
// of failing.

#include <filesystem>
#include <memory>
#include <string>

#include "actor_test_support.hpp"
#include "actors/call_broker.hpp"
#include "actors/event_bus.hpp"
#include "actors/gating.hpp"
#include "actors/reconciler.hpp"
#include "fake_connection.hpp"
#include "messages/hot_reload.hpp"

using namespace mcprt;
using namespace mcprt::testing;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

namespace fs = std::filesystem;

class WaitingCalls : public actor_test {
protected:
  std::shared_ptr<fake_world> world = std::make_shared<fake_world>();
  fs::path dir;
  pool_actor pool;
  gating_actor gating;
  reconciler_actor session;
  call_broker_actor broker;

  void SetUp() override {
    dir = fs::temp_directory_path() / ("mcprt-waiting-calls-" + std::to_string(::getpid()) + "-"
                                       + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir / "ws");
  }

  void TearDown() override {
    for (auto& s : world->spawns)
      caf::anon_send_exit(s.conn, caf::exit_reason::user_shutdown);
    actor_test::TearDown();
    fs::remove_all(dir);
  }

  /// One user-scope server `name` in fake `mode` ("hang": connecting until a tick).
  void start(const std::string& name, const std::string& mode) {
    spawn_session();
    attach(name, mode);
  }

  /// The session's actors, before gating knows the session.
  void spawn_session() {
    pool_options po;
    po.table.drain_delay = 1s;
    pool = track(spawn_pool(sys, fake_factory(world), budget_actor{}, event_bus_actor{}, po));
    reconciler_options ro;
    ro.session = "s1";
    ro.pool_session = 1;
    ro.pool = pool;
    gating_options go;
    go.workspace.workspace = dir / "ws";
    go.workspace.home = dir;
    go.approvals_file = dir / "approvals.json";
    gating = track(spawn_gating(sys, go, event_bus_actor{}));
    session = track(spawn_reconciler(sys, ro));
    broker = track(spawn_call_broker(sys, 16, event_bus_actor{}));
  }

  /// Gating reads the settings and pushes the session its desired state.
  void attach(const std::string& name, const std::string& mode) {
    settings_update u;
    u.forced = true;
    json user = {{"mcpServers", {{name, {{"command", "fake-server"}, {"fake", mode}, {"tools", {"t1"}}}}}}};
    u.files.push_back({(dir / ".mcprt/settings.json").string(), "user", true, json_value{user}});
    u.files.push_back({(dir / "ws/.mcp.json").string(), "project", false, json_value{json::object()}});
    u.files.push_back({(dir / "ws/.mcprt/settings.json").string(), "workspace", false, json_value{json::object()}});
    self->send(gating, u);
    self->send(gating, atom::attach_v, session, std::vector<server_config>{});
    self->send(gating, atom::start_v);
    sched.run();
  }

  auto call(const std::string& server, const std::string& call_id) {
    call_request r;
    r.session = "s1";
    r.target = session;
    r.server = server;
    r.tool = "t1";
    r.arguments = json_value{json::object()};
    r.call_id = call_id;
    return self->request(broker, caf::infinite, std::move(r));
  }

  bool cancel(const std::string& call_id) {
    return ask<bool>(broker, atom::cancel_v, std::string{}, call_id).value_or(false);
  }
};

} // namespace

TEST_F(WaitingCalls, ACancelledParkedCallFailsAtOnceAndNeverReachesTheServer) {
  start("slow", "hang");
  auto parked = call("slow", "c-1");
  auto other = call("slow", "c-2");
  sched.run();
  EXPECT_TRUE(cancel("c-1"));
  std::optional<caf::error> err;
  // The test coordinator has run everything: not answered now is never.
  ASSERT_TRUE(self->has_next_message()) << "the cancelled call did not fail at once";
  parked.receive([](json_value&) { ADD_FAILURE() << "a cancelled call answered"; }, [&](caf::error& e) { err = e; });
  ASSERT_TRUE(err) << "the cancelled call did not fail at once";
  EXPECT_TRUE(is(*err, errc::cancelled)) << sys.render(*err);
  EXPECT_FALSE(cancel("c-1")) << "a cancelled call is gone";
  // The server connects: the other parked call goes out, the cancelled one never does.
  self->send(world->spawns.at(0).conn, atom::tick_v);
  sched.run();
  bool answered = false;
  other.receive([&](json_value&) { answered = true; }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  EXPECT_TRUE(answered);
  EXPECT_EQ(world->calls, std::vector<std::string>{"t1"});
}

TEST_F(WaitingCalls, ACallIdInFlightCannotBeTakenTwice) {
  start("slow", "hang");
  auto first = call("slow", "c-1");
  auto second = call("slow", "c-1");
  sched.run();
  std::optional<caf::error> err;
  second.receive([](json_value&) { ADD_FAILURE() << "a second call under the same id went out"; },
                 [&](caf::error& e) { err = e; });
  ASSERT_TRUE(err);
  EXPECT_TRUE(is(*err, errc::bad_request)) << sys.render(*err);
  EXPECT_TRUE(cancel("c-1"));
  std::optional<caf::error> first_err;
  first.receive([](json_value&) { ADD_FAILURE() << "a cancelled call answered"; },
                [&](caf::error& e) { first_err = e; });
  ASSERT_TRUE(first_err);
  EXPECT_TRUE(is(*first_err, errc::cancelled)) << sys.render(*first_err);
}

TEST_F(WaitingCalls, CancelOfAnUnknownCallIdAnswersFalse) {
  start("fast", "ok");
  EXPECT_FALSE(cancel("nope"));
}

TEST_F(WaitingCalls, ACallBeforeTheFirstDesiredStateWaitsForItAndIsAnswered) {
  spawn_session();
  auto early = call("fast", "c-1");
  auto plain = call("fast", ""); // no call id: nobody can cancel it
  sched.run();
  EXPECT_FALSE(self->has_next_message()) << "a call answered before the session knew its servers";
  attach("fast", "ok");
  int answered = 0;
  early.receive([&](json_value&) { ++answered; }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  plain.receive([&](json_value&) { ++answered; }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  EXPECT_EQ(answered, 2);
  EXPECT_EQ(world->calls, (std::vector<std::string>{"t1", "t1"}));
}

TEST_F(WaitingCalls, ACallBeforeTheFirstDesiredStateForAnUnknownServerFailsOnceItArrives) {
  spawn_session();
  auto early = call("missing", "c-1");
  sched.run();
  EXPECT_FALSE(self->has_next_message());
  attach("fast", "ok");
  std::optional<caf::error> err;
  early.receive([](json_value&) { ADD_FAILURE() << "a call to an unknown server answered"; },
                [&](caf::error& e) { err = e; });
  ASSERT_TRUE(err) << "the early call never failed";
  EXPECT_TRUE(is(*err, errc::unknown_server)) << sys.render(*err);
}

TEST_F(WaitingCalls, ACallBeforeTheFirstDesiredStateCanBeCancelled) {
  spawn_session();
  auto early = call("fast", "c-1");
  sched.run();
  EXPECT_TRUE(cancel("c-1"));
  std::optional<caf::error> err;
  early.receive([](json_value&) { ADD_FAILURE() << "a cancelled call answered"; }, [&](caf::error& e) { err = e; });
  ASSERT_TRUE(err);
  EXPECT_TRUE(is(*err, errc::cancelled)) << sys.render(*err);
  attach("fast", "ok");
  EXPECT_TRUE(world->calls.empty()) << "the cancelled call reached the server";
}

TEST_F(WaitingCalls, ACallOutOnItsConnectionIsCancelledThereAndAnUnknownIdIsNot) {
  start("held", "held");
  auto out = call("held", "c-1");
  sched.run();
  ASSERT_EQ(world->calls, std::vector<std::string>{"t1"}) << "the call did not reach its connection";
  EXPECT_FALSE(self->has_next_message()) << "a held call answered";
  EXPECT_FALSE(cancel("c-2")) << "no call of that id is out";
  EXPECT_TRUE(cancel("c-1"));
  std::optional<caf::error> err;
  out.receive([](json_value&) { ADD_FAILURE() << "a cancelled call answered"; }, [&](caf::error& e) { err = e; });
  ASSERT_TRUE(err) << "the cancelled call did not fail at once";
  EXPECT_TRUE(is(*err, errc::cancelled)) << sys.render(*err);
  EXPECT_FALSE(cancel("c-1")) << "a cancelled call is gone";
}
