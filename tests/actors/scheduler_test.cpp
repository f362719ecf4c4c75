// mcprt's scheduler on real threads: fairness between actors that keep a
// worker busy, stealing by an idle worker, and shutdown with work queued.
// Function actors take a dummy int: CAF 0.17 dereferences a null argument
// tuple when spawning one without arguments (UBSan reports it).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include "mcprt/scheduler.hpp"
#include "messages/messages.hpp"

using namespace std::chrono_literals;

namespace {

struct scheduler_config : caf::actor_system_config {
  explicit scheduler_config(std::size_t threads) {
    mcprt::add_mcprt_types(*this);
    mcprt::use_mcprt_scheduler(*this, threads);
  }
};

TEST(Scheduler, RunsTheRequestedNumberOfWorkers) {
  scheduler_config three{3};
  caf::actor_system sys3{three};
  EXPECT_EQ(sys3.scheduler().num_workers(), 3u);
  scheduler_config per_core{0};
  caf::actor_system sys{per_core};
  EXPECT_EQ(sys.scheduler().num_workers(), std::max(1u, std::thread::hardware_concurrency()));
}

// Fifty clients ping-pong with one server on one worker. CAF 0.17's own
// scheduler runs a woken actor first, so the first client and the server
// trade the worker between them until that client is done, while the
// others have not even started. Here a woken actor jumps the queue at most
// a few times in a row.
TEST(Scheduler, ChattyActorsDoNotStarveTheRest) {
  constexpr int clients = 50;
  constexpr int rounds = 200;
  scheduler_config cfg{1};
  caf::actor_system sys{cfg};
  auto server = sys.spawn([](caf::event_based_actor*, int) -> caf::behavior { return {[](int x) { return x; }}; }, 0);
  auto counts = std::make_shared<std::vector<std::atomic<int>>>(clients);
  caf::scoped_actor test{sys};
  auto first_done = std::make_shared<std::atomic<bool>>(false);
  std::vector<caf::actor> started;
  for (int i = 0; i < clients; ++i)
    started.push_back(sys.spawn([=, reporter = caf::actor{test}](caf::event_based_actor* self, int) -> caf::behavior {
      auto loop = std::make_shared<std::function<void()>>();
      std::weak_ptr<std::function<void()>> weak = loop;
      *loop = [=] {
        self->request(server, caf::infinite, 1).then([=](int) {
          if (++(*counts)[static_cast<std::size_t>(i)] == rounds) {
            // One worker: nobody else runs while this reads the counts.
            if (!first_done->exchange(true)) {
              int slowest = rounds;
              for (auto& c : *counts)
                slowest = std::min(slowest, c.load());
              self->send(reporter, slowest);
            }
            self->quit();
            return;
          }
          if (auto l = weak.lock()) (*l)();
        });
      };
      return {[loop](caf::atom_value) { (*loop)(); }};
    }, 0));
  for (auto& c : started)
    test->send(c, caf::atom("go"));
  int slowest = -1;
  test->receive([&](int x) { slowest = x; }, caf::after(30s) >> [] {});
  // When the first client finished its 200 round trips, every other client
  // had its turns too (in practice all are within a few round trips).
  EXPECT_GE(slowest, rounds / 4);
  for (auto& c : started)
    test->send_exit(c, caf::exit_reason::user_shutdown);
  test->send_exit(server, caf::exit_reason::user_shutdown);
}

// A job that keeps its worker busy: the jobs it woke must be taken by the
// other worker, whether it is searching or asleep.
TEST(Scheduler, IdleWorkerTakesWorkFromABusyOne) {
  constexpr int jobs = 20;
  scheduler_config cfg{2};
  caf::actor_system sys{cfg};
  struct shared {
    std::atomic<int> ran{0};
    std::mutex mu;
    std::set<std::thread::id> threads; // where the jobs ran
    std::thread::id blocker;
  };
  auto st = std::make_shared<shared>();
  auto blocker = sys.spawn([st](caf::event_based_actor* self, int) -> caf::behavior {
    return {[=](caf::atom_value) {
      {
        std::lock_guard<std::mutex> guard{st->mu};
        st->blocker = std::this_thread::get_id();
      }
      for (int i = 0; i < jobs; ++i)
        self->spawn([st](caf::event_based_actor* job, int) {
          {
            std::lock_guard<std::mutex> guard{st->mu};
            st->threads.insert(std::this_thread::get_id());
          }
          ++st->ran;
          job->quit();
        }, 0);
      // Holds this worker until the others ran (or the deadline passed).
      auto deadline = std::chrono::steady_clock::now() + 10s;
      while (st->ran.load() < jobs && std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();
      return st->ran.load();
    }};
  }, 0);
  caf::scoped_actor test{sys};
  int ran = -1;
  test->request(blocker, 30s, caf::atom("go")).receive([&](int n) { ran = n; }, [](caf::error&) {});
  EXPECT_EQ(ran, jobs);
  std::lock_guard<std::mutex> guard{st->mu};
  EXPECT_EQ(st->threads.size(), 1u) << "every job ran on the one free worker";
  EXPECT_EQ(st->threads.count(st->blocker), 0u);
  test->send_exit(blocker, caf::exit_reason::user_shutdown);
}

// Actors that message themselves without end keep every queue full; the
// system still stops them all and shuts down.
TEST(Scheduler, StopsActorsThatKeepTheQueuesFull) {
  constexpr int spinners = 200;
  auto handled = std::make_shared<std::atomic<long>>(0);
  {
    scheduler_config cfg{2};
    caf::actor_system sys{cfg};
    caf::scoped_actor test{sys};
    std::vector<caf::actor> all;
    for (int i = 0; i < spinners; ++i) {
      all.push_back(sys.spawn([handled](caf::event_based_actor* self, int) -> caf::behavior {
        self->send(self, 0);
        return {[=](int n) {
          ++*handled;
          self->send(self, n + 1);
        }};
      }, 0));
      test->monitor(all.back());
    }
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (handled->load() < 100 * spinners && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    EXPECT_GE(handled->load(), 100 * spinners);
    for (auto& a : all)
      test->send_exit(a, caf::exit_reason::user_shutdown);
    int down = 0;
    for (int i = 0; i < spinners; ++i)
      test->receive([&](caf::down_msg&) { ++down; }, caf::after(30s) >> [] {});
    EXPECT_EQ(down, spinners);
  } // the system's destructor joins every worker
}

} // namespace
