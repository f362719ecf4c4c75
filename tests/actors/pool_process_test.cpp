// The pool supervisor with real connections to real mcprt-test-server
// processes (real threads, real time). Waits are deadline-bounded polls and
// receives, never fixed sleeps.

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include <caf/all.hpp>

#include "actors/budget.hpp"
#include "actors/connection.hpp"
#include "actors/event_bus.hpp"
#include "core/fingerprint.hpp"
#include "io/http_transport.hpp"
#include "io/reactor.hpp"
#include "pool/pool_supervisor.hpp"
#include "process_support.hpp"

using namespace mcprt;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string pool_test_server = MCPRT_TEST_SERVER;

using pool_process_config = mcprt::test::process_test_config;
using mcprt::test::child_pids;
using mcprt::test::gone_within;

class PoolProcess : public ::testing::Test {
protected:
  // TearDown waits until every actor is gone; then the I/O threads stop
  // (declared after the system, so destroyed before it), and only then the
  // system: an I/O thread that is still waking a worker for its last
  // message must not find the scheduler destroyed under it.
  pool_process_config cfg;
  caf::actor_system sys{cfg};
  io::reactor reactor;
  io::http_client http;
  std::optional<caf::scoped_actor> self;
  event_bus_actor bus;
  budget_actor budget;
  pool_actor pool;

  void SetUp() override { self.emplace(sys); }

  void start(pool_options opts = {}) {
    bus = spawn_event_bus(sys);
    budget = spawn_budget(sys, 4, budget_mode::enforce, "workspace", bus);
    connection_io io{&reactor, &http, {}};
    pool = spawn_pool(
      sys, [io](caf::actor_system& s, connection_config cc) { return spawn_connection(s, std::move(cc), io); },
      budget, bus, opts);
  }

  void TearDown() override {
    if (pool) {
      (*self)->request(pool, 20s, atom::drain_v, true, caf::timespan{10s})
        .receive([](drain_result&) {}, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
      (*self)->send_exit(pool, caf::exit_reason::user_shutdown);
    }
    if (budget) (*self)->send_exit(budget, caf::exit_reason::user_shutdown);
    if (bus) (*self)->send_exit(bus, caf::exit_reason::user_shutdown);
    self.reset();
    sys.await_all_actors_done();
    for (auto pid : child_pids())
      gone_within(pid, 5s);
    EXPECT_TRUE(child_pids().empty()) << "child processes outlived the test";
  }

  server_config server(std::vector<std::string> args, const std::string& name = "srv") {
    auto r = parse_server_config(name, {{"command", pool_test_server}, {"args", args}}, config_scope::user, {});
    EXPECT_TRUE(r.config) << (r.error ? r.error->message : "");
    return *r.config;
  }

  std::optional<pool_handle> acquire(session_id session, const server_config& c) {
    std::optional<pool_handle> out;
    (*self)->request(pool, 30s, pool_acquire{session, c, {}})
      .receive([&](pool_handle& h) { out = h; }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return out;
  }

  pool_snapshot snapshot() {
    pool_snapshot out;
    (*self)->request(pool, 10s, atom::snapshot_v)
      .receive([&](pool_snapshot& s) { out = s; }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return out;
  }

  connection_info info(const connection_actor& c) {
    connection_info out;
    (*self)->request(c, 10s, atom::info_v)
      .receive([&](connection_info& i) { out = i; }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return out;
  }

  /// Subscribes this test to the bus for `kind` events.
  void listen(event_kind kind) {
    (*self)->request(bus, 10s, atom::subscribe_v, caf::actor_cast<event_subscriber_actor>(*self),
                     std::vector<event_kind>{kind})
      .receive([](uint64_t) {}, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  }

  /// The next bus event, or nullopt at the deadline.
  std::optional<event> next_event(std::chrono::milliseconds timeout = 15s) {
    std::optional<event> out;
    (*self)->receive([&](event& ev) { out = std::move(ev); }, caf::after(timeout) >> [] {});
    return out;
  }
};

} // namespace

TEST_F(PoolProcess, TwoSessionsShareOneProcess) {
  start();
  auto c = server({"--tools", "2"});
  auto a = acquire(1, c);
  auto b = acquire(2, c);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->connection, b->connection);
  auto pid = info(a->connection).pid;
  EXPECT_GT(pid, 0);
  auto s = snapshot();
  ASSERT_EQ(s.entries.size(), 1u);
  EXPECT_EQ(s.entries[0].pid, pid);
  EXPECT_EQ(s.entries[0].refs, 2u);
  EXPECT_EQ(s.subprocess_count, 1u);
  EXPECT_EQ(child_pids(), std::vector<pid_t>{pid});
}

TEST_F(PoolProcess, ACrashingServerIsRestartedWithANewProcess) {
  pool_options o;
  o.table.backoff_base = 50ms;
  o.table.backoff_cap = 200ms;
  start(o);
  listen(event_kind::pool_entry_restarted);
  auto h = acquire(1, server({"--crash-after-ms", "1000"}));
  ASSERT_TRUE(h);
  auto pid1 = info(h->connection).pid;
  ASSERT_GT(pid1, 0);
  // The pool announces the restart; an acquire of the same config then waits
  // until the new connection is up.
  auto ev = next_event();
  ASSERT_TRUE(ev) << "no restart seen";
  EXPECT_EQ(ev->data.value.value("id", ""), h->connection_id);
  auto again = acquire(2, server({"--crash-after-ms", "1000"}));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->generation, h->generation + 1);
  auto pid2 = info(again->connection).pid;
  EXPECT_GT(pid2, 0);
  EXPECT_NE(pid2, pid1);
  (*self)->send(pool, pool_detach{session_id{2}, again->connection_id});
  std::optional<pool_entry_info> e;
  for (auto& x : snapshot().entries)
    if (x.id == h->connection_id) e = x;
  ASSERT_TRUE(e);
  EXPECT_EQ(e->restarts, 1u);
  EXPECT_EQ(e->generation, h->generation + 1);
  EXPECT_EQ(e->status, pool_entry_status::active);
  EXPECT_NE(e->last_error.find("exit code 3"), std::string::npos) << e->last_error;
  EXPECT_EQ(e->refs, 1u);
  EXPECT_TRUE(gone_within(pid1, 5s)); // the crashed process was reaped
}

TEST_F(PoolProcess, AServerThatClosesStdoutIsRestartedLikeACrashAndGivenUpAtTheLimit) {
  pool_options o;
  o.table.backoff_base = 50ms;
  o.table.backoff_cap = 200ms;
  o.table.max_restarts = 2;
  start(o);
  (*self)->request(bus, 10s, atom::subscribe_v, caf::actor_cast<event_subscriber_actor>(*self),
                   std::vector<event_kind>{event_kind::pool_entry_restarted, event_kind::pool_entry_failed})
    .receive([](uint64_t) {}, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  auto h = acquire(1, server({"--close-stdout-after-ms", "0"}));
  ASSERT_TRUE(h);
  std::vector<pid_t> pids{info(h->connection).pid};
  int restarts = 0;
  std::optional<event> failed;
  // Each round: connect, fall silent, 2 s until the reactor kills it, backoff.
  while (!failed) {
    auto ev = next_event(30s);
    ASSERT_TRUE(ev) << "after " << restarts << " restarts, neither a restart nor the end";
    if (ev->kind == event_kind::pool_entry_failed) {
      failed = ev;
      break;
    }
    ++restarts;
    EXPECT_EQ(ev->data.value.value("reason", ""), "crash");
    EXPECT_NE(ev->data.value.value("last_error", "").find("closed its stdout but kept running"), std::string::npos)
      << ev->data.value.dump();
    for (auto& e : snapshot().entries)
      if (e.pid > 0) pids.push_back(e.pid);
  }
  EXPECT_EQ(restarts, 2) << "restarted max_restarts times, then given up";
  EXPECT_NE(failed->data.value.value("last_error", "").find("closed its stdout but kept running"), std::string::npos)
    << failed->data.value.dump();
  EXPECT_TRUE(snapshot().entries.empty());
  for (auto pid : pids)
    EXPECT_TRUE(gone_within(pid, 10s)) << pid;
}

TEST_F(PoolProcess, ForcedDrainLeavesNoChildProcess) {
  start();
  ASSERT_TRUE(acquire(1, server({}, "a")));
  ASSERT_TRUE(acquire(1, server({"--ignore-sigterm"}, "b")));
  ASSERT_TRUE(acquire(2, server({"--tools", "3"}, "c")));
  auto pids = child_pids();
  EXPECT_EQ(pids.size(), 3u);
  drain_result r;
  (*self)->request(pool, 30s, atom::drain_v, true, caf::timespan{10s})
    .receive([&](drain_result& x) { r = x; }, [&](caf::error& e) { FAIL() << sys.render(e); });
  EXPECT_EQ(r.drained + r.forced, 3u);
  EXPECT_TRUE(r.errors.empty());
  for (auto pid : pids)
    EXPECT_TRUE(gone_within(pid, 5s)) << pid;
  EXPECT_TRUE(child_pids().empty());
  EXPECT_TRUE(snapshot().entries.empty());
  (*self)->request(pool, 10s, pool_acquire{session_id{1}, server({}, "a"), {}})
    .receive([](pool_handle&) { ADD_FAILURE() << "acquire after drain succeeded"; },
             [&](caf::error& e) { EXPECT_NE(sys.render(e).find("pool_draining"), std::string::npos) << sys.render(e); });
}

TEST_F(PoolProcess, ARemovedReleaseStopsTheProcessAndFreesTheSlotWithinASecond) {
  start();
  auto h = acquire(1, server({}, "a"));
  ASSERT_TRUE(h);
  auto pid = info(h->connection).pid;
  ASSERT_GT(pid, 0);
  auto released = std::chrono::steady_clock::now();
  (*self)->send(pool, pool_detach{session_id{1}, h->connection_id, release_reason::removed});
  EXPECT_TRUE(gone_within(pid, 5s)) << pid;
  // Well under a second on an idle machine; 3 s leaves room for a loaded one
  // (a drain would keep it 30 s).
  auto took = std::chrono::steady_clock::now() - released;
  EXPECT_LT(took, 3s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  // The slot goes back when the pool hears that the connection stopped, a
  // moment after the process ended: asked until then, within a deadline.
  budget_snapshot b;
  auto until = std::chrono::steady_clock::now() + 5s;
  do {
    (*self)->request(budget, 10s, atom::snapshot_v)
      .receive([&](budget_snapshot& x) { b = x; }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  } while (!b.reserved.empty() && std::chrono::steady_clock::now() < until);
  EXPECT_TRUE(b.reserved.empty());
  EXPECT_TRUE(snapshot().entries.empty());
}
