// The call broker on CAF's test coordinator, in front of a real session
// (reconciler, pool, gating) with fake connections: one owner's call ids
// are its own, the per-server limit counts every owner, a cancel reaches
// the connection, a deadline passes on the broker's tick, a server not
// connected is asked again, progress reaches the caller under its own id,
// and a drain answers every call and every later one. Calls that wait for
// their server's connection: a cancelled one fails at once and never
// reaches the server, and one that comes before the session's first
// desired state (a session opened a moment ago) waits for it instead of
// failing.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "actor_test_support.hpp"
#include "actors/call_broker.hpp"
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

/// Collects the progress a caller's sink receives.
struct progress_seen {
  std::vector<call_progress_update> steps;
};

progress_sink_actor::behavior_type progress_collector(progress_sink_actor::pointer,
                                                      std::shared_ptr<progress_seen> seen) {
  return {[seen](const call_progress_update& u) { seen->steps.push_back(u); }};
}

class CallBroker : public actor_test {
protected:
  std::shared_ptr<fake_world> world = std::make_shared<fake_world>();
  fs::path dir;
  pool_actor pool;
  gating_actor gating;
  reconciler_actor session;
  call_broker_actor broker;
  /// Where the host API's calls wait for the broker.
  std::shared_ptr<call_inbox> inbox = std::make_shared<call_inbox>();

  void SetUp() override {
    dir = fs::temp_directory_path() / ("mcprt-call-broker-" + std::to_string(::getpid()) + "-"
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

  /// One user-scope server per (name, fake mode), and a broker allowing
  /// `limit` calls per server.
  void start(std::vector<std::pair<std::string, std::string>> servers, std::size_t limit = 16) {
    spawn_session(limit);
    attach(std::move(servers));
  }

  /// The session's actors and the broker, before gating knows the session.
  void spawn_session(std::size_t limit = 16) {
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
    broker = track(spawn_call_broker(sys, limit, event_bus_actor{}, inbox));
  }

  /// Gating reads the settings and pushes the session its desired state.
  void attach(std::vector<std::pair<std::string, std::string>> servers) {
    json entries = json::object();
    for (auto& [name, mode] : servers)
      entries[name] = {{"command", "fake-server"}, {"fake", mode}, {"tools", {"t1"}}};
    settings_update u;
    u.forced = true;
    u.files.push_back({(dir / ".mcprt/settings.json").string(), "user", true, json_value{json{{"mcpServers", entries}}}});
    u.files.push_back({(dir / "ws/.mcp.json").string(), "project", false, json_value{json::object()}});
    u.files.push_back({(dir / "ws/.mcprt/settings.json").string(), "workspace", false, json_value{json::object()}});
    self->send(gating, u);
    self->send(gating, atom::attach_v, session, std::vector<server_config>{});
    self->send(gating, atom::start_v);
    sched.run();
  }

  call_request request(const std::string& server, const std::string& call_id, const std::string& owner = {}) {
    call_request r;
    r.owner = owner;
    r.session = "s1";
    r.target = session;
    r.server = server;
    r.tool = "t1";
    r.arguments = json_value{json::object()};
    r.call_id = call_id;
    r.timeout = 1s;
    return r;
  }

  auto call(call_request r) { return self->request(broker, caf::infinite, std::move(r)); }

  bool cancel(const std::string& call_id, const std::string& owner = {}) {
    return ask<bool>(broker, atom::cancel_v, owner, call_id).value_or(false);
  }

  /// The error a request answered with, if it answered one.
  template <class Handle>
  std::optional<caf::error> error_of(Handle& h) {
    std::optional<caf::error> err;
    if (!self->has_next_message()) return err;
    h.receive([](json_value&) {}, [&](caf::error& e) { err = e; });
    return err;
  }

  /// Advances the test clock one broker tick at a time.
  void advance(caf::timespan d) {
    for (auto left = d; left > caf::timespan{0}; left -= caf::timespan{50ms}) {
      sched.clock().advance_time(50ms);
      sched.run();
    }
  }
};

} // namespace

TEST_F(CallBroker, ACallGoesThroughItsSessionAndAnswersItsCaller) {
  start({{"fast", "ok"}});
  auto h = call(request("fast", "c-1"));
  sched.run();
  bool answered = false;
  h.receive([&](json_value&) { answered = true; }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  EXPECT_TRUE(answered);
  EXPECT_EQ(world->calls, std::vector<std::string>{"t1"});
  EXPECT_FALSE(cancel("c-1")) << "an answered call is gone";
}

TEST_F(CallBroker, TheHostFormAnswersThroughItsDeliveryExactlyOnce) {
  start({{"fast", "ok"}});
  int answers = 0;
  bool ok = false;
  auto delivery = std::make_shared<call_delivery>(
    [&](caf::expected<json> r) {
      ++answers;
      ok = static_cast<bool>(r);
    },
    nullptr, "fast");
  post_job(*inbox, broker, host_call{request("fast", "c-1"), delivery});
  sched.run();
  EXPECT_EQ(answers, 1);
  EXPECT_TRUE(ok);
  delivery->answer(make_error(errc::cancelled));
  delivery.reset();
  EXPECT_EQ(answers, 1) << "a delivery answers once, and its end does not answer again";
}

TEST_F(CallBroker, ADeliveryDroppedUnansweredAnswersThatTheRuntimeStopped) {
  std::optional<caf::error> err;
  {
    call_delivery d([&](caf::expected<json> r) { err = r.error(); }, nullptr, "fast");
  }
  ASSERT_TRUE(err);
  EXPECT_TRUE(is(*err, errc::not_connected)) << sys.render(*err);
}

TEST_F(CallBroker, ThePerServerLimitCountsEveryOwnerAndFreesOnAnswer) {
  start({{"held", "held"}, {"other", "held"}}, 2);
  auto a = call(request("held", "c-1"));
  auto b = call(request("held", "c-1", "s9")); // another owner's c-1
  auto c = call(request("held", "c-2"));
  auto elsewhere = call(request("other", "c-3"));
  sched.run();
  auto err = error_of(c);
  ASSERT_TRUE(err) << "a third call to a server at its limit went out";
  EXPECT_TRUE(is(*err, errc::too_many_calls)) << sys.render(*err);
  EXPECT_EQ(world->calls.size(), 3u) << "two calls to held and one to other reach their connections";
  EXPECT_TRUE(cancel("c-1", "s9"));
  auto b_err = error_of(b);
  ASSERT_TRUE(b_err);
  EXPECT_TRUE(is(*b_err, errc::cancelled));
  EXPECT_FALSE(self->has_next_message()) << "the other owner's c-1 was not cancelled";
  auto d = call(request("held", "c-4"));
  sched.run();
  EXPECT_FALSE(self->has_next_message()) << "the freed share took a new call";
  EXPECT_EQ(world->calls.size(), 4u);
  EXPECT_TRUE(cancel("c-1"));
  EXPECT_TRUE(cancel("c-4"));
  EXPECT_TRUE(cancel("c-3"));
  (void)a, (void)d, (void)elsewhere;
}

TEST_F(CallBroker, AnOwnersCallIdInFlightCannotBeTakenTwice) {
  start({{"held", "held"}});
  auto first = call(request("held", "c-1"));
  auto second = call(request("held", "c-1"));
  sched.run();
  auto err = error_of(second);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is(*err, errc::bad_request)) << sys.render(*err);
  auto bad = call(request("held", "not/an/id"));
  sched.run();
  auto bad_err = error_of(bad);
  ASSERT_TRUE(bad_err);
  EXPECT_TRUE(is(*bad_err, errc::bad_request)) << sys.render(*bad_err);
  EXPECT_TRUE(cancel("c-1"));
  (void)first;
}

TEST_F(CallBroker, ACancelOfACallOutOnItsConnectionFailsItAtOnceAndTheServerHearsOfIt) {
  start({{"held", "held"}});
  auto h = call(request("held", "c-1", "s9"));
  sched.run();
  ASSERT_EQ(world->calls, std::vector<std::string>{"t1"});
  EXPECT_FALSE(self->has_next_message());
  EXPECT_TRUE(cancel("c-1", "s9"));
  auto err = error_of(h);
  ASSERT_TRUE(err) << "the cancelled call did not fail at once";
  EXPECT_TRUE(is(*err, errc::cancelled)) << sys.render(*err);
  // One id end to end: the connection knows the call by the owner's key.
  EXPECT_EQ(world->cancels, std::vector<std::string>{"s9/c-1"});
  EXPECT_FALSE(cancel("c-1", "s9")) << "a cancelled call is gone";
}

TEST_F(CallBroker, ADeadlinePassesOnTheTickAndTheSessionTakesTheCallBack) {
  start({{"held", "held"}});
  auto r = request("held", "c-1");
  r.timeout = 200ms;
  auto h = call(std::move(r));
  sched.run();
  advance(150ms);
  EXPECT_FALSE(self->has_next_message()) << "the call failed before its deadline";
  advance(100ms);
  auto err = error_of(h);
  ASSERT_TRUE(err) << "the deadline passed and the call did not fail";
  EXPECT_EQ(*err, caf::make_error(caf::sec::request_timeout)) << sys.render(*err);
  EXPECT_EQ(world->cancels, std::vector<std::string>{"c-1"}) << "the server did not hear the call was given up";
}

TEST_F(CallBroker, AServerNotConnectedIsAskedAgainUntilItsWaitRunsOut) {
  // An admitted server whose connection failed: its session answers
  // not_connected, which a caller willing to wait hears only once its wait
  // has run out; one that does not wait hears it at once.
  start({{"broken", "fail"}});
  auto now_call = call(request("broken", "c-0"));
  sched.run();
  auto at_once = error_of(now_call);
  ASSERT_TRUE(at_once);
  EXPECT_TRUE(is(*at_once, errc::not_connected)) << sys.render(*at_once);
  auto r = request("broken", "c-1");
  r.wait_connecting = 300ms;
  auto h = call(std::move(r));
  sched.run();
  advance(200ms);
  EXPECT_FALSE(self->has_next_message()) << "the call failed while its caller still waited";
  advance(150ms);
  auto err = error_of(h);
  ASSERT_TRUE(err) << "the wait ran out and the call did not fail";
  EXPECT_TRUE(is(*err, errc::not_connected)) << sys.render(*err);
  EXPECT_TRUE(world->calls.empty());
}

TEST_F(CallBroker, ProgressReachesTheCallersSinkUnderItsOwnIdAndNeverAfterTheAnswer) {
  start({{"fast", "ok"}});
  auto seen = std::make_shared<progress_seen>();
  auto sink = track(sys.spawn(progress_collector, seen));
  auto r = request("fast", "c-1", "s9");
  r.progress_sink = sink;
  auto h = call(std::move(r));
  sched.run();
  bool answered = false;
  h.receive([&](json_value&) { answered = true; }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  EXPECT_TRUE(answered);
  ASSERT_EQ(seen->steps.size(), 1u);
  EXPECT_EQ(seen->steps[0].call_id, "c-1") << "the caller hears of its call by its own id";
  EXPECT_EQ(seen->steps[0].message, "half way");
  // A late step for a call that answered goes nowhere.
  self->send(broker, call_progress_update{"fast", "s9/c-1", 2, true, 2, "late"});
  sched.run();
  EXPECT_EQ(seen->steps.size(), 1u);
}

TEST_F(CallBroker, TheHostFormGetsProgressThroughItsDelivery) {
  start({{"fast", "ok"}});
  std::vector<events::call_progress> steps;
  bool answered = false;
  auto delivery = std::make_shared<call_delivery>([&](caf::expected<json> r) { answered = static_cast<bool>(r); },
                                                  [&](const events::call_progress& p) { steps.push_back(p); }, "fast");
  post_job(*inbox, broker, host_call{request("fast", "c-1"), std::move(delivery)});
  sched.run();
  EXPECT_TRUE(answered);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].call_id, "c-1");
  EXPECT_EQ(steps[0].session, "s1");
  EXPECT_EQ(steps[0].server, "fast");
  EXPECT_EQ(steps[0].tool, "t1");
  ASSERT_TRUE(steps[0].total);
  EXPECT_EQ(*steps[0].total, 2);
}

TEST_F(CallBroker, ADrainAnswersEveryCallInFlightAndEveryLaterOne) {
  start({{"held", "held"}});
  auto h = call(request("held", "c-1"));
  sched.run();
  EXPECT_TRUE(ask<bool>(broker, atom::drain_v, make_error(errc::disconnected, "gone")).value_or(false));
  auto err = error_of(h);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is(*err, errc::disconnected)) << sys.render(*err);
  auto later = call(request("held", "c-2"));
  sched.run();
  auto later_err = error_of(later);
  ASSERT_TRUE(later_err);
  EXPECT_TRUE(is(*later_err, errc::disconnected)) << sys.render(*later_err);
  EXPECT_EQ(world->calls.size(), 1u);
}

TEST_F(CallBroker, AServersRequestIsAttributedToItsOneCallOnly) {
  start({{"held", "held"}});
  auto a = call(request("held", "c-1"));
  sched.run();
  auto one = ask<call_attribution_reply>(broker, atom::lookup_v, std::string{"held"}, std::string{"t1"});
  ASSERT_TRUE(one);
  EXPECT_TRUE(one->found);
  EXPECT_EQ(one->call_id, "c-1");
  EXPECT_EQ(one->session, "s1");
  auto b = call(request("held", "c-2"));
  sched.run();
  auto two = ask<call_attribution_reply>(broker, atom::lookup_v, std::string{"held"}, std::string{"t1"});
  ASSERT_TRUE(two);
  EXPECT_FALSE(two->found) << "two calls to that tool: neither is named";
  EXPECT_EQ(two->in_flight, (std::vector<std::string>{"c-1", "c-2"}));
  EXPECT_TRUE(cancel("c-1"));
  EXPECT_TRUE(cancel("c-2"));
  (void)a, (void)b;
}

// -- calls waiting for their server's connection ------------------------------------

TEST_F(CallBroker, ACancelledParkedCallFailsAtOnceAndNeverReachesTheServer) {
  start({{"slow", "hang"}});
  auto parked = call(request("slow", "c-1"));
  auto other = call(request("slow", "c-2"));
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

TEST_F(CallBroker, ACallIdWaitingForItsServerCannotBeTakenTwice) {
  start({{"slow", "hang"}});
  auto first = call(request("slow", "c-1"));
  auto second = call(request("slow", "c-1"));
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

TEST_F(CallBroker, CancelOfAnUnknownCallIdAnswersFalse) {
  start({{"fast", "ok"}});
  EXPECT_FALSE(cancel("nope"));
}

TEST_F(CallBroker, ACallBeforeTheFirstDesiredStateWaitsForItAndIsAnswered) {
  spawn_session();
  auto early = call(request("fast", "c-1"));
  auto plain = call(request("fast", "")); // no call id: nobody can cancel it
  sched.run();
  EXPECT_FALSE(self->has_next_message()) << "a call answered before the session knew its servers";
  attach({{"fast", "ok"}});
  int answered = 0;
  early.receive([&](json_value&) { ++answered; }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  plain.receive([&](json_value&) { ++answered; }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  EXPECT_EQ(answered, 2);
  EXPECT_EQ(world->calls, (std::vector<std::string>{"t1", "t1"}));
}

TEST_F(CallBroker, ACallBeforeTheFirstDesiredStateForAnUnknownServerFailsOnceItArrives) {
  spawn_session();
  auto early = call(request("missing", "c-1"));
  sched.run();
  EXPECT_FALSE(self->has_next_message());
  attach({{"fast", "ok"}});
  std::optional<caf::error> err;
  early.receive([](json_value&) { ADD_FAILURE() << "a call to an unknown server answered"; },
                [&](caf::error& e) { err = e; });
  ASSERT_TRUE(err) << "the early call never failed";
  EXPECT_TRUE(is(*err, errc::unknown_server)) << sys.render(*err);
}

TEST_F(CallBroker, ACallBeforeTheFirstDesiredStateCanBeCancelled) {
  spawn_session();
  auto early = call(request("fast", "c-1"));
  sched.run();
  EXPECT_TRUE(cancel("c-1"));
  std::optional<caf::error> err;
  early.receive([](json_value&) { ADD_FAILURE() << "a cancelled call answered"; }, [&](caf::error& e) { err = e; });
  ASSERT_TRUE(err);
  EXPECT_TRUE(is(*err, errc::cancelled)) << sys.render(*err);
  attach({{"fast", "ok"}});
  EXPECT_TRUE(world->calls.empty()) << "the cancelled call reached the server";
}

TEST_F(CallBroker, ACallOutOnItsConnectionIsCancelledThereAndAnUnknownIdIsNot) {
  start({{"held", "held"}});
  auto out = call(request("held", "c-1"));
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

TEST_F(CallBroker, AHostCallLeftInTheInboxWhenTheBrokerEndsIsAnswered) {
  start({{"fast", "ok"}});
  std::optional<caf::error> err;
  auto delivery = std::make_shared<call_delivery>([&](caf::expected<json> r) { err = r ? caf::error{} : r.error(); },
                                                  nullptr, "fast");
  ASSERT_TRUE(inbox->push(host_call{request("fast", "c-1"), std::move(delivery)}));
  caf::anon_send_exit(broker, caf::exit_reason::user_shutdown);
  sched.run();
  ASSERT_TRUE(err) << "a call waiting for an ended broker was never answered";
  EXPECT_TRUE(is(*err, errc::not_connected)) << sys.render(*err);
  EXPECT_FALSE(inbox->push(host_call{request("fast", "c-2"), nullptr})) << "the inbox of an ended broker takes no call";
}

TEST_F(CallBroker, ItsMessagesAreSerializable) {
  // Every message between mcprt's actors can travel between nodes.
  call_request r = request("fast", "c-1", "s9");
  r.method = "resources/read";
  r.wait_connecting = 250ms;
  r.progress_events = true;
  std::vector<char> buf;
  caf::binary_serializer out{sys, buf};
  ASSERT_FALSE(out(r));
  call_request back;
  caf::binary_deserializer in{sys, buf};
  ASSERT_FALSE(in(back));
  EXPECT_EQ(back.owner, "s9");
  EXPECT_EQ(back.call_id, "c-1");
  EXPECT_EQ(back.method, "resources/read");
  EXPECT_EQ(back.timeout, r.timeout);
  EXPECT_EQ(back.wait_connecting, 250ms);
  EXPECT_TRUE(back.progress_events);
  EXPECT_EQ(back.target, session);
  EXPECT_NE(caf::type_id<call_request>::value, caf::type_id<call_attribution_reply>::value);
}
