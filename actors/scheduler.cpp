#include "mcprt/scheduler.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <caf/logger.hpp>
// CAF's worker loop tags each job with its actor id for CAF's logger, which
// costs a dynamic_cast and a thread-local store per resume (5% of a busy
// pool's time). mcprt logs through spdlog, never through CAF's logger. The
// worker template below is instantiated only here, for this file's policy.
#undef CAF_PUSH_AID_FROM_PTR
#define CAF_PUSH_AID_FROM_PTR(ptr) static_cast<void>(0)

#include <caf/actor_system_config.hpp>
#include <caf/policy/unprofiled.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduler/coordinator.hpp>
#include <caf/scheduler/worker.hpp>

#include "actors/io_thread_jobs.hpp"

namespace mcprt {

namespace {

using caf::resumable;
using namespace std::chrono_literals;

/// Guards a worker's queue. Its critical sections are a few pointer moves
/// (a steal moves up to half a queue of pointers), far shorter than the
/// futex sleep and wake-up a contended std::mutex can cost.
class spin_lock {
public:
  static void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  void lock() noexcept {
    while (locked_.exchange(true, std::memory_order_acquire))
      for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins)
        if (spins < 64)
          cpu_relax();
        else
          std::this_thread::yield();
  }

  void unlock() noexcept {
    locked_.store(false, std::memory_order_release);
  }

private:
  std::atomic<bool> locked_{false};
};

/// FIFO per worker, steal half, wake a sleeper when work waits and nobody
/// searches (the scheme of Go's and Tokio's schedulers). See scheduler.hpp
/// for what it fixes in CAF 0.17's policy.
class fair_stealing : public caf::policy::unprofiled {
public:
  /// Idle rounds (own queue, then every victim, then a yield) before a
  /// worker sleeps: about 10-20 µs on an idle core, long enough to catch
  /// the next message of a hand-over in progress. Longer spins (100 rounds)
  /// took the CPU that the daemon's own clients and servers needed when
  /// they share its cores: gateway_overhead with one client did 15% fewer
  /// calls at 30% more daemon CPU; acquire_stress did not change.
  static constexpr int search_rounds = 20;

  /// A sleeper is woken when work arrives for it or when another worker
  /// queues work it could take. The timeout is the backstop for the one
  /// job nobody wakes anyone for, a busy worker's `next`: a timed-out
  /// sleeper looks for work once and sleeps again. 10 ms, as often as an
  /// idle CAF worker looks.
  static constexpr auto sleep_timeout = 10ms;

  /// How many jobs in a row may jump the queue through `next` before the
  /// queue's head gets its turn (Tokio's limit): enough for an ask, its
  /// answer and the follow-up to run back to back, too few to let two
  /// chatty actors starve the rest.
  static constexpr int max_next_streak = 3;

  /// A job woken by one that has run this long already waits in `next` for
  /// however long the rest of it takes: the gating actor sends a session
  /// its state after 5-10 ms of gating 10,000 servers, then frees the old
  /// documents for another 5-30 ms. Past this age a sleeper is woken to
  /// take it; most handlers end within a few microseconds and never pay for
  /// the wake-up.
  static constexpr auto long_job = 200us;

  struct coordinator_data {
    explicit coordinator_data(caf::scheduler::abstract_coordinator*) {
      // nop
    }
    std::atomic<std::size_t> next_worker{0};
    /// Workers blocked on their condition variable.
    std::atomic<std::size_t> sleepers{0};
    /// Workers between losing their last job and falling asleep; while one
    /// searches it will find new work, so nobody needs waking.
    std::atomic<std::size_t> searching{0};
  };

  struct worker_data {
    explicit worker_data(caf::scheduler::abstract_coordinator*) {
      // nop
    }
    // Each worker copies the coordinator's initial data; a fresh one is
    // all there is to copy.
    worker_data(const worker_data&) {
      // nop
    }

    spin_lock lock;
    std::deque<resumable*> queue; // guarded by lock
    /// queue.size(): lets others peek without the lock, and is what a
    /// sleeper waits on.
    std::atomic<std::size_t> size{0};
    std::mutex sleep_mu;
    std::condition_variable wake;
    std::atomic<bool> sleeping{false};
    bool poked = false; // guarded by sleep_mu: woken to steal
    std::vector<resumable*> loot; // the owner's scratch space for steals
    /// The job woken last by this worker's running job: it runs next, so
    /// that a request and its answer run back to back on warm caches.
    /// Thieves may take it (exchange) when the queue is empty.
    std::atomic<resumable*> next{nullptr};
    int next_streak = 0; // owner only: jobs in a row taken from `next`
    std::chrono::steady_clock::time_point job_started; // owner only
    std::minstd_rand rng{std::random_device{}()};
  };

  template <class Coordinator>
  void central_enqueue(Coordinator* self, resumable* job) {
    // A send from an I/O thread's callback runs on that thread when its
    // turn ends (actors/io_thread_jobs.hpp): no worker wakes for it.
    if (detail::keep_for_io_turn(self->system(), job)) return;
    auto& cd = self->data();
    auto n = self->num_workers();
    self->worker_by_id(cd.next_worker++ % n)->external_enqueue(job);
  }

  template <class Worker>
  void external_enqueue(Worker* self, resumable* job) {
    auto& wd = d(self);
    push_back(wd, job);
    if (wd.sleeping.load()) {
      // Taking the mutex orders this after the sleeper's last look at
      // `size`, so the notification cannot fall between look and wait.
      { std::lock_guard<std::mutex> guard{wd.sleep_mu}; }
      wd.wake.notify_one();
    } else {
      wake_helper(self);
    }
  }

  /// A job woken by the job running on this worker runs next; the one it
  /// displaces from `next` waits its turn at the back. CAF puts every such
  /// job in front of the queue, which lets two chatty actors starve the
  /// rest; here `max_next_streak` bounds that.
  template <class Worker>
  void internal_enqueue(Worker* self, resumable* job) {
    auto& wd = d(self);
    if (auto previous = wd.next.exchange(job)) {
      push_back(wd, previous);
      wake_helper(self);
    } else if (std::chrono::steady_clock::now() - wd.job_started > long_job) {
      wake_helper(self);
    }
  }

  template <class Worker>
  void resume_job_later(Worker* self, resumable* job) {
    push_back(d(self), job);
    wake_helper(self);
  }

  template <class Worker>
  resumable* dequeue(Worker* self) {
    auto job = take(self);
    d(self).job_started = std::chrono::steady_clock::now();
    return job;
  }

  template <class Coordinator, class UnaryFunction>
  void foreach_central_resumable(Coordinator*, UnaryFunction) {
    // nop: there is no central queue
  }

  template <class Worker, class UnaryFunction>
  void foreach_resumable(Worker* self, UnaryFunction f) {
    auto& wd = d(self);
    std::deque<resumable*> jobs;
    {
      std::lock_guard<spin_lock> guard{wd.lock};
      jobs.swap(wd.queue);
      wd.size.store(0);
    }
    if (auto job = wd.next.exchange(nullptr)) jobs.push_front(job);
    for (auto job : jobs)
      f(job);
  }

private:
  template <class Worker>
  resumable* take(Worker* self) {
    auto& wd = d(self);
    auto& cd = self->parent()->data();
    if (auto job = wd.next.exchange(nullptr)) {
      if (++wd.next_streak <= max_next_streak) return job;
      push_back(wd, job);
    }
    wd.next_streak = 0;
    for (;;) {
      if (auto job = pop_front(wd)) return job;
      cd.searching.fetch_add(1);
      for (int round = 0; round < search_rounds; ++round) {
        if (auto job = pop_front(wd)) return found(self, job);
        if (auto job = steal(self)) return found(self, job);
        std::this_thread::yield();
      }
      cd.searching.fetch_sub(1);
      for (;;) {
        bool poked = false;
        if (auto job = sleep(self, poked)) return job;
        if (poked) break; // someone has work to spare: search in earnest
        // Timed out: one look around, then back to sleep.
        if (auto job = steal(self)) {
          if (wd.size.load() > 0) wake_helper(self);
          return job;
        }
      }
    }
  }

  static void push_back(worker_data& wd, resumable* job) {
    std::lock_guard<spin_lock> guard{wd.lock};
    wd.queue.push_back(job);
    wd.size.store(wd.queue.size());
  }

  static resumable* pop_front(worker_data& wd) {
    if (wd.size.load(std::memory_order_relaxed) == 0) return nullptr;
    std::lock_guard<spin_lock> guard{wd.lock};
    if (wd.queue.empty()) return nullptr;
    auto job = wd.queue.front();
    wd.queue.pop_front();
    wd.size.store(wd.queue.size());
    return job;
  }

  /// A searching worker found work: if it was the last one searching, it
  /// wakes a sleeper to take over the search (as Go's scheduler does), so
  /// idle cores join a growing load one by one.
  template <class Worker>
  resumable* found(Worker* self, resumable* job) {
    auto& cd = self->parent()->data();
    if (cd.searching.fetch_sub(1) == 1) wake_helper(self);
    return job;
  }

  /// Takes the newer half of a victim's queue (one lock, no walk): runs the
  /// first job taken and queues the rest here.
  template <class Worker>
  resumable* steal(Worker* self) {
    auto* parent = self->parent();
    auto n = parent->num_workers();
    if (n < 2) return nullptr;
    auto& wd = d(self);
    auto start = wd.rng() % n;
    for (std::size_t i = 0; i < n; ++i) {
      auto id = (start + i) % n;
      if (id == self->id()) continue;
      auto& victim = d(parent->worker_by_id(id));
      if (victim.size.load(std::memory_order_relaxed) == 0) {
        // Nothing queued, but the job it would run next may be stuck
        // behind a long-running one.
        if (victim.next.load(std::memory_order_relaxed) != nullptr)
          if (auto job = victim.next.exchange(nullptr)) return job;
        continue;
      }
      {
        std::lock_guard<spin_lock> guard{victim.lock};
        auto take = (victim.queue.size() + 1) / 2;
        auto first = victim.queue.end() - static_cast<std::ptrdiff_t>(take);
        wd.loot.assign(first, victim.queue.end());
        victim.queue.erase(first, victim.queue.end());
        victim.size.store(victim.queue.size());
      }
      if (wd.loot.empty()) continue;
      auto job = wd.loot.front();
      if (wd.loot.size() > 1) {
        std::lock_guard<spin_lock> guard{wd.lock};
        wd.queue.insert(wd.queue.end(), wd.loot.begin() + 1, wd.loot.end());
        wd.size.store(wd.queue.size());
      }
      wd.loot.clear();
      return job;
    }
    return nullptr;
  }

  /// Wakes one sleeping worker when this one has queued work it could
  /// take, unless some worker is searching already (it will find it).
  template <class Worker>
  static void wake_helper(Worker* self) {
    auto* parent = self->parent();
    auto& cd = parent->data();
    if (cd.sleepers.load() == 0 || cd.searching.load() != 0) return;
    auto n = parent->num_workers();
    for (std::size_t i = 1; i < n; ++i) {
      auto& other = d(parent->worker_by_id((self->id() + i) % n));
      if (!other.sleeping.load()) continue;
      {
        std::lock_guard<std::mutex> guard{other.sleep_mu};
        if (!other.sleeping.load() || other.poked) continue;
        other.poked = true;
      }
      other.wake.notify_one();
      return;
    }
  }

  /// Sleeps until work arrives here or another worker pokes; returns a job
  /// from the own queue, or nullptr with `poked` telling whether to search.
  template <class Worker>
  resumable* sleep(Worker* self, bool& poked) {
    auto* parent = self->parent();
    auto& cd = parent->data();
    auto& wd = d(self);
    {
      std::unique_lock<std::mutex> guard{wd.sleep_mu};
      wd.poked = false;
      wd.sleeping.store(true);
      cd.sleepers.fetch_add(1);
      // After counting as a sleeper, look once more: a worker that queued
      // work before seeing the count did not wake anyone (seq_cst on both
      // sides, so one of the two sees the other).
      bool work_elsewhere = false;
      for (std::size_t i = 0; i < parent->num_workers() && !work_elsewhere; ++i)
        work_elsewhere = i != self->id() && d(parent->worker_by_id(i)).size.load() > 0;
      if (!work_elsewhere)
        wd.wake.wait_for(guard, sleep_timeout, [&] { return wd.size.load() > 0 || wd.poked; });
      cd.sleepers.fetch_sub(1);
      wd.sleeping.store(false);
      poked = wd.poked || work_elsewhere;
    }
    return pop_front(wd);
  }
};

} // namespace

void use_mcprt_scheduler(caf::actor_system_config& cfg, std::size_t threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", threads);
  cfg.load<caf::scheduler::coordinator<fair_stealing>>();
}

void tune_allocator_for_messages() {
#if defined(__GLIBC__)
  mallopt(M_MXFAST, 160);
#endif
}

} // namespace mcprt
