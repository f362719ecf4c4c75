// The kill switch's private pool on the deterministic coordinator, with a
// real session budget and fake connections: one session, no sharing, no
// drain delay.

#include <gtest/gtest.h>

#include "actor_test_support.hpp"
#include "actors/budget.hpp"
#include "fake_connection.hpp"
#include "pool/private_pool.hpp"

using namespace mcprt;
using namespace mcprt::testing;
using nlohmann::json;

namespace {

class PrivatePool : public actor_test {
protected:
  std::shared_ptr<fake_world> world = std::make_shared<fake_world>();
  budget_actor budget;
  pool_actor pool;

  void start(std::optional<std::size_t> slots) {
    budget = track(spawn_budget(sys, slots, budget_mode::enforce, "session", {}));
    pool = track(spawn_private_pool(sys, fake_factory(world), budget));
    sched.run();
  }

  static server_config config(const std::string& name, const std::string& mode = "ok") {
    return *parse_server_config(name, json{{"command", "fake-server"}, {"fake", mode}}, config_scope::user, {}).config;
  }

  pool_holder_actor holder() { return caf::actor_cast<pool_holder_actor>(self); }

  caf::expected<pool_handle> acquire(const server_config& cfg) {
    auto rh = self->request(pool, caf::infinite, pool_acquire{1, cfg, holder()});
    sched.run();
    caf::expected<pool_handle> out{caf::error{}};
    rh.receive([&](pool_handle& h) { out = std::move(h); }, [&](caf::error& e) { out = std::move(e); });
    return out;
  }

  budget_snapshot slots() { return ask<budget_snapshot>(budget, atom::snapshot_v).value_or(budget_snapshot{}); }
};

TEST_F(PrivatePool, AnAcquireIsAnsweredOnceConnectedAndTakesASessionSlot) {
  start(2);
  auto h = acquire(config("a"));
  ASSERT_TRUE(h) << sys.render(h.error());
  EXPECT_TRUE(h->connection);
  EXPECT_EQ(world->spawns.size(), 1u);
  EXPECT_EQ(slots().reserved, std::vector<std::string>{"a"});
  EXPECT_EQ(slots().live_count, 1u);
  auto snap = ask<pool_snapshot>(pool, atom::snapshot_v);
  ASSERT_EQ(snap->entries.size(), 1u);
  EXPECT_EQ(snap->entries[0].status, pool_entry_status::active);
  EXPECT_EQ(snap->entries[0].refs, 1u);
}

TEST_F(PrivatePool, ARefusalOfTheSessionBudgetIsBudgetExhaustedAndStartsNothing) {
  start(1);
  ASSERT_TRUE(acquire(config("a")));
  auto b = acquire(config("b"));
  ASSERT_FALSE(b);
  EXPECT_TRUE(is(b.error(), errc::budget_exhausted)) << sys.render(b.error());
  EXPECT_EQ(world->spawns.size(), 1u);
  EXPECT_EQ(slots().refused, std::vector<std::string>{"b"});
}

TEST_F(PrivatePool, ADetachStopsTheConnectionAtOnceAndGivesTheSlotBack) {
  start(1);
  auto h = acquire(config("a"));
  ASSERT_TRUE(h);
  self->send(pool, pool_detach{1, h->connection_id, release_reason::session_closed});
  sched.run();
  EXPECT_TRUE(world->was_stopped(h->connection_id, h->generation));
  EXPECT_TRUE(slots().reserved.empty());
  EXPECT_TRUE(ask<pool_snapshot>(pool, atom::snapshot_v)->entries.empty());
  // The slot is free for the next server at once.
  EXPECT_TRUE(acquire(config("b")));
}

TEST_F(PrivatePool, AConnectionStillStoppingEndsWithThePool) {
  start(1);
  auto h = acquire(config("a", "stuck"));
  ASSERT_TRUE(h);
  self->send(pool, pool_detach{1, h->connection_id, release_reason::removed});
  sched.run();
  EXPECT_TRUE(world->was_stopped(h->connection_id, h->generation));
  EXPECT_TRUE(ends_with(h->connection, [&] { caf::anon_send_exit(pool, caf::exit_reason::user_shutdown); }));
}

TEST_F(PrivatePool, ACrashAfterConnectingTellsTheHolderFailedAndFreesTheSlot) {
  start(1);
  auto h = acquire(config("a"));
  ASSERT_TRUE(h);
  self->send(world->spawns.back().conn, atom::io_exit_v, std::string("exit code 9"));
  sched.run();
  auto news = drain<pool_entry_changed>();
  ASSERT_EQ(news.size(), 1u);
  EXPECT_EQ(news[0].what, pool_entry_event::failed);
  EXPECT_EQ(news[0].connection_id, h->connection_id);
  EXPECT_NE(news[0].error.find("exit code 9"), std::string::npos) << news[0].error;
  EXPECT_TRUE(slots().reserved.empty());
  // Not restarted here: the holder acquires it again after its backoff.
  EXPECT_EQ(world->spawns.size(), 1u);
}

TEST_F(PrivatePool, AServerThatFailsToStartFailsItsAcquire) {
  start(1);
  auto h = acquire(config("a", "fail"));
  ASSERT_FALSE(h);
  EXPECT_TRUE(is(h.error(), errc::spawn_failed)) << sys.render(h.error());
  EXPECT_TRUE(slots().reserved.empty());
  EXPECT_TRUE(drain<pool_entry_changed>().empty());
}

TEST_F(PrivatePool, ReleaseSessionAnswersOnceEveryConnectionHasStopped) {
  start(2);
  auto a = acquire(config("a"));
  auto b = acquire(config("b"));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(ask<uint64_t>(pool, atom::release_session_v, session_id{1}), 2u);
  EXPECT_TRUE(world->was_stopped(a->connection_id, a->generation));
  EXPECT_TRUE(world->was_stopped(b->connection_id, b->generation));
  EXPECT_TRUE(slots().reserved.empty());
  // The pool takes acquires again afterwards (a session may reconcile on).
  EXPECT_TRUE(acquire(config("c")));
}

} // namespace
