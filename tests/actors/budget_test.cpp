// The budget actor on CAF's test coordinator (deterministic: no threads, no
// real time), plus one concurrency check on a real multi-threaded system.

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "actors/budget.hpp"
#include "actors/event_bus.hpp"
#include "actor_test_support.hpp"

using namespace mcprt;
using namespace mcprt::testing;
using namespace std::chrono_literals;
using nlohmann::json;
using names = std::vector<std::string>;

namespace {

names refused_names(const event& ev) {
  names out;
  for (auto& r : ev.data.value.at("refused"))
    out.push_back(r.at("name").get<std::string>());
  return out;
}

/// Exactly one event: a refused batch naming only `name`, over `transport`.
void expect_one_batch_of_one(const std::vector<event>& evs, const std::string& name, const std::string& transport) {
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].kind, event_kind::child_refused_batch);
  EXPECT_EQ(refused_names(evs[0]), (names{name}));
  EXPECT_EQ(evs[0].data.value.at("refused").at(0).at("transport"), transport);
}

class Budget : public actor_test {
protected:
  event_bus_actor bus;

  void SetUp() override {
    bus = track(spawn_event_bus(sys));
    auto seq = ask<uint64_t>(bus, atom::subscribe_v, self_sink(),
                             std::vector<event_kind>{event_kind::budget_warning,
                                                     event_kind::child_refused_batch});
    ASSERT_EQ(seq, 0u);
  }

  budget_actor spawn(std::optional<std::size_t> limit, budget_mode mode,
                     std::string scope = "workspace") {
    return track(spawn_budget(sys, limit, mode, std::move(scope), bus));
  }

  reserve_reply reserve(const budget_actor& b, const std::string& name) {
    return ask<reserve_reply>(b, atom::reserve_v, name).value_or(reserve_reply::refused);
  }

  bool release(const budget_actor& b, const std::string& name) {
    return ask<bool>(b, atom::release_v, name).value_or(false);
  }

  budget_snapshot snapshot(const budget_actor& b) {
    return ask<budget_snapshot>(b, atom::snapshot_v).value_or(budget_snapshot{});
  }

  /// Fire-and-forget messages, then run everything.
  template <class Handle, class... Ts>
  void tell(const Handle& b, Ts&&... xs) {
    self->send(b, std::forward<Ts>(xs)...);
    sched.run();
  }

  /// Budget events published on the bus since the last call.
  std::vector<event> events() {
    sched.run();
    return drain<event>();
  }
};

} // namespace

// -- reserve / release ------------------------------------------------------------

TEST_F(Budget, ReserveReleaseAlreadyHeldAndRefusedAtCapInEnforce) {
  auto b = spawn(2, budget_mode::enforce);
  EXPECT_EQ(reserve(b, "a"), reserve_reply::reserved);
  EXPECT_EQ(reserve(b, "a"), reserve_reply::already_held);
  EXPECT_EQ(reserve(b, "b"), reserve_reply::reserved);
  EXPECT_EQ(reserve(b, "c"), reserve_reply::refused);
  // Already held wins even when full.
  EXPECT_EQ(reserve(b, "b"), reserve_reply::already_held);
  EXPECT_TRUE(release(b, "a"));
  EXPECT_FALSE(release(b, "a")); // idempotent
  EXPECT_FALSE(release(b, "never"));
  EXPECT_EQ(reserve(b, "c"), reserve_reply::reserved);
  auto s = snapshot(b);
  EXPECT_EQ(s.reserved, (names{"b", "c"}));
  EXPECT_EQ(s.reserved_count, 2u);
  // A refused reserve records nothing by itself (record_refusal does).
  EXPECT_TRUE(s.refused.empty());
}

TEST_F(Budget, WarnModeTracksAndWarnsButNeverRefuses) {
  auto b = spawn(2, budget_mode::warn);
  for (auto n : {"a", "b", "c", "d", "e"})
    EXPECT_EQ(reserve(b, n), reserve_reply::reserved) << n;
  tell(b, atom::refused_v, std::string("f"), std::string("stdio")); // no-op unless enforcing
  auto evs = events();
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].kind, event_kind::budget_warning);
  EXPECT_EQ(evs[0].data.value, (json{{"scope", "workspace"},
                                     {"budget", 2},
                                     {"mode", "warn"},
                                     {"reserved_count", 2},
                                     {"live_count", 2},
                                     {"threshold_ratio", 0.75}}));
  auto s = snapshot(b);
  EXPECT_EQ(s.reserved_count, 5u);
  EXPECT_TRUE(s.refused.empty());
}

TEST_F(Budget, OffModeTracksNothingAndEmitsNothing) {
  auto b = spawn(1, budget_mode::off);
  EXPECT_EQ(reserve(b, "a"), reserve_reply::reserved);
  EXPECT_EQ(reserve(b, "a"), reserve_reply::reserved);
  EXPECT_EQ(reserve(b, "b"), reserve_reply::reserved);
  EXPECT_FALSE(release(b, "a"));
  tell(b, atom::begin_pass_v, false);
  tell(b, atom::refused_v, std::string("c"), std::string("stdio"));
  tell(b, atom::end_pass_v);
  tell(b, atom::refused_v, std::string("d"), std::string("http"));
  EXPECT_TRUE(events().empty());
  auto s = snapshot(b);
  EXPECT_EQ(s.mode, "off");
  EXPECT_TRUE(s.reserved.empty());
  EXPECT_EQ(s.reserved_count, 0u);
  EXPECT_TRUE(s.refused.empty());
}

TEST_F(Budget, UnlimitedBudgetIsUntrackedAndSnapshotsAsNotLimited) {
  auto b = spawn(std::nullopt, budget_mode::warn);
  for (auto n : {"a", "b", "c"})
    EXPECT_EQ(reserve(b, n), reserve_reply::reserved);
  EXPECT_TRUE(events().empty());
  auto s = snapshot(b);
  EXPECT_FALSE(s.limited);
  EXPECT_EQ(s.budget, 0u);
  EXPECT_EQ(s.reserved_count, 0u);
}

TEST_F(Budget, WorksWithoutABus) {
  auto b = track(spawn_budget(sys, 1, budget_mode::enforce, "workspace", event_bus_actor{}));
  EXPECT_EQ(reserve(b, "a"), reserve_reply::reserved); // would warn
  EXPECT_EQ(reserve(b, "b"), reserve_reply::refused);
  tell(b, atom::refused_v, std::string("b"), std::string("stdio")); // would emit a batch
  EXPECT_TRUE(events().empty());
  EXPECT_EQ(snapshot(b).refused, (names{"b"}));
}

// -- warning hysteresis ---------------------------------------------------------------

// The reference sequence without `d`: with d held, releasing a and b only
// drops to 2/4 = 50%, which is not below 37.5% and would not re-arm (see
// the next test and tests/core/budget_ledger_test.cpp).
TEST_F(Budget, WarningHysteresisReferenceSequence) {
  auto b = spawn(4, budget_mode::enforce);
  reserve(b, "a");
  reserve(b, "b");
  EXPECT_TRUE(events().empty());
  reserve(b, "c"); // 3/4 crosses 75%
  auto first = events();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].kind, event_kind::budget_warning);
  EXPECT_EQ(first[0].data.value.at("reserved_count"), 3);
  EXPECT_EQ(first[0].data.value.at("live_count"), 3);
  EXPECT_EQ(first[0].data.value.at("mode"), "enforce");
  EXPECT_EQ(first[0].data.value.at("budget"), 4);
  EXPECT_EQ(first[0].data.value.at("threshold_ratio"), 0.75);
  release(b, "a"); // 2/4: still disarmed
  EXPECT_TRUE(events().empty());
  release(b, "b"); // 1/4: below 37.5%, re-arms silently
  EXPECT_TRUE(events().empty());
  reserve(b, "a"); // 2/4
  EXPECT_TRUE(events().empty());
  reserve(b, "b"); // 3/4: fires again
  auto second = events();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].kind, event_kind::budget_warning);
  EXPECT_EQ(second[0].data.value.at("reserved_count"), 3);
  EXPECT_GT(second[0].seq, first[0].seq);
}

TEST_F(Budget, WarningDoesNotRearmAtHalfTheBudget) {
  auto b = spawn(4, budget_mode::enforce);
  for (auto n : {"a", "b", "c", "d"})
    reserve(b, n);
  EXPECT_EQ(events().size(), 1u); // at c
  release(b, "a");
  release(b, "b"); // 2/4 = 50%: not below 37.5%
  reserve(b, "a");
  reserve(b, "b");
  EXPECT_TRUE(events().empty());
}

// -- refusals -------------------------------------------------------------------------

TEST_F(Budget, BulkPassWithThreeRefusalsEmitsOneBatch) {
  auto b = spawn(1, budget_mode::enforce);
  tell(b, atom::begin_pass_v, false);
  EXPECT_EQ(reserve(b, "a"), reserve_reply::reserved);
  events(); // a's warning
  for (auto [n, t] : {std::pair{"b", "stdio"}, {"c", "http"}, {"d", ""}}) {
    EXPECT_EQ(reserve(b, n), reserve_reply::refused);
    tell(b, atom::refused_v, std::string(n), std::string(t));
  }
  EXPECT_TRUE(events().empty()); // queued until the pass ends
  tell(b, atom::end_pass_v);
  auto evs = events();
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].kind, event_kind::child_refused_batch);
  EXPECT_EQ(evs[0].data.value,
            (json{{"scope", "workspace"},
                  {"budget", 1},
                  {"mode", "enforce"},
                  {"reserved_count", 1},
                  {"live_count", 1},
                  {"refused",
                   {{{"name", "b"}, {"transport", "stdio"}, {"reason", "budget_exhausted"}},
                    {{"name", "c"}, {"transport", "http"}, {"reason", "budget_exhausted"}},
                    {{"name", "d"}, {"transport", "unknown"}, {"reason", "budget_exhausted"}}}}}));
  EXPECT_EQ(snapshot(b).refused, (names{"b", "c", "d"}));
}

TEST_F(Budget, NestedPassesEmitOnceAtTheOutermostEnd) {
  auto b = spawn(1, budget_mode::enforce);
  reserve(b, "a");
  events();
  tell(b, atom::begin_pass_v, false);
  tell(b, atom::refused_v, std::string("b"), std::string("stdio"));
  tell(b, atom::begin_pass_v, true);
  tell(b, atom::refused_v, std::string("c"), std::string("stdio"));
  tell(b, atom::end_pass_v); // inner end: nothing
  EXPECT_TRUE(events().empty());
  tell(b, atom::end_pass_v);
  auto evs = events();
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(refused_names(evs[0]), (names{"b", "c"}));
  tell(b, atom::end_pass_v); // unbalanced end: nothing
  EXPECT_TRUE(events().empty());
}

TEST_F(Budget, RefusalOutsideAPassEmitsABatchOfOneAtOnce) {
  auto b = spawn(1, budget_mode::enforce);
  reserve(b, "a");
  events();
  tell(b, atom::refused_v, std::string("b"), std::string("http"));
  expect_one_batch_of_one(events(), "b", "http");
  EXPECT_EQ(snapshot(b).refused, (names{"b"}));
}

TEST_F(Budget, ClearingTheLastRefusalEmitsNothing) {
  auto b = spawn(1, budget_mode::enforce);
  reserve(b, "a");
  tell(b, atom::refused_v, std::string("b"), std::string("stdio"));
  EXPECT_EQ(events().size(), 2u); // warning, batch of one
  release(b, "a");
  EXPECT_EQ(reserve(b, "b"), reserve_reply::reserved);
  tell(b, atom::clear_refusal_v, std::string("b"));
  auto evs = events();
  // Only b's own warning (1/1) after the release re-armed it: no empty batch.
  for (auto& ev : evs)
    EXPECT_NE(ev.kind, event_kind::child_refused_batch);
  EXPECT_TRUE(snapshot(b).refused.empty());
}

TEST_F(Budget, ReserveWithTransportRecordsItsOwnRefusalAndClearsItOnSuccess) {
  auto b = spawn(1, budget_mode::enforce);
  EXPECT_EQ(ask<reserve_reply>(b, atom::reserve_v, std::string("a"), std::string("stdio")),
            reserve_reply::reserved);
  events();
  // Refused: recorded in the same handler, so the batch of one is out
  // before the reply reaches the caller.
  EXPECT_EQ(ask<reserve_reply>(b, atom::reserve_v, std::string("b"), std::string("http")),
            reserve_reply::refused);
  expect_one_batch_of_one(events(), "b", "http");
  EXPECT_EQ(snapshot(b).refused, (names{"b"}));
  // Once b gets a slot, its refusal is gone, with no empty batch.
  release(b, "a");
  EXPECT_EQ(ask<reserve_reply>(b, atom::reserve_v, std::string("b"), std::string("http")),
            reserve_reply::reserved);
  for (auto& ev : events())
    EXPECT_NE(ev.kind, event_kind::child_refused_batch);
  EXPECT_TRUE(snapshot(b).refused.empty());
  // already_held clears too, and a plain reserve records nothing.
  EXPECT_EQ(ask<reserve_reply>(b, atom::reserve_v, std::string("b"), std::string("http")),
            reserve_reply::already_held);
  EXPECT_EQ(reserve(b, "c"), reserve_reply::refused);
  EXPECT_TRUE(snapshot(b).refused.empty());
}

TEST_F(Budget, ReserveWithTransportInsideAPassJoinsThePassBatch) {
  auto b = spawn(1, budget_mode::enforce);
  tell(b, atom::begin_pass_v, false);
  for (auto name : {"a", "b", "c"})
    ask<reserve_reply>(b, atom::reserve_v, std::string(name), std::string("stdio"));
  for (auto& ev : events())
    EXPECT_NE(ev.kind, event_kind::child_refused_batch);
  tell(b, atom::end_pass_v);
  auto evs = events();
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(refused_names(evs[0]), (names{"b", "c"}));
}

TEST_F(Budget, LastRefusedSurvivesUntilTheNextFullPassStarts) {
  auto b = spawn(1, budget_mode::enforce);
  reserve(b, "a");
  tell(b, atom::begin_pass_v, false);
  tell(b, atom::refused_v, std::string("b"), std::string("stdio"));
  tell(b, atom::end_pass_v);
  EXPECT_EQ(snapshot(b).refused, (names{"b"})); // between passes
  tell(b, atom::begin_pass_v, true);            // partial recovery keeps them
  EXPECT_EQ(snapshot(b).refused, (names{"b"}));
  tell(b, atom::end_pass_v);
  tell(b, atom::begin_pass_v, false); // full discovery forgets them
  EXPECT_TRUE(snapshot(b).refused.empty());
  tell(b, atom::end_pass_v);
  // Only the warning and the first batch were published.
  auto evs = events();
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0].kind, event_kind::budget_warning);
  EXPECT_EQ(evs[1].kind, event_kind::child_refused_batch);
}

// -- snapshot and session scope -----------------------------------------------------------

TEST_F(Budget, SnapshotFields) {
  auto b = spawn(3, budget_mode::enforce);
  reserve(b, "x");
  reserve(b, "y");
  auto s = snapshot(b);
  EXPECT_EQ(s.scope, "workspace");
  EXPECT_TRUE(s.limited);
  EXPECT_EQ(s.budget, 3u);
  EXPECT_EQ(s.mode, "enforce");
  EXPECT_EQ(s.reserved, (names{"x", "y"}));
  EXPECT_EQ(s.reserved_count, 2u);
  EXPECT_EQ(s.live_count, 2u); // workspace: the reserved count
  EXPECT_TRUE(s.refused.empty());
}

TEST_F(Budget, SessionScopeCarriesScopeAndReportedLiveCount) {
  auto b = spawn(4, budget_mode::enforce, "session");
  tell(b, atom::live_count_v, uint64_t{1});
  for (auto n : {"a", "b", "c", "d"})
    reserve(b, n);
  tell(b, atom::refused_v, std::string("e"), std::string("stdio"));
  auto evs = events();
  ASSERT_EQ(evs.size(), 2u);
  for (auto& ev : evs) {
    EXPECT_EQ(ev.data.value.at("scope"), "session");
    EXPECT_EQ(ev.data.value.at("live_count"), 1);
  }
  EXPECT_EQ(evs[0].data.value.at("reserved_count"), 3);
  EXPECT_EQ(evs[1].data.value.at("reserved_count"), 4);
  auto s = snapshot(b);
  EXPECT_EQ(s.scope, "session");
  EXPECT_EQ(s.live_count, 1u);
  EXPECT_EQ(s.reserved_count, 4u);
}

// -- concurrency ----------------------------------------------------------------------------

namespace {

struct tally {
  int reserved = 0;
  int refused = 0;
  int other = 0;
  int errors = 0;
  std::vector<int> reply_order; // client id of each reply
};

/// One reserve at a time, the next on the reply: with ten clients the
/// budget's mailbox holds their requests interleaved.
void reserve_next(caf::event_based_actor* self, budget_actor b, int client, int i, int n,
                  tally* t) {
  if (i == n) {
    self->quit();
    return;
  }
  auto name = "c" + std::to_string(client) + "-" + std::to_string(i);
  self->request(b, caf::infinite, atom::reserve_v, name)
    .then(
      [=](reserve_reply r) {
        t->reply_order.push_back(client);
        if (r == reserve_reply::reserved)
          ++t->reserved;
        else if (r == reserve_reply::refused)
          ++t->refused;
        else
          ++t->other;
        reserve_next(self, b, client, i + 1, n, t);
      },
      [=](caf::error&) {
        ++t->errors;
        reserve_next(self, b, client, i + 1, n, t);
      });
}

caf::behavior reserve_client(caf::event_based_actor* self, budget_actor b, int client, int n,
                             tally* t) {
  reserve_next(self, b, client, 0, n, t);
  return {[](int) {}};
}

} // namespace

TEST_F(Budget, ThousandInterleavedReservesNeverOvershoot) {
  auto b = spawn(50, budget_mode::enforce);
  tally t;
  for (int c = 0; c < 10; ++c)
    sys.spawn(reserve_client, b, c, 100, &t);
  sched.run();
  EXPECT_EQ(t.reserved, 50);
  EXPECT_EQ(t.refused, 950);
  EXPECT_EQ(t.other, 0);
  EXPECT_EQ(t.errors, 0);
  // The clients really were interleaved: the first ten replies went to ten
  // different clients.
  ASSERT_GE(t.reply_order.size(), 10u);
  std::vector<int> first(t.reply_order.begin(), t.reply_order.begin() + 10);
  std::sort(first.begin(), first.end());
  EXPECT_EQ(std::unique(first.begin(), first.end()) - first.begin(), 10);
  auto s = snapshot(b);
  EXPECT_EQ(s.reserved_count, 50u);
  EXPECT_EQ(s.reserved.size(), 50u);
  EXPECT_EQ(events().size(), 1u); // one warning, no batch (nothing recorded)
}

// Not on the test coordinator: ten threads with their own scoped actors
// against the real scheduler. Waits are receives with deadlines.
TEST(BudgetConcurrency, TenThreadsOfBlockingClientsNeverOvershoot) {
  struct config : caf::actor_system_config {
    config() { add_mcprt_types(*this); }
  } cfg;
  caf::actor_system sys{cfg};
  auto b = spawn_budget(sys, 50, budget_mode::enforce, "workspace", event_bus_actor{});
  std::atomic<int> reserved{0}, refused{0}, failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 10; ++c)
    clients.emplace_back([&, c] {
      caf::scoped_actor self{sys};
      for (int i = 0; i < 100; ++i)
        self->request(b, 10s, atom::reserve_v, "c" + std::to_string(c) + "-" + std::to_string(i))
          .receive(
            [&](reserve_reply r) {
              if (r == reserve_reply::reserved)
                ++reserved;
              else if (r == reserve_reply::refused)
                ++refused;
              else
                ++failed;
            },
            [&](caf::error&) { ++failed; });
    });
  for (auto& t : clients)
    t.join();
  EXPECT_EQ(reserved, 50);
  EXPECT_EQ(refused, 950);
  EXPECT_EQ(failed, 0);
  caf::scoped_actor self{sys};
  self->request(b, 10s, atom::snapshot_v)
    .receive([](budget_snapshot& s) { EXPECT_EQ(s.reserved_count, 50u); },
             [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  self->send_exit(b, caf::exit_reason::user_shutdown);
}

// -- slot freed -----------------------------------------------------------------------------

namespace {

std::vector<budget_slot_freed> freed_seen(caf::scoped_actor& listener) {
  std::vector<budget_slot_freed> out;
  for (bool more = true; more;)
    listener->receive([&](budget_slot_freed& x) { out.push_back(std::move(x)); },
                      caf::after(std::chrono::seconds(0)) >> [&] { more = false; });
  return out;
}

} // namespace

TEST_F(Budget, ListenersHearOfAFreedSlotOnlyWhileSomeoneWaitsForRoom) {
  auto b = spawn(1, budget_mode::enforce);
  caf::scoped_actor listener{sys};
  tell(b, atom::subscribe_v, caf::actor_cast<budget_listener_actor>(listener));
  tell(b, atom::subscribe_v, caf::actor_cast<budget_listener_actor>(listener)); // once is enough
  EXPECT_EQ(reserve(b, "a"), reserve_reply::reserved);
  // Nobody refused yet: a release wakes nobody.
  EXPECT_TRUE(release(b, "a"));
  EXPECT_TRUE(freed_seen(listener).empty());
  EXPECT_EQ(reserve(b, "a"), reserve_reply::reserved);
  EXPECT_EQ(ask<reserve_reply>(b, atom::reserve_v, std::string("b"), std::string("stdio")), reserve_reply::refused);
  events();
  // A release of something not held frees nothing.
  EXPECT_FALSE(release(b, "zzz"));
  EXPECT_TRUE(freed_seen(listener).empty());
  EXPECT_TRUE(release(b, "a"));
  sched.run();
  auto seen = freed_seen(listener);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].name, "a");
  // Once the refused server got its slot, the refusal is off the record.
  EXPECT_EQ(ask<reserve_reply>(b, atom::reserve_v, std::string("b"), std::string("stdio")), reserve_reply::reserved);
  EXPECT_TRUE(release(b, "b"));
  sched.run();
  EXPECT_TRUE(freed_seen(listener).empty());
}

TEST_F(Budget, ARefusalPendingInAPassCountsAsSomeoneWaiting) {
  auto b = spawn(1, budget_mode::enforce);
  caf::scoped_actor listener{sys};
  tell(b, atom::subscribe_v, caf::actor_cast<budget_listener_actor>(listener));
  EXPECT_EQ(reserve(b, "a"), reserve_reply::reserved);
  tell(b, atom::begin_pass_v, false);
  tell(b, atom::refused_v, std::string("b"), std::string("stdio"));
  EXPECT_TRUE(release(b, "a"));
  sched.run();
  EXPECT_EQ(freed_seen(listener).size(), 1u);
}

// -- with a fleet link -----------------------------------------------

namespace {

struct fake_fleet_state {
  std::size_t granted = 0;
  std::vector<fleet_listener_actor> listeners;
};

/// Grants the first `grants` reserves, refuses the rest; logs what it is asked.
fleet_link_actor::behavior_type fake_fleet(fleet_link_actor::stateful_pointer<fake_fleet_state> self,
                                           std::size_t grants, std::shared_ptr<names> log) {
  return {
    [=](atom::reserve, const std::string& name) {
      log->push_back("reserve " + name);
      if (self->state.granted >= grants) return fleet_grant::refused;
      ++self->state.granted;
      return fleet_grant::reserved;
    },
    [=](atom::release, const std::string& name) { log->push_back("release " + name); },
    [=](atom::fleet_free) {
      for (auto& l : self->state.listeners)
        self->send(l, atom::fleet_free_v);
    },
    [=](atom::subscribe, fleet_listener_actor& l) { self->state.listeners.push_back(std::move(l)); },
    [=](atom::drain) { return true; },
    [=](atom::snapshot) { return fleet_status{}; },
  };
}

template <class Handle>
reserve_reply take(caf::scoped_actor&, Handle&& h) {
  reserve_reply out = reserve_reply::refused;
  std::move(h).receive([&](reserve_reply r) { out = r; }, [](caf::error&) {});
  return out;
}

} // namespace

TEST_F(Budget, AFleetRefusalUndoesTheLocalSlotAndAPassStillGivesOneBatch) {
  auto log = std::make_shared<names>();
  auto link = track(sys.spawn(fake_fleet, std::size_t{1}, log));
  auto b = track(spawn_budget(sys, 3, budget_mode::enforce, "workspace", bus, link));
  sched.run();
  // One pass, its reserves in flight at the fleet when the pass ends.
  self->send(b, atom::begin_pass_v, false);
  auto x = self->request(b, caf::infinite, atom::reserve_v, std::string{"x"}, std::string{"stdio"});
  auto y = self->request(b, caf::infinite, atom::reserve_v, std::string{"y"}, std::string{"stdio"});
  auto z = self->request(b, caf::infinite, atom::reserve_v, std::string{"z"}, std::string{"http"});
  self->send(b, atom::end_pass_v);
  sched.run();
  EXPECT_EQ(take(self, std::move(x)), reserve_reply::reserved);
  EXPECT_EQ(take(self, std::move(y)), reserve_reply::refused);
  EXPECT_EQ(take(self, std::move(z)), reserve_reply::refused);
  auto evs = events();
  // (The local budget's warning may come first: 3 of 3 were reserved locally
  // while the fleet was asked.)
  evs.erase(std::remove_if(evs.begin(), evs.end(), [](const event& e) { return e.kind != event_kind::child_refused_batch; }),
            evs.end());
  ASSERT_EQ(evs.size(), 1u) << "the pass's refusals, as one batch";
  EXPECT_EQ(refused_names(evs[0]), (names{"y", "z"}));
  EXPECT_EQ(evs[0].data.value.at("refused").at(1).at("reason"), "budget_exhausted");
  // The local slots of the refused names went back: only x is held.
  EXPECT_EQ(snapshot(b).reserved, names{"x"});
  // A held name is not asked for again; a release goes on to the fleet.
  EXPECT_EQ(reserve(b, "x"), reserve_reply::already_held);
  EXPECT_TRUE(release(b, "x"));
  EXPECT_EQ(*log, (names{"reserve x", "reserve y", "reserve z", "release x"}));
}

TEST_F(Budget, ReservesOfOneNameInFlightShareTheFleetsAnswer) {
  auto log = std::make_shared<names>();
  auto link = track(sys.spawn(fake_fleet, std::size_t{5}, log));
  auto b = track(spawn_budget(sys, std::nullopt, budget_mode::off, "workspace", bus, link));
  sched.run();
  auto first = self->request(b, caf::infinite, atom::reserve_v, std::string{"x"});
  auto second = self->request(b, caf::infinite, atom::reserve_v, std::string{"x"});
  sched.run();
  EXPECT_EQ(take(self, std::move(first)), reserve_reply::reserved);
  EXPECT_EQ(take(self, std::move(second)), reserve_reply::already_held);
  EXPECT_EQ(*log, names{"reserve x"});
}

TEST_F(Budget, AFreedFleetSlotWakesTheListenersOnlyWhileRefusalsWait) {
  auto log = std::make_shared<names>();
  auto link = track(sys.spawn(fake_fleet, std::size_t{0}, log));
  auto b = track(spawn_budget(sys, std::nullopt, budget_mode::off, "workspace", bus, link));
  sched.run();
  self->send(b, atom::subscribe_v, caf::actor_cast<budget_listener_actor>(self));
  sched.run();
  tell(link, atom::fleet_free_v);
  EXPECT_TRUE(drain<budget_slot_freed>().empty()) << "nobody waits for room";
  auto x = self->request(b, caf::infinite, atom::reserve_v, std::string{"x"}, std::string{"stdio"});
  sched.run();
  EXPECT_EQ(take(self, std::move(x)), reserve_reply::refused);
  events();
  tell(link, atom::fleet_free_v);
  EXPECT_EQ(drain<budget_slot_freed>().size(), 1u);
}

TEST_F(Budget, ANameReleasedWhileTheFleetIsAskedGivesTheGrantStraightBack) {
  auto log = std::make_shared<names>();
  auto link = track(sys.spawn(fake_fleet, std::size_t{5}, log));
  auto b = track(spawn_budget(sys, 3, budget_mode::enforce, "workspace", bus, link));
  sched.run();
  auto x = self->request(b, caf::infinite, atom::reserve_v, std::string{"x"});
  sched.run_once(); // the budget asks the fleet
  auto released = self->request(b, caf::infinite, atom::release_v, std::string{"x"});
  sched.run(); // the release is read before the fleet's answer
  EXPECT_EQ(take(self, std::move(x)), reserve_reply::refused);
  bool freed = false;
  std::move(released).receive([&](bool f) { freed = f; }, [](caf::error&) {});
  EXPECT_TRUE(freed);
  EXPECT_EQ(*log, (names{"reserve x", "release x"})) << "the fleet keeps no slot for x";
  EXPECT_TRUE(snapshot(b).reserved.empty());
  // Reserved again, x is asked for again: nothing stayed 'held'.
  EXPECT_EQ(reserve(b, "x"), reserve_reply::reserved);
  EXPECT_EQ(log->back(), "reserve x");
  EXPECT_EQ(snapshot(b).reserved, names{"x"});
}

TEST_F(Budget, ANameReservedAgainWhileTheFleetIsAskedTakesTheAnswerOnItsWay) {
  auto log = std::make_shared<names>();
  auto link = track(sys.spawn(fake_fleet, std::size_t{5}, log));
  auto b = track(spawn_budget(sys, 3, budget_mode::enforce, "workspace", bus, link));
  sched.run();
  auto first = self->request(b, caf::infinite, atom::reserve_v, std::string{"x"});
  sched.run_once();
  self->send(b, atom::release_v, std::string{"x"});
  auto again = self->request(b, caf::infinite, atom::reserve_v, std::string{"x"});
  sched.run();
  EXPECT_NE(take(self, std::move(first)), reserve_reply::refused);
  EXPECT_NE(take(self, std::move(again)), reserve_reply::refused);
  EXPECT_EQ(*log, names{"reserve x"}) << "one grant, kept";
  EXPECT_EQ(snapshot(b).reserved, names{"x"});
  EXPECT_TRUE(release(b, "x"));
  EXPECT_EQ(log->back(), "release x");
}
