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

/// Notes where it ran, then passes the message on to `next` (if any).
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
  auto last = sys.spawn(relay, log, caf::actor{});
  auto first = sys.spawn(relay, log, last);
  auto hook = mcprt::make_io_thread_jobs(sys);
  std::thread::id loop;
  std::size_t seen_before_end = 99;
  std::thread io{[&] {
    loop = std::this_thread::get_id();
    hook->turn_begins();
    caf::anon_send(first, 1); // what a reactor callback does
    seen_before_end = log->count();
    hook->turn_ends();
  }};
  io.join();
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
  auto a = sys.spawn(relay, log, caf::actor{});
  auto hook = mcprt::make_io_thread_jobs(sys);
  std::thread::id loop;
  std::thread io{[&] {
    loop = std::this_thread::get_id();
    hook->turn_begins();
    hook->turn_ends();
    caf::anon_send(a, 0);
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
    next = sys.spawn(relay, log, next);
  mcprt::io_thread_jobs_limits limits;
  limits.max_resumes = 2;
  auto hook = mcprt::make_io_thread_jobs(sys, limits);
  std::thread::id loop;
  std::thread io{[&] {
    loop = std::this_thread::get_id();
    hook->turn_begins();
    caf::anon_send(next, 3);
    hook->turn_ends();
  }};
  io.join();
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
  std::thread io{[&] {
    hook->turn_begins();
    mcprt::before_blocking_wait();
    caf::scoped_actor self{sys};
    self->request(doubler, 10s, 21).receive([&](int x) { answer = x; }, [](caf::error&) {});
    hook->turn_ends();
  }};
  io.join();
  EXPECT_EQ(answer, 42);
}

// On CAF's own scheduler nothing is kept: the hook is harmless.
TEST(IoThreadJobs, OnAnotherSchedulerTheHookDoesNothing) {
  jobs_config cfg{false};
  caf::actor_system sys{cfg};
  auto log = std::make_shared<sightings>();
  auto a = sys.spawn(relay, log, caf::actor{});
  auto hook = mcprt::make_io_thread_jobs(sys);
  std::thread::id loop;
  std::thread io{[&] {
    loop = std::this_thread::get_id();
    hook->turn_begins();
    caf::anon_send(a, 0);
    hook->turn_ends();
  }};
  io.join();
  auto where = log->wait_for(1);
  ASSERT_EQ(where.size(), 1u);
  EXPECT_NE(where[0], loop);
}

} // namespace
