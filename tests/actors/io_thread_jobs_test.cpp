// The actor work an I/O thread's turn starts runs on that thread when the
// turn ends (actors/io_thread_jobs.hpp), on a real actor system with
// mcprt's scheduler: where each actor ran is recorded by the actors
// themselves, so every assertion is about a thread id, not a timing.

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include "actors/io_thread_jobs.hpp"
#include "mcprt/scheduler.hpp"
#include "messages/messages.hpp"

using namespace std::chrono_literals;

namespace {

struct jobs_config : caf::actor_system_config {
  explicit jobs_config(bool ours = true) {
    mcprt::add_mcprt_types(*this);
    if (ours) mcprt::use_mcprt_scheduler(*this, 2);
  }
};

/// Where each message was handled, in order.
struct sightings {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<std::thread::id> where;

  void saw() {
    std::lock_guard<std::mutex> guard{mtx};
    where.push_back(std::this_thread::get_id());
    cv.notify_all();
  }
  std::vector<std::thread::id> wait_for(std::size_t n) {
    std::unique_lock<std::mutex> lock{mtx};
    cv.wait_for(lock, 10s, [&] { return where.size() >= n; });
    return where;
  }
  std::size_t count() {
    std::lock_guard<std::mutex> guard{mtx};
    return where.size();
  }
};

/// Runs `in_turn` inside one turn of `hook` on a thread of its own, as an
/// I/O loop would; returns that thread's id once the turn has ended.
template <class F>
std::thread::id one_turn(mcprt::io::loop_turn_hook& hook, F in_turn) {
  std::thread::id loop;
  std::thread io{[&] {
    loop = std::this_thread::get_id();
    hook.turn_begins();
    in_turn();
    hook.turn_ends();
  }};
  io.join();
  return loop;
}

/// Notes where it ran, then passes the message on to `next` (if any).
/// Spawned lazily: an actor that is still starting on a worker when the
/// message comes would take it there, so each starts with its first message.
caf::behavior relay(caf::event_based_actor* self, std::shared_ptr<sightings> log, caf::actor next) {
  return {[=](int hops) {
    log->saw();
    if (next && hops > 0) self->send(next, hops - 1);
  }};
}

TEST(IoThreadJobs, ASendInATurnRunsOnTheLoopThreadWhenTheTurnEnds) {
  jobs_config cfg;
  caf::actor_system sys{cfg};
  auto log = std::make_shared<sightings>();
  auto last = sys.spawn<caf::lazy_init>(relay, log, caf::actor{});
  auto first = sys.spawn<caf::lazy_init>(relay, log, last);
  // The time budget out of the way: what ran where must not depend on how
  // busy the machine is.
  mcprt::io_thread_jobs_limits limits;
  limits.budget = 10s;
  auto hook = mcprt::make_io_thread_jobs(sys, limits);
  std::size_t seen_before_end = 99;
  auto loop = one_turn(*hook, [&] {
    caf::anon_send(first, 1); // what a reactor callback does
    seen_before_end = log->count();
  });
  // Kept for the end of the turn, then both actors ran on the loop thread,
  // the second woken by the first: no worker took part.
  EXPECT_EQ(seen_before_end, 0u);
  auto where = log->wait_for(2);
  ASSERT_EQ(where.size(), 2u);
  EXPECT_EQ(where[0], loop);
  EXPECT_EQ(where[1], loop);
}

TEST(IoThreadJobs, OutsideATurnASendGoesToTheScheduler) {
  jobs_config cfg;
  caf::actor_system sys{cfg};
  auto log = std::make_shared<sightings>();
  auto a = sys.spawn<caf::lazy_init>(relay, log, caf::actor{});
  auto hook = mcprt::make_io_thread_jobs(sys);
  std::thread::id loop;
  std::thread io{[&] {
    loop = std::this_thread::get_id();
    hook->turn_begins();
    hook->turn_ends();
    caf::anon_send(a, 0); // after the turn
  }};
  io.join();
  auto where = log->wait_for(1);
  ASSERT_EQ(where.size(), 1u);
  EXPECT_NE(where[0], loop);
}

TEST(IoThreadJobs, WorkBeyondTheTurnsLimitGoesToTheScheduler) {
  jobs_config cfg;
  caf::actor_system sys{cfg};
  auto log = std::make_shared<sightings>();
  // A chain of four: the turn may resume two actors, the other two run on
  // scheduler workers.
  caf::actor next;
  for (int i = 0; i < 4; ++i)
    next = sys.spawn<caf::lazy_init>(relay, log, next);
  mcprt::io_thread_jobs_limits limits;
  limits.max_resumes = 2;
  limits.budget = 10s;
  auto hook = mcprt::make_io_thread_jobs(sys, limits);
  auto loop = one_turn(*hook, [&] { caf::anon_send(next, 3); });
  auto where = log->wait_for(4);
  ASSERT_EQ(where.size(), 4u);
  EXPECT_EQ(where[0], loop);
  EXPECT_EQ(where[1], loop);
  EXPECT_NE(where[2], loop);
  EXPECT_NE(where[3], loop);
}

// A blocking request from inside a turn (a host's callback calling a
// blocking member function of the runtime, say) would wait forever for the
// end of the turn it is in; before_blocking_wait hands the work over.
TEST(IoThreadJobs, ABlockingWaitInATurnIsAnsweredByTheScheduler) {
  jobs_config cfg;
  caf::actor_system sys{cfg};
  auto doubler = sys.spawn([](caf::event_based_actor*, int) -> caf::behavior { return {[](int x) { return 2 * x; }}; }, 0);
  auto hook = mcprt::make_io_thread_jobs(sys);
  int answer = 0;
  one_turn(*hook, [&] {
    mcprt::before_blocking_wait();
    caf::scoped_actor self{sys};
    self->request(doubler, 10s, 21).receive([&](int x) { answer = x; }, [](caf::error&) {});
  });
  EXPECT_EQ(answer, 42);
}

// On CAF's own scheduler nothing is kept: the hook is harmless.
TEST(IoThreadJobs, OnAnotherSchedulerTheHookDoesNothing) {
  jobs_config cfg{false};
  caf::actor_system sys{cfg};
  auto log = std::make_shared<sightings>();
  auto a = sys.spawn<caf::lazy_init>(relay, log, caf::actor{});
  auto hook = mcprt::make_io_thread_jobs(sys);
  auto loop = one_turn(*hook, [&] { caf::anon_send(a, 0); });
  auto where = log->wait_for(1);
  ASSERT_EQ(where.size(), 1u);
  EXPECT_NE(where[0], loop);
}

} // namespace
