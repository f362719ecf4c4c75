// The pool supervisor's wiring on CAF's test coordinator (deterministic: no
// threads, no real time) with a fake connection the test controls, the real
// budget actor and the real event bus: that the effects of core/pool_table
// are carried out (a spawn spawns, a stop stops, the budget is asked, timers
// fire on the actor clock, holders and the bus hear), and that the sharded
// pool routes, merges and drains. The pool's rules themselves are tested
// without actors in tests/core/pool_table_test.cpp.
//
// The fake connection is described in fake_connection.hpp.

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "actors/budget.hpp"
#include "actors/event_bus.hpp"
#include "actor_test_support.hpp"
#include "fake_connection.hpp"
#include "core/fingerprint.hpp"
#include "pool/pool_supervisor.hpp"

using namespace mcprt;
using namespace mcprt::testing;
using namespace std::chrono_literals;
using nlohmann::json;
using names = std::vector<std::string>;

namespace {

// -- fixture -----------------------------------------------------------------------

struct acquired {
  std::optional<pool_handle> handle;
  caf::error error;
  std::string text;
};

class Pool : public actor_test {
protected:
  std::shared_ptr<fake_world> world = std::make_shared<fake_world>();
  event_bus_actor bus;
  budget_actor budget;
  pool_actor pool;
  /// The holder acquires name (invalid: no notifications).
  pool_holder_actor holder;

  void SetUp() override {
    bus = track(spawn_event_bus(sys));
    auto seq = ask<uint64_t>(bus, atom::subscribe_v, self_sink(),
                             std::vector<event_kind>{event_kind::pool_entry_restarted, event_kind::pool_entry_failed});
    ASSERT_EQ(seq, 0u);
  }

  void TearDown() override {
    for (auto& s : world->spawns)
      caf::anon_send_exit(s.conn, caf::exit_reason::user_shutdown);
    actor_test::TearDown();
  }

  connection_factory factory() { return fake_factory(world); }

  void start(std::optional<std::size_t> limit = std::nullopt, budget_mode mode = budget_mode::enforce,
             pool_options opts = {}, bool with_budget = true) {
    if (with_budget) budget = track(spawn_budget(sys, limit, mode, "workspace", bus));
    // The pool's own rules, on one shard; PoolShards covers the routing.
    if (opts.shards == 0) opts.shards = 1;
    pool = track(spawn_pool(sys, factory(), budget, bus, opts));
  }

  static server_config server(const std::string& name, json spec) {
    auto r = parse_server_config(name, spec, config_scope::user, {});
    EXPECT_TRUE(r.config) << (r.error ? r.error->message : "");
    return *r.config;
  }

  static server_config stdio(const std::string& name, const std::string& mode = "ok",
                             std::vector<std::string> args = {}) {
    return server(name, {{"command", "fake-server"}, {"args", args}, {"fake", mode}});
  }

  template <class Handle>
  acquired receive_acquire(Handle& rh) {
    acquired out;
    rh.receive([&](pool_handle& h) { out.handle = std::move(h); },
               [&](caf::error& e) {
                 out.error = e;
                 out.text = sys.render(e);
               });
    return out;
  }

  acquired acquire(session_id session, const server_config& cfg) {
    auto rh = self->request(pool, caf::infinite, pool_acquire{session, cfg, holder});
    sched.run();
    if (!self->has_next_message()) {
      acquired out;
      out.text = "no reply";
      return out;
    }
    return receive_acquire(rh);
  }

  pool_handle must_acquire(session_id session, const server_config& cfg) {
    auto r = acquire(session, cfg);
    EXPECT_TRUE(r.handle) << r.text;
    return r.handle.value_or(pool_handle{});
  }

  /// Lets go of one handle (a detach has no answer: true once delivered).
  bool release(session_id session, const std::string& id, release_reason why = release_reason::session_closed) {
    self->send(pool, pool_detach{session, id, why});
    sched.run();
    return true;
  }

  pool_snapshot snapshot() { return ask<pool_snapshot>(pool, atom::snapshot_v).value_or(pool_snapshot{}); }

  std::optional<pool_entry_info> entry(const std::string& id) {
    for (auto& e : snapshot().entries)
      if (e.id == id) return e;
    return std::nullopt;
  }

  names reserved() {
    return ask<budget_snapshot>(budget, atom::snapshot_v).value_or(budget_snapshot{}).reserved;
  }

  void advance(caf::timespan d) {
    sched.clock().advance_time(d);
    sched.run();
  }

  /// Pool events published since the last call.
  std::vector<event> events() {
    sched.run();
    return drain<event>();
  }

  template <class... Ts>
  void tell_conn(const connection_actor& c, Ts&&... xs) {
    self->send(c, std::forward<Ts>(xs)...);
    sched.run();
  }

  connection_actor conn_of(const std::string& id, uint64_t generation) {
    for (auto& s : world->spawns)
      if (connection_id(s.cfg.server) == id && s.cfg.generation == generation) return s.conn;
    ADD_FAILURE() << "no connection " << id << " generation " << generation;
    return connection_actor{};
  }
};

} // namespace

// -- sharing ------------------------------------------------------------------------

TEST_F(Pool, TwoSessionsShareOneConnection) {
  start(4);
  auto cfg = stdio("fs");
  auto a = must_acquire(1, cfg);
  auto b = must_acquire(2, cfg);
  EXPECT_EQ(world->spawns.size(), 1u);
  EXPECT_EQ(a.connection_id, connection_id(cfg));
  EXPECT_EQ(a.connection, b.connection);
  EXPECT_EQ(a.generation, b.generation);
  // The pool subscribed itself to the connection.
  ASSERT_EQ(world->spawns[0].cfg.subscribers.size(), 1u);
  EXPECT_EQ(world->spawns[0].cfg.subscribers[0].address(), pool.address());
  auto e = entry(a.connection_id);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->refs, 2u);
  EXPECT_EQ(e->status, pool_entry_status::active);
  EXPECT_EQ(reserved(), (names{"fs"}));
}

TEST_F(Pool, AcquireByIdAttachesToALiveEntryAndFailsForAnUnknownOne) {
  start(4);
  auto cfg = stdio("fs");
  auto a = must_acquire(1, cfg);
  auto rh = self->request(pool, caf::infinite, pool_attach{session_id{2}, a.connection_id});
  sched.run();
  auto b = receive_acquire(rh);
  ASSERT_TRUE(b.handle) << b.text;
  EXPECT_EQ(b.handle->connection, a.connection);
  EXPECT_EQ(entry(a.connection_id)->refs, 2u);
  EXPECT_EQ(world->spawns.size(), 1u);
  auto rh2 = self->request(pool, caf::infinite, pool_attach{session_id{2}, std::string{"nope::0"}});
  sched.run();
  auto c = receive_acquire(rh2);
  EXPECT_FALSE(c.handle);
  EXPECT_TRUE(is(c.error, errc::not_connected)) << c.text;
}

TEST_F(Pool, WorksWithoutABudget) {
  start(std::nullopt, budget_mode::off, {}, /*with_budget=*/false);
  auto a = must_acquire(1, stdio("a"));
  auto b = must_acquire(1, stdio("b"));
  EXPECT_NE(a.connection, b.connection);
  EXPECT_TRUE(release(1, a.connection_id));
  advance(30s);
  EXPECT_EQ(snapshot().entries.size(), 1u);
}

// -- budget ---------------------------------------------------------------------------

TEST_F(Pool, RefusesPastTheCapRecordsTheRefusalAndAdmitsAfterAClose) {
  start(1, budget_mode::enforce);
  auto a = must_acquire(1, stdio("a"));
  auto r = acquire(1, stdio("b"));
  ASSERT_FALSE(r.handle);
  EXPECT_TRUE(is(r.error, errc::budget_exhausted)) << r.text;
  EXPECT_NE(r.text.find("b: budget 1 exhausted (1 reserved)"), std::string::npos) << r.text;
  EXPECT_EQ(world->spawns.size(), 1u); // nothing was started for b
  EXPECT_FALSE(entry(connection_id(stdio("b"))));
  auto b = ask<budget_snapshot>(budget, atom::snapshot_v);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->refused, (names{"b"}));
  // Sharing the live entry needs no slot.
  must_acquire(2, stdio("a"));
  // Once a's entry closes, b gets the slot.
  EXPECT_TRUE(release(1, a.connection_id));
  EXPECT_TRUE(release(2, a.connection_id));
  advance(30s);
  EXPECT_TRUE(reserved().empty());
  auto ok = acquire(1, stdio("b"));
  EXPECT_TRUE(ok.handle) << ok.text;
  EXPECT_EQ(reserved(), (names{"b"}));
}

TEST_F(Pool, AFailedSpawnFailsEveryWaiterAndRollsBackItsReservation) {
  start(4);
  auto cfg = stdio("fs", "fail");
  auto r1 = self->request(pool, caf::infinite, pool_acquire{session_id(1), cfg, {}});
  auto r2 = self->request(pool, caf::infinite, pool_acquire{session_id(2), cfg, {}});
  sched.run();
  for (auto* rh : {&r1, &r2}) {
    auto r = receive_acquire(*rh);
    ASSERT_FALSE(r.handle);
    EXPECT_TRUE(is(r.error, errc::spawn_failed)) << r.text;
    EXPECT_NE(r.text.find("fs: server exited (exit code 4)"), std::string::npos) << r.text;
  }
  EXPECT_EQ(world->spawns.size(), 1u);
  EXPECT_TRUE(snapshot().entries.empty());
  EXPECT_TRUE(reserved().empty());
  EXPECT_TRUE(world->was_stopped(connection_id(cfg), 1)); // the failed connection is reaped
}

// -- crash restart ----------------------------------------------------------------------

TEST_F(Pool, ACrashIsRestartedAfterTheBackoffWithTheNextGeneration) {
  pool_options o;
  o.table.backoff_base = 1000ms;
  start(4, budget_mode::enforce, o);
  auto h = must_acquire(1, stdio("fs"));
  auto pid1 = entry(h.connection_id)->pid;
  tell_conn(h.connection, atom::io_err_v, std::string("panic: boom"));
  tell_conn(h.connection, atom::io_exit_v, std::string("exit code 3"));
  auto e = entry(h.connection_id);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, pool_entry_status::restarting);
  EXPECT_EQ(e->last_error, "server exited (exit code 3)");
  EXPECT_EQ(e->stderr_tail, (names{"panic: boom"}));
  EXPECT_EQ(e->refs, 1u);
  EXPECT_TRUE(world->was_stopped(h.connection_id, h.generation)); // the crashed one is reaped
  EXPECT_EQ(reserved(), (names{"fs"}));                           // the slot is kept
  advance(850ms); // the first delay is 1000 ms +-10%
  EXPECT_EQ(world->spawns.size(), 1u);
  advance(300ms);
  ASSERT_EQ(world->spawns.size(), 2u);
  EXPECT_EQ(world->spawns[1].cfg.generation, h.generation + 1);
  e = entry(h.connection_id);
  EXPECT_EQ(e->status, pool_entry_status::active);
  EXPECT_EQ(e->generation, h.generation + 1);
  EXPECT_EQ(e->restarts, 1u);
  EXPECT_EQ(e->refs, 1u);
  EXPECT_NE(e->pid, pid1);
  EXPECT_EQ(e->connection, connection_status::connected);
  EXPECT_EQ(e->last_error, "server exited (exit code 3)"); // kept for the snapshot
  auto evs = events();
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].kind, event_kind::pool_entry_restarted);
  EXPECT_EQ(evs[0].data.value["id"], h.connection_id);
  EXPECT_EQ(evs[0].data.value["name"], "fs");
  EXPECT_EQ(evs[0].data.value["generation"], h.generation + 1);
  EXPECT_EQ(evs[0].data.value["restarts"], 1);
  EXPECT_EQ(evs[0].data.value["last_error"], "server exited (exit code 3)");
  // A new acquire gets the new connection.
  auto h2 = must_acquire(2, stdio("fs"));
  EXPECT_EQ(h2.connection, world->spawns[1].conn);
  EXPECT_EQ(h2.generation, h.generation + 1);
  EXPECT_EQ(world->spawns.size(), 2u);
}

TEST_F(Pool, AConnectionActorThatDiesIsACrash) {
  start(4);
  auto h = must_acquire(1, stdio("fs"));
  self->send_exit(h.connection, caf::exit_reason::kill);
  sched.run();
  auto e = entry(h.connection_id);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, pool_entry_status::restarting);
  EXPECT_NE(e->last_error.find("connection actor exited"), std::string::npos) << e->last_error;
  advance(2s);
  EXPECT_EQ(entry(h.connection_id)->status, pool_entry_status::active);
}

TEST_F(Pool, ARestartThatFailsToConnectIsAnotherCrash) {
  pool_options o;
  o.table.max_restarts = 2;
  start(4, budget_mode::enforce, o);
  auto h = must_acquire(1, stdio("fs", "fail_restarts"));
  // A session waiting for the restarting entry is answered with its fate.
  tell_conn(h.connection, atom::io_exit_v, std::string("exit code 3"));
  auto waiting = self->request(pool, caf::infinite, pool_acquire{session_id{2}, stdio("fs", "fail_restarts"), {}});
  sched.run();
  EXPECT_FALSE(self->has_next_message());
  advance(1100ms); // restart 1 fails at once
  EXPECT_EQ(entry(h.connection_id)->status, pool_entry_status::restarting);
  advance(2200ms); // restart 2 fails too: beyond the limit
  EXPECT_FALSE(entry(h.connection_id));
  auto r = receive_acquire(waiting);
  EXPECT_FALSE(r.handle);
  EXPECT_TRUE(is(r.error, errc::spawn_failed)) << r.text;
  EXPECT_TRUE(reserved().empty());
  auto evs = events();
  ASSERT_EQ(evs.size(), 3u);
  EXPECT_EQ(evs[2].kind, event_kind::pool_entry_failed);
  EXPECT_EQ(evs[2].data.value["stderr"], json::array({"fake: cannot start"}));
}

// -- holders and release reasons ----------------------------------------------------------

TEST_F(Pool, HoldersAreToldWhenTheirEntryCrashesAndComesBack) {
  pool_options o;
  o.table.backoff_base = 1000ms;
  start(4, budget_mode::enforce, o);
  holder = caf::actor_cast<pool_holder_actor>(self);
  auto h = must_acquire(1, stdio("fs"));
  tell_conn(h.connection, atom::io_exit_v, std::string("exit code 3"));
  auto told = drain<pool_entry_changed>();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].what, pool_entry_event::restarting);
  EXPECT_EQ(told[0].connection_id, h.connection_id);
  EXPECT_EQ(told[0].server, "fs");
  EXPECT_EQ(told[0].error, "server exited (exit code 3)");
  advance(1100ms);
  told = drain<pool_entry_changed>();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].what, pool_entry_event::restarted);
  EXPECT_EQ(told[0].generation, h.generation + 1);
  // Once the session is released, its holder is forgotten.
  EXPECT_EQ(ask<uint64_t>(pool, atom::release_session_v, session_id{1}), 1u);
  holder = nullptr;
  must_acquire(2, stdio("fs"));
  tell_conn(conn_of(h.connection_id, h.generation + 1), atom::io_exit_v, std::string("exit code 3"));
  EXPECT_TRUE(drain<pool_entry_changed>().empty());
}

// -- drain and idle timers -------------------------------------------------------------

TEST_F(Pool, TheDrainTimerClosesTheEntryAndReleasesTheSlot) {
  start(4);
  auto h = must_acquire(1, stdio("fs"));
  EXPECT_TRUE(release(1, h.connection_id));
  release(1, h.connection_id); // nothing left to release: no effect
  release(1, "nope::0");
  EXPECT_EQ(entry(h.connection_id)->refs, 0u);
  EXPECT_EQ(entry(h.connection_id)->status, pool_entry_status::draining);
  advance(29s);
  EXPECT_TRUE(entry(h.connection_id));
  EXPECT_FALSE(world->was_stopped(h.connection_id, h.generation));
  advance(1s);
  EXPECT_FALSE(entry(h.connection_id));
  EXPECT_TRUE(world->was_stopped(h.connection_id, h.generation));
  EXPECT_TRUE(reserved().empty());
}

// -- restart(name) -----------------------------------------------------------------------

TEST_F(Pool, RestartByNameRestartsEveryEntryOfThatName) {
  start(4);
  auto a1 = must_acquire(1, stdio("fs", "ok", {"1"}));
  auto a2 = must_acquire(1, stdio("fs", "ok", {"2"}));
  auto other = must_acquire(1, stdio("git"));
  auto results = ask<std::vector<restart_result>>(pool, pool_restart{"fs"});
  ASSERT_TRUE(results);
  ASSERT_EQ(results->size(), 2u);
  for (auto& r : *results) {
    EXPECT_TRUE(r.restarted) << r.id << ": " << r.reason;
    EXPECT_TRUE(r.id == a1.connection_id || r.id == a2.connection_id);
  }
  EXPECT_EQ(world->spawns.size(), 5u);
  EXPECT_TRUE(world->was_stopped(a1.connection_id, a1.generation));
  EXPECT_TRUE(world->was_stopped(a2.connection_id, a2.generation));
  auto e1 = entry(a1.connection_id);
  EXPECT_EQ(e1->generation, a1.generation + 1);
  EXPECT_EQ(e1->restarts, 1u);
  EXPECT_EQ(e1->refs, 1u);
  EXPECT_EQ(e1->status, pool_entry_status::active);
  EXPECT_EQ(entry(other.connection_id)->generation, other.generation);
  EXPECT_EQ(events().size(), 2u);
  auto none = ask<std::vector<restart_result>>(pool, pool_restart{"nope"});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(reserved(), (names{"fs", "git"}));
}

// -- snapshot --------------------------------------------------------------------------------

TEST_F(Pool, SnapshotReportsEntryFieldsAndLiveStdioSubprocesses) {
  start(4);
  auto a = must_acquire(1, stdio("fs"));
  must_acquire(2, stdio("fs"));
  must_acquire(1, server("web", {{"httpUrl", "http://127.0.0.1:1/mcp"}}));
  auto slow = stdio("slow", "hang");
  auto pending = self->request(pool, caf::infinite, pool_acquire{session_id(1), slow, {}});
  sched.run();
  auto s = snapshot();
  EXPECT_FALSE(s.draining);
  ASSERT_EQ(s.entries.size(), 3u);
  EXPECT_EQ(s.subprocess_count, 1u); // http is no process; a spawning entry is not live yet
  auto e = entry(a.connection_id);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->id, a.connection_id);
  EXPECT_EQ(e->name, "fs");
  EXPECT_EQ(e->refs, 2u);
  EXPECT_EQ(e->status, pool_entry_status::active);
  EXPECT_EQ(e->connection, connection_status::connected);
  EXPECT_GE(e->pid, 1000);
  EXPECT_EQ(e->restarts, 0u);
  EXPECT_EQ(e->generation, a.generation);
  EXPECT_EQ(e->transport, "stdio");
  EXPECT_EQ(e->last_error, "");
  auto sl = entry(connection_id(slow));
  EXPECT_EQ(sl->status, pool_entry_status::spawning);
  EXPECT_EQ(sl->connection, connection_status::connecting);
  EXPECT_EQ(sl->refs, 0u);
  for (auto& x : s.entries) {
    if (x.name == "web") {
      EXPECT_EQ(x.transport, "http");
    }
  }
  tell_conn(conn_of(connection_id(slow), 1), atom::tick_v);
  EXPECT_TRUE(receive_acquire(pending).handle);
  EXPECT_EQ(snapshot().subprocess_count, 2u);
}

// -- drain_all ---------------------------------------------------------------------------------

TEST_F(Pool, DrainAllStopsEverythingReleasesTheSlotsAndRefusesLaterAcquires) {
  start(4);
  auto a = must_acquire(1, stdio("a"));
  auto b = must_acquire(1, stdio("b"));
  EXPECT_TRUE(release(1, b.connection_id)); // an idle one too
  auto slow = stdio("c", "hang");
  auto pending = self->request(pool, caf::infinite, pool_acquire{session_id(1), slow, {}});
  sched.run();
  auto r = ask<drain_result>(pool, atom::drain_v, false, caf::timespan{5s});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->drained, 3u);
  EXPECT_EQ(r->forced, 0u);
  EXPECT_TRUE(r->errors.empty());
  auto w = receive_acquire(pending);
  EXPECT_TRUE(is(w.error, errc::pool_draining)) << w.text;
  EXPECT_TRUE(world->was_stopped(a.connection_id, a.generation));
  EXPECT_TRUE(world->was_stopped(b.connection_id, b.generation));
  EXPECT_TRUE(world->was_stopped(connection_id(slow), 1));
  auto s = snapshot();
  EXPECT_TRUE(s.draining);
  EXPECT_TRUE(s.entries.empty());
  EXPECT_TRUE(reserved().empty());
  auto late = acquire(1, stdio("a"));
  EXPECT_TRUE(is(late.error, errc::pool_draining)) << late.text;
  EXPECT_NE(late.text.find("draining"), std::string::npos);
  auto rs = ask<std::vector<restart_result>>(pool, pool_restart{"a"});
  ASSERT_TRUE(rs);
  EXPECT_TRUE(rs->empty());
  advance(10min); // no timer of a drained entry does anything
  EXPECT_EQ(world->spawns.size(), 3u);
}

TEST_F(Pool, ForcedDrainKillsAConnectionThatDoesNotStopInTime) {
  start(4);
  auto h = must_acquire(1, stdio("stuck", "stuck"));
  must_acquire(1, stdio("fine"));
  auto rh = self->request(pool, caf::infinite, atom::drain_v, true, caf::timespan{1s});
  sched.run();
  EXPECT_FALSE(self->has_next_message());
  advance(1s);
  drain_result r;
  rh.receive([&](drain_result& x) { r = x; }, [&](caf::error& e) { FAIL() << sys.render(e); });
  EXPECT_EQ(r.drained, 1u);
  EXPECT_EQ(r.forced, 1u);
  EXPECT_TRUE(r.errors.empty());
  // The stuck connection was killed.
  auto dead = false;
  self->monitor(h.connection);
  self->receive([&](caf::down_msg&) { dead = true; }, caf::after(std::chrono::seconds(0)) >> [] {});
  EXPECT_TRUE(dead);
  EXPECT_TRUE(reserved().empty());
}

// A stopping connection waits for its server's exit; when the runtime tears
// its I/O down first, that exit never comes. The pool that asked it to stop
// must take it along when it ends, or the actor system never ends.
TEST_F(Pool, AConnectionStillStoppingEndsWithThePool) {
  start(4);
  auto h = must_acquire(1, stdio("stuck", "stuck"));
  release(1, h.connection_id, release_reason::removed);
  EXPECT_TRUE(world->was_stopped(h.connection_id, h.generation));
  EXPECT_TRUE(ends_with(h.connection, [&] { caf::anon_send_exit(pool, caf::exit_reason::user_shutdown); }));
}

TEST_F(Pool, UnforcedDrainReportsAConnectionThatDoesNotStopInTime) {
  start(4);
  must_acquire(1, stdio("stuck", "stuck"));
  auto rh = self->request(pool, caf::infinite, atom::drain_v, false, caf::timespan{1s});
  sched.run();
  advance(1s);
  drain_result r;
  rh.receive([&](drain_result& x) { r = x; }, [&](caf::error& e) { FAIL() << sys.render(e); });
  EXPECT_EQ(r.drained, 0u);
  EXPECT_EQ(r.forced, 0u);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("stuck::"), std::string::npos) << r.errors[0];
}

TEST_F(Pool, DrainOfAnEmptyPoolAnswersAtOnce) {
  start(4);
  auto r = ask<drain_result>(pool, atom::drain_v, true, caf::timespan{1s});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->drained, 0u);
  EXPECT_TRUE(snapshot().draining);
}

TEST_F(Pool, AttachAndDetachAreRegisteredMessagesThatSurviveSerialization) {
  // They could reach a pool on another CAF node: registered types with an
  // inspect overload, as every pool message.
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  auto out = caf::make_message(pool_attach{7, "fs::0123456789abcdef"}, pool_detach{8, "git::fedcba9876543210"});
  ASSERT_FALSE(sink(out));
  caf::message in;
  caf::binary_deserializer source{sys, buf};
  ASSERT_FALSE(source(in));
  ASSERT_TRUE((in.match_elements<pool_attach, pool_detach>()));
  EXPECT_EQ(in.get_as<pool_attach>(0).session, 7u);
  EXPECT_EQ(in.get_as<pool_attach>(0).connection_id, "fs::0123456789abcdef");
  EXPECT_EQ(in.get_as<pool_detach>(1).session, 8u);
  EXPECT_EQ(in.get_as<pool_detach>(1).connection_id, "git::fedcba9876543210");
}

// -- shards -----------------------------------------------------------------------------------------

namespace routing_rule {

// The router's rule, checked at compile time: a request about one server is
// one struct with a shard_key; an atom-led one is in the every-shard list.
struct keyed_request {
  std::string server;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, keyed_request& x) {
  return f(caf::meta::type_name("test.keyed_request"), x.server);
}

inline std::string_view shard_key(const keyed_request& x) {
  return x.server;
}

struct unkeyed_request {
  std::string server;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, unkeyed_request& x) {
  return f(caf::meta::type_name("test.unkeyed_request"), x.server);
}

template <class Interface, class... EveryShard>
constexpr bool routable = shard_routing::router<Interface, caf::detail::type_list<EveryShard...>>::valid;

using good = caf::typed_actor<caf::reacts_to<keyed_request>, caf::replies_to<atom::snapshot>::with<int>>;
static_assert(routable<good, atom::snapshot>);
// A struct without a shard_key: route_by_key<missing_key>() fails to compile.
static_assert(!routable<caf::typed_actor<caf::reacts_to<keyed_request>, caf::reacts_to<unkeyed_request>>>);
// An atom-led request not in the every-shard list.
static_assert(!routable<good>);
// Two plain values (no struct, no atom).
static_assert(!routable<caf::typed_actor<caf::reacts_to<std::string, uint64_t>>>);
static_assert(routable<pool_actor, atom::release_session, atom::snapshot, atom::drain>);

} // namespace routing_rule

TEST(PoolRoute, KeyedRequestsGoToTheirServersShardAndListedAtomsToEveryShard) {
  using namespace routing_rule;
  constexpr std::size_t n = 7;
  auto route = route_by_key<good, atom::snapshot>();
  for (std::string name : {"a", "git", "fs", "srv3"}) {
    auto msg = caf::make_message(keyed_request{name});
    auto want = std::hash<std::string_view>{}(name) % n;
    EXPECT_EQ(route(msg.content(), n), want) << name;
  }
  EXPECT_EQ(route(caf::make_message(atom::snapshot_v).content(), n), std::nullopt);
  // Outside the interface: one shard answers (with an error).
  EXPECT_EQ(route(caf::make_message(atom::drain_v).content(), n), 0u);
  // The pool's own requests: by the server in the connection id or config.
  auto id = std::string("fs::0123456789abcdef");
  auto want = std::hash<std::string_view>{}("fs") % n;
  EXPECT_EQ(pool_route(caf::make_message(pool_detach{1, id}).content(), n), want);
  EXPECT_EQ(pool_route(caf::make_message(pool_lookup{id}).content(), n), want);
  EXPECT_EQ(pool_route(caf::make_message(pool_timer{pool_timer_kind::idle, id, 3}).content(), n), want);
  EXPECT_EQ(pool_route(caf::make_message(pool_restart{"fs"}).content(), n), want);
  EXPECT_EQ(pool_route(caf::make_message(atom::release_session_v, session_id{1}).content(), n), std::nullopt);
}

namespace {

/// The pool as it runs by default: several shards behind one handle.
class PoolShards : public Pool {
protected:
  static constexpr std::size_t shard_count = 4;

  void start_sharded(std::optional<std::size_t> limit) {
    pool_options opts;
    opts.shards = shard_count;
    start(limit, budget_mode::enforce, opts);
  }

  static names server_names(std::size_t n) {
    names out;
    for (std::size_t i = 0; i < n; ++i)
      out.push_back("srv" + std::to_string(i));
    return out;
  }
};

} // namespace

TEST_F(PoolShards, EveryMessageAboutAServerReachesTheShardThatOwnsIt) {
  start_sharded(10);
  std::vector<pool_handle> first;
  for (auto& name : server_names(8))
    first.push_back(must_acquire(1, stdio(name)));
  ASSERT_EQ(world->spawns.size(), 8u);
  // The servers are spread: their connections report to more than one shard.
  std::set<caf::actor_addr> shards;
  for (auto& s : world->spawns) {
    ASSERT_EQ(s.cfg.subscribers.size(), 1u);
    shards.insert(s.cfg.subscribers[0].address());
  }
  EXPECT_GT(shards.size(), 1u);
  EXPECT_LE(shards.size(), shard_count);
  for (auto& h : first) {
    // Attach by id, get, release and detach find the entry in its shard.
    auto by_id = ask<pool_handle>(pool, pool_attach{session_id{2}, h.connection_id});
    ASSERT_TRUE(by_id) << h.connection_id;
    EXPECT_EQ(by_id->connection, h.connection);
    auto current = ask<pool_handle>(pool, pool_lookup{h.connection_id});
    ASSERT_TRUE(current);
    EXPECT_EQ(current->connection, h.connection);
    // By config again: the same entry, no new connection.
    EXPECT_EQ(must_acquire(3, stdio(h.connection_id.substr(0, h.connection_id.find("::")))).connection,
              h.connection);
    EXPECT_TRUE(release(2, h.connection_id));
    self->send(pool, pool_detach{session_id{3}, h.connection_id});
  }
  sched.run();
  EXPECT_EQ(world->spawns.size(), 8u);
  auto s = snapshot();
  ASSERT_EQ(s.entries.size(), 8u);
  EXPECT_TRUE(std::is_sorted(s.entries.begin(), s.entries.end(),
                             [](const auto& a, const auto& b) { return a.id < b.id; }));
  for (auto& e : s.entries)
    EXPECT_EQ(e.refs, 1u) << e.id; // s1's handle only
  EXPECT_EQ(s.subprocess_count, 8u);
  EXPECT_EQ(reserved().size(), 8u);
  // A restart reaches the one server it names.
  auto rs = ask<std::vector<restart_result>>(pool, pool_restart{"srv3"});
  ASSERT_TRUE(rs);
  ASSERT_EQ(rs->size(), 1u);
  EXPECT_EQ((*rs)[0].id, connection_id(stdio("srv3")));
  EXPECT_TRUE((*rs)[0].restarted);
  EXPECT_EQ(world->spawns.size(), 9u);
  // An unknown id is answered (not_connected), whichever shard it hashes to.
  auto rh = self->request(pool, caf::infinite, pool_lookup{"nope::0123456789abcdef"});
  sched.run();
  ASSERT_TRUE(self->has_next_message());
  caf::error none;
  rh.receive([](pool_handle&) { ADD_FAILURE() << "a handle for an unknown id"; },
             [&](caf::error& e) { none = e; });
  EXPECT_TRUE(is(none, errc::not_connected)) << sys.render(none);
}

TEST_F(PoolShards, AShardThatDiesTakesThePoolAndEveryOtherShardDown) {
  start_sharded(10);
  for (auto& name : server_names(8))
    must_acquire(1, stdio(name));
  std::set<caf::actor_addr> shards;
  for (auto& s : world->spawns)
    shards.insert(s.cfg.subscribers[0].address());
  ASSERT_GT(shards.size(), 1u);
  self->monitor(pool);
  for (auto& shard : shards)
    self->monitor(shard);
  caf::anon_send_exit(*shards.begin(), caf::exit_reason::kill);
  sched.run();
  auto downs = drain<caf::down_msg>();
  EXPECT_EQ(downs.size(), shards.size() + 1);
  for (auto& d : downs)
    EXPECT_EQ(d.reason, caf::exit_reason::kill) << sys.render(d.reason);
  // No server's request goes to a shard that does not own it: each is
  // answered with an error, and none starts a connection.
  auto spawned = world->spawns.size();
  for (auto& name : server_names(8)) {
    auto r = acquire(2, stdio(name));
    EXPECT_FALSE(r.handle) << name;
    EXPECT_NE(r.text, "no reply") << name;
  }
  EXPECT_EQ(world->spawns.size(), spawned);
}

TEST_F(PoolShards, TheBudgetIsNeverOvershotAcrossShards) {
  start_sharded(3);
  std::size_t admitted = 0, refused = 0;
  for (auto& name : server_names(8)) {
    auto r = acquire(1, stdio(name));
    if (r.handle)
      ++admitted;
    else if (is(r.error, errc::budget_exhausted))
      ++refused;
  }
  EXPECT_EQ(admitted, 3u);
  EXPECT_EQ(refused, 5u);
  EXPECT_EQ(reserved().size(), 3u);
  EXPECT_EQ(world->spawns.size(), 3u);
}

TEST_F(PoolShards, ReleaseSessionSnapshotAndDrainAskEveryShard) {
  start_sharded(10);
  for (auto& name : server_names(6))
    must_acquire(1, stdio(name));
  must_acquire(2, stdio("srv0"));
  EXPECT_EQ(ask<uint64_t>(pool, atom::release_session_v, session_id{1}), 6u);
  auto s = snapshot();
  ASSERT_EQ(s.entries.size(), 6u);
  for (auto& e : s.entries) {
    EXPECT_EQ(e.refs, e.name == "srv0" ? 1u : 0u) << e.id;
    EXPECT_EQ(e.status, e.name == "srv0" ? pool_entry_status::active : pool_entry_status::draining) << e.id;
  }
  auto r = ask<drain_result>(pool, atom::drain_v, false, caf::timespan{5s});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->drained, 6u);
  EXPECT_TRUE(r->errors.empty());
  for (auto& sp : world->spawns)
    EXPECT_TRUE(world->was_stopped(connection_id(sp.cfg.server), sp.cfg.generation));
  s = snapshot();
  EXPECT_TRUE(s.draining);
  EXPECT_TRUE(s.entries.empty());
  EXPECT_TRUE(reserved().empty());
  // Every shard refuses now, whatever the server.
  for (auto& name : server_names(6)) {
    auto late = acquire(3, stdio(name));
    EXPECT_TRUE(is(late.error, errc::pool_draining)) << name << ": " << late.text;
  }
}
