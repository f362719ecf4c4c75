// The pool's rules without an actor system: events in, effects out. The
// actor wiring (budget, bus, fake connections, routing) is covered by
// tests/actors/pool_test.cpp, real processes by pool_process_test.cpp.

#include "core/pool_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <variant>
#include <vector>

#include "core/fingerprint.hpp"
#include "test_support.hpp"

using namespace mcprt;
using namespace std::chrono_literals;

namespace {

using outcome = pool_join::outcome;

server_config stdio(const std::string& name, std::vector<std::string> args = {}) {
  return test::make_server(name, {{"command", "srv"}, {"args", args}});
}

class PoolTable : public ::testing::Test {
protected:
  pool_time now{std::chrono::hours(1)};
  pool_table_options opts;
  std::optional<pool_table> table;
  uint64_t next_waiter = 1;

  void SetUp() override {
    opts.unit_random = [] { return 0.5; }; // no jitter: delay == base * 2^n
  }

  pool_table& t() {
    if (!table) table.emplace(opts);
    return *table;
  }

  /// Every effect of type T since the last take, in order; others stay.
  template <class T>
  std::vector<T> take() {
    std::vector<T> out;
    auto& fx = t().effects();
    for (auto i = fx.begin(); i != fx.end();) {
      if (auto p = std::get_if<T>(&*i)) {
        out.push_back(std::move(*p));
        i = fx.erase(i);
      } else {
        ++i;
      }
    }
    return out;
  }

  /// Drops what is left (log lines, mostly).
  void clear() { t().clear_effects(); }

  bool quiet() {
    auto& fx = t().effects();
    return std::all_of(fx.begin(), fx.end(), [](auto& f) { return std::holds_alternative<pool_log_effect>(f); });
  }

  pool_join acquire(uint64_t session, const server_config& cfg) {
    return t().acquire(session, cfg, next_waiter++);
  }

  /// Acquires and answers the reservation and the connect: a live entry.
  pool_spawn_effect live(uint64_t session, const server_config& cfg, reserve_result r = reserve_result::reserved) {
    EXPECT_EQ(acquire(session, cfg).result, outcome::waiting);
    auto reserve = take<pool_reserve_effect>();
    EXPECT_EQ(reserve.size(), 1u);
    if (reserve.empty()) return {};
    t().reserve_answered(reserve[0].id, reserve[0].serial, reserve[0].name, r, std::nullopt, now);
    auto spawn = take<pool_spawn_effect>();
    EXPECT_EQ(spawn.size(), 1u);
    if (spawn.empty()) return {};
    t().connection_update(spawn[0].id, spawn[0].generation, pool_link::connected, 42, {}, now);
    EXPECT_EQ(take<pool_reply_effect>().size(), 1u);
    clear();
    return spawn[0];
  }

  void crash(const pool_spawn_effect& s, const std::string& why = "boom") {
    t().connection_update(s.id, s.generation, pool_link::error, -1, why, now);
  }

  const pool_entry_view* view(const std::string& id) {
    static std::vector<pool_entry_view> views;
    views = t().entries();
    for (auto& v : views)
      if (v.id == id) return &v;
    return nullptr;
  }

  std::vector<std::string> released_slots() {
    std::vector<std::string> out;
    for (auto& r : take<pool_release_slot_effect>())
      out.push_back(r.name);
    return out;
  }

  /// Session 1 holds a live "a"; session 2 acquires a sibling (another
  /// config of "a") on the slot the first holds; session 1 lets go and the
  /// first entry drains and closes while the sibling is still spawning.
  /// Returns the sibling's spawn; the first entry's stop is left to take.
  pool_spawn_effect sibling_spawning_when_the_first_closes() {
    auto a1 = live(1, stdio("a", {"1"}));
    acquire(2, stdio("a", {"2"}));
    auto reserve = take<pool_reserve_effect>().at(0);
    // The pool itself reserved "a" for a1, so already_held here is its own.
    t().reserve_answered(reserve.id, reserve.serial, "a", reserve_result::already_held, std::nullopt, now);
    auto a2 = take<pool_spawn_effect>().at(0);
    t().detach(1, a1.id, pool_release::session_closed, now);
    auto drain = take<pool_timer_effect>().at(0);
    now += 30s;
    t().timer_fired(pool_timer_type::drain, a1.id, drain.token, now);
    return a2;
  }
};

// -- sharing and admission ----------------------------------------------------------------

TEST_F(PoolTable, ConcurrentAcquiresOfOneIdReserveAndSpawnOnce) {
  auto cfg = stdio("a");
  for (uint64_t s = 1; s <= 5; ++s)
    EXPECT_EQ(acquire(s, cfg).result, outcome::waiting);
  auto reserve = take<pool_reserve_effect>();
  ASSERT_EQ(reserve.size(), 1u);
  EXPECT_EQ(reserve[0].name, "a");
  EXPECT_EQ(reserve[0].transport, "stdio");
  t().reserve_answered(reserve[0].id, reserve[0].serial, "a", reserve_result::reserved, std::nullopt, now);
  auto spawn = take<pool_spawn_effect>();
  ASSERT_EQ(spawn.size(), 1u);
  EXPECT_EQ(spawn[0].generation, 1u);
  t().connection_update(spawn[0].id, 1, pool_link::connected, 7, {}, now);
  auto replies = take<pool_reply_effect>();
  ASSERT_EQ(replies.size(), 5u);
  for (auto& r : replies)
    EXPECT_EQ(r.id, connection_id(cfg));
  EXPECT_EQ(view(connection_id(cfg))->refs, 5u);
}

TEST_F(PoolTable, AttachAndDetachOfALiveEntryProduceNoEffect) {
  auto s = live(1, stdio("a"));
  auto j = t().attach(2, s.id, next_waiter++);
  ASSERT_EQ(j.result, outcome::ready);
  EXPECT_EQ(*j.id, s.id);
  EXPECT_EQ(j.connection, s.connection);
  EXPECT_EQ(j.generation, s.generation);
  EXPECT_TRUE(t().detach(2, s.id, pool_release::session_closed, now));
  EXPECT_TRUE(t().effects().empty());
  EXPECT_EQ(view(s.id)->refs, 1u);
}

TEST_F(PoolTable, AttachToAnUnknownIdIsRefused) {
  auto j = t().attach(1, "nope::0123456789abcdef", next_waiter++);
  EXPECT_EQ(j.result, outcome::refused);
  EXPECT_EQ(j.code, pool_error::not_connected);
}

TEST_F(PoolTable, ARefusalFailsEveryWaiterWithTheBudgetSize) {
  auto cfg = stdio("a");
  acquire(1, cfg);
  acquire(2, cfg);
  auto reserve = take<pool_reserve_effect>();
  t().reserve_answered(reserve[0].id, reserve[0].serial, "a", reserve_result::refused, 3, now);
  auto fails = take<pool_fail_effect>();
  ASSERT_EQ(fails.size(), 2u);
  EXPECT_EQ(fails[0].code, pool_error::budget_exhausted);
  EXPECT_EQ(fails[0].message, "a: budget 3 exhausted (3 reserved)");
  EXPECT_EQ(t().size(), 0u);
  EXPECT_TRUE(released_slots().empty());
}

TEST_F(PoolTable, ALateReservationReplyForAClosedEntryReleasesTheSlot) {
  auto cfg = stdio("a");
  acquire(1, cfg);
  auto reserve = take<pool_reserve_effect>();
  // The session lets go while the reservation is in flight, because its
  // config no longer wants the server: the entry closes at once.
  EXPECT_TRUE(t().detach(1, reserve[0].id, pool_release::removed, now));
  EXPECT_EQ(t().size(), 0u);
  t().reserve_answered(reserve[0].id, reserve[0].serial, "a", reserve_result::reserved, std::nullopt, now);
  EXPECT_EQ(released_slots(), std::vector<std::string>{"a"});
  EXPECT_TRUE(take<pool_spawn_effect>().empty());
}

TEST_F(PoolTable, AlreadyHeldIsNeverReleasedByThePool) {
  auto s = live(1, stdio("a"), reserve_result::already_held);
  t().detach(1, s.id, pool_release::removed, now);
  EXPECT_EQ(take<pool_stop_effect>().size(), 1u);
  EXPECT_TRUE(released_slots().empty());
}

TEST_F(PoolTable, SiblingsOfANameShareOneSlotAndTheLastOneReleasesIt) {
  auto a1 = live(1, stdio("a", {"1"}));
  auto a2 = live(1, stdio("a", {"2"}), reserve_result::already_held);
  t().detach(1, a1.id, pool_release::changed, now);
  EXPECT_TRUE(released_slots().empty()); // a2 still uses it
  t().detach(1, a2.id, pool_release::changed, now);
  EXPECT_EQ(released_slots(), std::vector<std::string>{"a"});
}

TEST_F(PoolTable, WithoutABudgetAnEntrySpawnsAtOnce) {
  opts.budget = false;
  acquire(1, stdio("a"));
  EXPECT_TRUE(take<pool_reserve_effect>().empty());
  EXPECT_EQ(take<pool_spawn_effect>().size(), 1u);
}

TEST_F(PoolTable, AFailedSpawnFailsItsWaitersAndReleasesTheSlot) {
  auto cfg = stdio("a");
  acquire(1, cfg);
  auto reserve = take<pool_reserve_effect>();
  t().reserve_answered(reserve[0].id, reserve[0].serial, "a", reserve_result::reserved, std::nullopt, now);
  auto spawn = take<pool_spawn_effect>();
  crash(spawn[0], "no such file");
  auto fails = take<pool_fail_effect>();
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_EQ(fails[0].code, pool_error::spawn_failed);
  EXPECT_EQ(fails[0].message, "a: no such file");
  EXPECT_EQ(released_slots(), std::vector<std::string>{"a"});
  EXPECT_EQ(t().size(), 0u);
}

TEST_F(PoolTable, ConfigsOfOneNameThatDifferAreDistinctEntriesOnOneSlot) {
  auto a1 = live(1, stdio("a", {"1"}));
  auto a2 = live(2, stdio("a", {"2"}), reserve_result::already_held);
  EXPECT_NE(a1.id, a2.id);
  EXPECT_NE(a1.connection, a2.connection);
  EXPECT_EQ(t().size(), 2u);
  EXPECT_EQ(t().held_slots(), std::vector<std::string>{"a"});
}

TEST_F(PoolTable, AChangedConfigStartsANewEntryWhileTheOldOneDrainsAndKeepsTheSlot) {
  auto old_entry = live(1, stdio("a", {"--root", "/a"}));
  t().detach(1, old_entry.id, pool_release::session_closed, now);
  auto drain = take<pool_timer_effect>().at(0);
  auto new_entry = live(1, stdio("a", {"--root", "/b"}), reserve_result::already_held);
  EXPECT_NE(new_entry.id, old_entry.id);
  EXPECT_EQ(view(old_entry.id)->state, pool_state::draining);
  EXPECT_EQ(view(new_entry.id)->state, pool_state::active);
  now += 30s;
  t().timer_fired(pool_timer_type::drain, old_entry.id, drain.token, now);
  auto stops = take<pool_stop_effect>();
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].connection, old_entry.connection);
  EXPECT_TRUE(released_slots().empty()); // the new entry keeps the name's slot
  EXPECT_EQ(t().held_slots(), std::vector<std::string>{"a"});
  EXPECT_FALSE(view(old_entry.id));
}

TEST_F(PoolTable, AFailedSpawnAfterAlreadyHeldReleasesNothing) {
  // Someone else holds the slot of "a": it is not the pool's to give back.
  acquire(1, stdio("a"));
  auto reserve = take<pool_reserve_effect>().at(0);
  t().reserve_answered(reserve.id, reserve.serial, "a", reserve_result::already_held, std::nullopt, now);
  crash(take<pool_spawn_effect>().at(0), "no such file");
  EXPECT_EQ(take<pool_fail_effect>().size(), 1u);
  EXPECT_TRUE(released_slots().empty());
  EXPECT_EQ(t().size(), 0u);
}

TEST_F(PoolTable, AFailedSpawnKeepsTheSlotWhileALiveSiblingHoldsIt) {
  live(1, stdio("a", {"1"}));
  acquire(1, stdio("a", {"2"}));
  auto reserve = take<pool_reserve_effect>().at(0);
  t().reserve_answered(reserve.id, reserve.serial, "a", reserve_result::already_held, std::nullopt, now);
  crash(take<pool_spawn_effect>().at(0), "no such file");
  EXPECT_EQ(take<pool_fail_effect>().size(), 1u);
  EXPECT_TRUE(released_slots().empty());
  EXPECT_EQ(t().size(), 1u);
}

TEST_F(PoolTable, AnEntryClosingDuringASiblingsSpawnKeepsTheSlot) {
  auto a2 = sibling_spawning_when_the_first_closes();
  EXPECT_EQ(take<pool_stop_effect>().size(), 1u);
  EXPECT_TRUE(released_slots().empty());
  // The sibling connects and keeps the slot...
  t().connection_update(a2.id, a2.generation, pool_link::connected, 9, {}, now);
  EXPECT_EQ(take<pool_reply_effect>().size(), 1u);
  EXPECT_TRUE(released_slots().empty());
  EXPECT_EQ(t().held_slots(), std::vector<std::string>{"a"});
}

TEST_F(PoolTable, TheLastSiblingFailingReleasesTheSlotThatThePoolReservedForTheFirst) {
  auto a2 = sibling_spawning_when_the_first_closes();
  EXPECT_TRUE(released_slots().empty());
  crash(a2, "exit code 1");
  EXPECT_EQ(take<pool_fail_effect>().size(), 1u);
  EXPECT_EQ(released_slots(), std::vector<std::string>{"a"});
  EXPECT_TRUE(t().held_slots().empty());
}

// -- drain and idle ------------------------------------------------------------------------

TEST_F(PoolTable, ASessionClosedReleaseDrainsAndTheDrainTimerCloses) {
  auto s = live(1, stdio("a"));
  t().detach(1, s.id, pool_release::session_closed, now);
  auto timers = take<pool_timer_effect>();
  ASSERT_EQ(timers.size(), 2u); // drain and idle
  EXPECT_EQ(timers[0].kind, pool_timer_type::drain);
  EXPECT_EQ(timers[0].delay, 30s);
  EXPECT_EQ(view(s.id)->state, pool_state::draining);
  EXPECT_TRUE(take<pool_stop_effect>().empty());
  now += 30s;
  t().timer_fired(pool_timer_type::drain, s.id, timers[0].token, now);
  EXPECT_EQ(take<pool_stop_effect>().size(), 1u);
  EXPECT_EQ(released_slots(), std::vector<std::string>{"a"});
}

TEST_F(PoolTable, ReattachAndReleaseWithinADrainKeepsOneTimerThatRearmsForTheRest) {
  auto s = live(1, stdio("a"));
  t().detach(1, s.id, pool_release::session_closed, now);
  auto drain = take<pool_timer_effect>()[0];
  now += 10s;
  t().attach(1, s.id, next_waiter++);
  t().detach(1, s.id, pool_release::session_closed, now);
  EXPECT_TRUE(take<pool_timer_effect>().empty()); // the first timer is still in flight
  now += 20s;
  t().timer_fired(pool_timer_type::drain, s.id, drain.token, now);
  auto again = take<pool_timer_effect>();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].delay, 10s);
  EXPECT_TRUE(take<pool_stop_effect>().empty());
  now += 10s;
  t().timer_fired(pool_timer_type::drain, s.id, again[0].token, now);
  EXPECT_EQ(take<pool_stop_effect>().size(), 1u);
}

TEST_F(PoolTable, TheIdleLimitClosesAnEntryThatFlapsButIsIdleThen) {
  opts.max_idle = 60s;
  auto s = live(1, stdio("a"));
  t().detach(1, s.id, pool_release::session_closed, now);
  auto timers = take<pool_timer_effect>();
  ASSERT_EQ(timers[1].kind, pool_timer_type::idle);
  for (int i = 0; i < 5; ++i) {
    now += 10s;
    t().attach(1, s.id, next_waiter++);
    t().detach(1, s.id, pool_release::session_closed, now);
  }
  EXPECT_TRUE(take<pool_timer_effect>().empty());
  t().timer_fired(pool_timer_type::idle, s.id, timers[1].token, now);
  EXPECT_EQ(take<pool_stop_effect>().size(), 1u);
}

TEST_F(PoolTable, TheDrainDelayIsClampedToAtLeastOneSecond) {
  opts.drain_delay = 10ms;
  auto s = live(1, stdio("a"));
  t().detach(1, s.id, pool_release::session_closed, now);
  auto timers = take<pool_timer_effect>();
  ASSERT_FALSE(timers.empty());
  EXPECT_EQ(timers[0].kind, pool_timer_type::drain);
  EXPECT_EQ(timers[0].delay, 1s);
  now += 1s;
  t().timer_fired(pool_timer_type::drain, s.id, timers[0].token, now);
  EXPECT_EQ(take<pool_stop_effect>().size(), 1u);
}

TEST_F(PoolTable, AStaleDrainTimerOfAReattachedEntryLapses) {
  auto s = live(1, stdio("a"));
  t().detach(1, s.id, pool_release::session_closed, now);
  auto drain = take<pool_timer_effect>().at(0);
  now += 20s;
  EXPECT_EQ(t().attach(2, s.id, next_waiter++).result, outcome::ready);
  EXPECT_EQ(view(s.id)->state, pool_state::active);
  now += 20s;
  t().timer_fired(pool_timer_type::drain, s.id, drain.token, now);
  EXPECT_TRUE(quiet());
  EXPECT_EQ(view(s.id)->refs, 1u);
}

TEST_F(PoolTable, TheIdleLimitSparesAnEntryInUseAndTheNextIdlePeriodArmsAFreshOne) {
  opts.max_idle = 100s;
  auto s = live(1, stdio("a"));
  t().detach(1, s.id, pool_release::session_closed, now);
  auto idle = take<pool_timer_effect>().at(1);
  ASSERT_EQ(idle.kind, pool_timer_type::idle);
  now += 10s;
  t().attach(1, s.id, next_waiter++);
  now += 90s;
  t().timer_fired(pool_timer_type::idle, s.id, idle.token, now); // in use: spared
  EXPECT_TRUE(quiet());
  ASSERT_TRUE(view(s.id));
  t().detach(1, s.id, pool_release::session_closed, now);
  std::vector<pool_timer_effect> idle_again;
  for (auto& timer : take<pool_timer_effect>())
    if (timer.kind == pool_timer_type::idle) idle_again.push_back(timer);
  ASSERT_EQ(idle_again.size(), 1u); // a fresh idle limit
  EXPECT_EQ(idle_again[0].delay, 100s);
  EXPECT_NE(idle_again[0].token, idle.token);
}

// -- release reasons (close now) -------------------------------------------------------

TEST_F(PoolTable, RemovedFromTheLastHolderClosesAtOnceAndFreesTheSlot) {
  auto s = live(1, stdio("a"));
  EXPECT_TRUE(t().detach(1, s.id, pool_release::removed, now));
  auto stops = take<pool_stop_effect>();
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].connection, s.connection);
  EXPECT_EQ(released_slots(), std::vector<std::string>{"a"});
  EXPECT_TRUE(take<pool_timer_effect>().empty());
  EXPECT_EQ(t().size(), 0u);
}

TEST_F(PoolTable, ChangedFromTheLastHolderClosesAtOnceToo) {
  auto s = live(1, stdio("a"));
  t().detach(1, s.id, pool_release::changed, now);
  EXPECT_EQ(take<pool_stop_effect>().size(), 1u);
  EXPECT_EQ(released_slots(), std::vector<std::string>{"a"});
}

TEST_F(PoolTable, ARemovedReleaseFromANonLastHolderChangesNothing) {
  auto s = live(1, stdio("a"));
  t().attach(2, s.id, next_waiter++);
  t().detach(1, s.id, pool_release::removed, now);
  EXPECT_TRUE(t().effects().empty());
  EXPECT_EQ(view(s.id)->state, pool_state::active);
  // The last holder closing its session drains as always.
  t().detach(2, s.id, pool_release::session_closed, now);
  EXPECT_TRUE(take<pool_stop_effect>().empty());
  EXPECT_EQ(view(s.id)->state, pool_state::draining);
}

TEST_F(PoolTable, ARemovedReleaseOfAnIdleSiblingKeepsTheSlotForTheOthers) {
  auto a1 = live(1, stdio("a", {"1"}));
  live(2, stdio("a", {"2"}), reserve_result::already_held);
  t().detach(1, a1.id, pool_release::removed, now);
  EXPECT_EQ(take<pool_stop_effect>().size(), 1u);
  EXPECT_TRUE(released_slots().empty());
}

// -- crashes ------------------------------------------------------------------------------

TEST_F(PoolTable, ACrashRestartsAfterTheBackoffAndTellsTheHolders) {
  auto s = live(1, stdio("a"));
  t().attach(2, s.id, next_waiter++);
  crash(s, "segfault");
  auto stops = take<pool_stop_effect>();
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_TRUE(stops[0].ask_tail);
  auto timers = take<pool_timer_effect>();
  ASSERT_EQ(timers.size(), 1u);
  EXPECT_EQ(timers[0].kind, pool_timer_type::restart);
  EXPECT_EQ(timers[0].delay, 1000ms);
  auto told = take<pool_notify_effect>();
  ASSERT_EQ(told.size(), 2u);
  for (auto& n : told) {
    EXPECT_EQ(n.what, pool_change::restarting);
    EXPECT_EQ(n.error, "segfault");
    EXPECT_EQ(n.server, "a");
  }
  now += 1s;
  t().timer_fired(pool_timer_type::restart, s.id, timers[0].token, now);
  auto spawn = take<pool_spawn_effect>();
  ASSERT_EQ(spawn.size(), 1u);
  EXPECT_EQ(spawn[0].generation, 2u);
  EXPECT_EQ(spawn[0].connection, s.connection);
  auto published = take<pool_publish_effect>();
  ASSERT_EQ(published.size(), 1u);
  EXPECT_EQ(published[0].event.reason, "crash");
  t().connection_update(s.id, 2, pool_link::connected, 43, {}, now);
  told = take<pool_notify_effect>();
  ASSERT_EQ(told.size(), 2u);
  EXPECT_EQ(told[0].what, pool_change::restarted);
  EXPECT_EQ(told[0].generation, 2u);
  EXPECT_EQ(view(s.id)->state, pool_state::active);
}

TEST_F(PoolTable, UpdatesOfASupersededGenerationAreIgnored) {
  auto s = live(1, stdio("a"));
  crash(s);
  clear();
  crash(s, "again"); // generation 1 is gone
  t().connection_update(s.id, 1, pool_link::connected, 1, {}, now);
  t().connection_down(s.id, 1, "exited", now);
  EXPECT_TRUE(quiet());
  EXPECT_EQ(view(s.id)->state, pool_state::restarting);
}

TEST_F(PoolTable, BeyondTheRestartLimitTheEntryFailsAndItsHoldersHoldNothing) {
  opts.max_restarts = 2;
  auto s = live(1, stdio("a"));
  std::vector<std::chrono::milliseconds> delays;
  for (int i = 0; i < 2; ++i) {
    crash(s);
    auto timer = take<pool_timer_effect>().at(0);
    delays.push_back(timer.delay);
    now += timer.delay;
    t().timer_fired(pool_timer_type::restart, s.id, timer.token, now);
    s = take<pool_spawn_effect>().at(0);
    t().connection_update(s.id, s.generation, pool_link::connected, 1, {}, now);
    clear();
  }
  EXPECT_EQ(delays, (std::vector<std::chrono::milliseconds>{1000ms, 2000ms}));
  crash(s, "dead for good");
  auto told = take<pool_notify_effect>();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].what, pool_change::failed);
  EXPECT_EQ(told[0].error, "dead for good");
  auto stops = take<pool_stop_effect>();
  ASSERT_EQ(stops.size(), 1u);
  ASSERT_TRUE(stops[0].failed);
  EXPECT_EQ(stops[0].failed->what, pool_event::kind::failed);
  EXPECT_EQ(t().size(), 0u);
  EXPECT_EQ(released_slots(), std::vector<std::string>{"a"});
  // Its tail goes into the event, cut to the configured lines.
  std::vector<std::string> tail(30, "line");
  t().stderr_tail(stops[0].id, stops[0].serial, std::move(stops[0].failed), tail);
  auto published = take<pool_publish_effect>();
  ASSERT_EQ(published.size(), 1u);
  EXPECT_EQ(published[0].event.what, pool_event::kind::failed);
  EXPECT_EQ(published[0].event.stderr_tail.size(), 20u);
}

TEST_F(PoolTable, AnIdleEntryThatCrashesIsClosedNotRestarted) {
  auto s = live(1, stdio("a"));
  t().detach(1, s.id, pool_release::session_closed, now);
  clear();
  crash(s);
  EXPECT_EQ(take<pool_stop_effect>().size(), 1u);
  EXPECT_TRUE(take<pool_timer_effect>().empty());
  EXPECT_EQ(t().size(), 0u);
}

TEST_F(PoolTable, AnUnrequestedDisconnectIsACrash) {
  auto s = live(1, stdio("a"));
  t().connection_update(s.id, s.generation, pool_link::disconnected, -1, {}, now);
  EXPECT_EQ(view(s.id)->state, pool_state::restarting);
  EXPECT_EQ(view(s.id)->last_error, "connection closed unexpectedly");
  EXPECT_EQ(take<pool_timer_effect>().size(), 1u);
}

TEST_F(PoolTable, AnErrorUpdateOfTheCurrentGenerationIsACrashWithItsMessage) {
  auto s = live(1, stdio("a"));
  crash(s, "injected");
  EXPECT_EQ(view(s.id)->state, pool_state::restarting);
  EXPECT_EQ(view(s.id)->last_error, "injected");
}

TEST_F(PoolTable, AConnectionThatGoesAwayIsACrash) {
  auto s = live(1, stdio("a"));
  t().connection_down(s.id, s.generation, "connection actor exited: killed", now);
  EXPECT_EQ(view(s.id)->state, pool_state::restarting);
  EXPECT_EQ(view(s.id)->last_error, "connection actor exited: killed");
}

TEST_F(PoolTable, AfterGivingUpAFreshAcquireStartsOverWithTheNextGeneration) {
  opts.max_restarts = 0;
  auto s = live(1, stdio("a"));
  crash(s, "dead");
  EXPECT_EQ(t().size(), 0u);
  clear();
  now += 60s;
  EXPECT_TRUE(take<pool_timer_effect>().empty()); // nothing restarts it later
  auto again = live(1, stdio("a"));
  EXPECT_EQ(again.id, s.id);
  EXPECT_EQ(again.generation, s.generation + 1); // generations are never reused
  EXPECT_EQ(view(s.id)->restarts, 0u);
}

TEST_F(PoolTable, AWaiterOfARestartingEntryIsAnsweredWithItsFate) {
  opts.max_restarts = 1;
  auto s = live(1, stdio("a"));
  crash(s);
  auto timer = take<pool_timer_effect>().at(0);
  EXPECT_EQ(acquire(2, stdio("a")).result, outcome::waiting);
  now += timer.delay;
  t().timer_fired(pool_timer_type::restart, s.id, timer.token, now);
  auto spawn = take<pool_spawn_effect>().at(0);
  crash(spawn, "cannot start"); // beyond the limit: given up
  auto fails = take<pool_fail_effect>();
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_EQ(fails[0].code, pool_error::spawn_failed);
  EXPECT_EQ(fails[0].message, "a: cannot start");
  EXPECT_EQ(t().size(), 0u);
}

// -- holders ------------------------------------------------------------------------------

TEST_F(PoolTable, DrainingThePoolClosesEntriesUnderTheirHolders) {
  auto s = live(1, stdio("a"));
  auto plan = t().drain_all(now);
  ASSERT_EQ(plan.to_stop.size(), 1u);
  auto told = take<pool_notify_effect>();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].session, 1u);
  EXPECT_EQ(told[0].what, pool_change::closed);
  EXPECT_EQ(released_slots(), std::vector<std::string>{"a"});
  EXPECT_EQ(acquire(2, stdio("a")).code, pool_error::pool_draining);
}

TEST_F(PoolTable, ReleaseSessionForgetsWhatItHeldSoItIsNotToldLater) {
  auto s = live(1, stdio("a"));
  t().attach(2, s.id, next_waiter++);
  EXPECT_EQ(t().release_session(1, now), 1u);
  crash(s);
  auto told = take<pool_notify_effect>();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].session, 2u);
}

TEST_F(PoolTable, ReleasingAWaitingAcquireFailsIt) {
  auto cfg = stdio("a");
  acquire(1, cfg);
  auto id = take<pool_reserve_effect>()[0].id;
  EXPECT_TRUE(t().detach(1, id, pool_release::session_closed, now));
  auto fails = take<pool_fail_effect>();
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_EQ(fails[0].code, pool_error::not_connected);
}

TEST_F(PoolTable, ReleaseSessionCountsEveryHandleAndDrainsWhatNobodyHolds) {
  auto a = live(1, stdio("a"));
  t().attach(1, a.id, next_waiter++);
  auto b = live(1, stdio("b"));
  t().attach(2, b.id, next_waiter++);
  EXPECT_EQ(t().release_session(1, now), 3u);
  EXPECT_EQ(view(a.id)->state, pool_state::draining);
  EXPECT_EQ(view(b.id)->state, pool_state::active);
  EXPECT_EQ(view(b.id)->refs, 1u);
  EXPECT_EQ(t().release_session(1, now), 0u);
}

TEST_F(PoolTable, AWaitingAcquireReleasedBeforeTheConnectStillSpawnsAndThenDrains) {
  auto cfg = stdio("a");
  acquire(1, cfg);
  auto reserve = take<pool_reserve_effect>().at(0);
  t().reserve_answered(reserve.id, reserve.serial, "a", reserve_result::reserved, std::nullopt, now);
  auto spawn = take<pool_spawn_effect>().at(0);
  EXPECT_TRUE(t().detach(1, spawn.id, pool_release::session_closed, now));
  EXPECT_EQ(take<pool_fail_effect>().size(), 1u);
  EXPECT_TRUE(take<pool_stop_effect>().empty());
  t().connection_update(spawn.id, spawn.generation, pool_link::connected, 5, {}, now);
  EXPECT_TRUE(take<pool_reply_effect>().empty());
  EXPECT_EQ(view(spawn.id)->state, pool_state::draining);
  auto drain = take<pool_timer_effect>().at(0);
  now += 30s;
  t().timer_fired(pool_timer_type::drain, spawn.id, drain.token, now);
  EXPECT_EQ(t().size(), 0u);
  EXPECT_EQ(released_slots(), std::vector<std::string>{"a"});
}

// -- restart(name) ---------------------------------------------------------------------------

TEST_F(PoolTable, RestartByNameAnswersOnceEveryEntryConnectedAgain) {
  auto a1 = live(1, stdio("a", {"1"}));
  auto a2 = live(1, stdio("a", {"2"}), reserve_result::already_held);
  t().restart("a", 77, now);
  EXPECT_TRUE(take<pool_restart_done_effect>().empty());
  EXPECT_EQ(take<pool_stop_effect>().size(), 2u);
  auto spawns = take<pool_spawn_effect>();
  ASSERT_EQ(spawns.size(), 2u);
  now += 5ms;
  for (auto& s : spawns)
    t().connection_update(s.id, s.generation, pool_link::connected, 1, {}, now);
  auto done = take<pool_restart_done_effect>();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].request, 77u);
  ASSERT_EQ(done[0].results.size(), 2u);
  EXPECT_TRUE(done[0].results[0].restarted);
  EXPECT_EQ(done[0].results[0].duration_ms, 5);
  EXPECT_TRUE(std::is_sorted(done[0].results.begin(), done[0].results.end(),
                             [](auto& x, auto& y) { return x.id < y.id; }));
  (void) a1;
  (void) a2;
}

TEST_F(PoolTable, RestartOfAnUnknownNameAnswersAtOnce) {
  t().restart("nope", 1, now);
  auto done = take<pool_restart_done_effect>();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].request, 1u);
  EXPECT_TRUE(done[0].results.empty());
}

TEST_F(PoolTable, RestartingAnIdleEntryRearmsItsDrainOnceConnected) {
  auto s = live(1, stdio("a"));
  t().detach(1, s.id, pool_release::session_closed, now);
  auto old_drain = take<pool_timer_effect>().at(0);
  now += 20s;
  t().restart("a", 1, now);
  auto spawn = take<pool_spawn_effect>().at(0);
  t().connection_update(spawn.id, spawn.generation, pool_link::connected, 2, {}, now);
  EXPECT_EQ(take<pool_restart_done_effect>().at(0).results.at(0).restarted, true);
  EXPECT_EQ(view(s.id)->state, pool_state::draining);
  auto drain = take<pool_timer_effect>();
  ASSERT_EQ(drain.size(), 1u);
  EXPECT_EQ(drain[0].delay, 30s);
  clear();
  now += 10s; // the old deadline passed: its timer lapses
  t().timer_fired(pool_timer_type::drain, s.id, old_drain.token, now);
  EXPECT_TRUE(quiet());
  now += 20s;
  t().timer_fired(pool_timer_type::drain, s.id, drain[0].token, now);
  EXPECT_EQ(take<pool_stop_effect>().size(), 1u);
  EXPECT_EQ(released_slots(), std::vector<std::string>{"a"});
}

TEST_F(PoolTable, ARestartWhoseReconnectFailsSaysWhyAndTheCrashPolicyTakesOver) {
  live(1, stdio("a"));
  t().restart("a", 5, now);
  auto spawn = take<pool_spawn_effect>().at(0);
  crash(spawn, "server exited (exit code 4)");
  auto done = take<pool_restart_done_effect>();
  ASSERT_EQ(done.size(), 1u);
  ASSERT_EQ(done[0].results.size(), 1u);
  EXPECT_FALSE(done[0].results[0].restarted);
  EXPECT_EQ(done[0].results[0].reason, "server exited (exit code 4)");
  EXPECT_EQ(view(spawn.id)->state, pool_state::restarting);
}

TEST_F(PoolTable, ARestartOfAnEntryStillStartingSaysSo) {
  live(1, stdio("a", {"1"}));
  auto slow = stdio("a", {"2"});
  acquire(2, slow);
  auto reserve = take<pool_reserve_effect>().at(0);
  t().reserve_answered(reserve.id, reserve.serial, "a", reserve_result::already_held, std::nullopt, now);
  auto spawn = take<pool_spawn_effect>().at(0);
  t().restart("a", 3, now);
  auto respawned = take<pool_spawn_effect>();
  ASSERT_EQ(respawned.size(), 1u); // only the live one
  EXPECT_NE(respawned[0].id, spawn.id);
  t().connection_update(respawned[0].id, respawned[0].generation, pool_link::connected, 2, {}, now);
  auto done = take<pool_restart_done_effect>();
  ASSERT_EQ(done.size(), 1u);
  ASSERT_EQ(done[0].results.size(), 2u);
  for (auto& r : done[0].results) {
    if (r.id == spawn.id) {
      EXPECT_FALSE(r.restarted);
      EXPECT_EQ(r.reason, "still starting");
    } else {
      EXPECT_TRUE(r.restarted);
    }
  }
  // The starting one still gets its answer.
  t().connection_update(spawn.id, spawn.generation, pool_link::connected, 3, {}, now);
  EXPECT_EQ(take<pool_reply_effect>().size(), 1u);
}

} // namespace

// -- servers that need a person's authorization ---------------------------

TEST_F(PoolTable, ASpawnThatNeedsAuthorizationFailsItsWaitersWithNeedsAuthAndLeaves) {
  auto cfg = stdio("a");
  acquire(1, cfg);
  auto reserve = take<pool_reserve_effect>();
  t().reserve_answered(reserve[0].id, reserve[0].serial, "a", reserve_result::reserved, std::nullopt, now);
  auto spawn = take<pool_spawn_effect>();
  t().connection_update(spawn[0].id, spawn[0].generation, pool_link::needs_auth, -1, "HTTP 401", now);
  auto fails = take<pool_fail_effect>();
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_EQ(fails[0].code, pool_error::needs_auth);
  EXPECT_EQ(fails[0].message, "a: HTTP 401");
  EXPECT_TRUE(take<pool_timer_effect>().empty()) << "no restart";
  EXPECT_EQ(released_slots(), std::vector<std::string>{"a"});
  EXPECT_EQ(t().size(), 0u);
}

TEST_F(PoolTable, ALiveEntryThatLosesItsAuthorizationIsNotRestartedButFailsUnderItsHolders) {
  auto s = live(1, stdio("a"));
  t().connection_update(s.id, s.generation, pool_link::needs_auth, -1, "token revoked", now);
  EXPECT_TRUE(take<pool_timer_effect>().empty()) << "no restart: a person must authorize";
  auto told = take<pool_notify_effect>();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].what, pool_change::failed);
  EXPECT_EQ(told[0].error, "token revoked");
  EXPECT_EQ(take<pool_stop_effect>().size(), 1u);
  EXPECT_EQ(t().size(), 0u);
}
