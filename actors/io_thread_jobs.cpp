#include "actors/io_thread_jobs.hpp"

#include <deque>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/execution_unit.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

namespace mcprt {

namespace {

/// The execution unit of one I/O thread: the context of the actors it
/// resumes, so that the jobs they wake come back here (`exec_later`).
class turn_unit final : public caf::execution_unit {
public:
  void exec_later(caf::resumable* job) override {
    // Only the owning thread touches `jobs`. An actor last run here keeps
    // this unit as its context; should anything use it from another
    // thread, the job goes to the scheduler.
    if (keeping && std::this_thread::get_id() == owner) jobs.push_back(job);
    else system().scheduler().enqueue(job);
  }

  void bind(caf::actor_system& sys) { system_ = &sys; }
  bool bound_to(const caf::actor_system& sys) const { return system_ == &sys; }

  /// Everything kept goes to the scheduler, and so does whatever comes
  /// until the turn ends.
  void hand_over() noexcept {
    keeping = false;
    while (!jobs.empty()) {
      auto* job = jobs.front();
      jobs.pop_front();
      system().scheduler().enqueue(job);
    }
  }

  void run(const io_thread_jobs_limits& limits) noexcept {
    using clock = std::chrono::steady_clock;
    auto started = clock::now();
    std::size_t resumes = 0;
    while (!jobs.empty()) {
      if (resumes == limits.max_resumes || clock::now() - started > limits.budget) {
        hand_over();
        return;
      }
      auto* job = jobs.front();
      jobs.pop_front();
      ++resumes;
      // As a scheduler worker does with each result.
      switch (job->resume(this, limits.max_throughput)) {
        case caf::resumable::resume_later: jobs.push_back(job); break;
        case caf::resumable::done:
        case caf::resumable::awaiting_message: intrusive_ptr_release(job); break;
        case caf::resumable::shutdown_execution_unit: break; // a worker's own job, never queued here
      }
    }
  }

  const std::thread::id owner = std::this_thread::get_id();
  bool keeping = false;
  std::deque<caf::resumable*> jobs;
};

thread_local turn_unit this_thread_unit;
/// Set while this thread is inside a turn.
thread_local turn_unit* in_turn = nullptr;

class io_thread_jobs final : public io::loop_turn_hook {
public:
  io_thread_jobs(caf::actor_system& sys, io_thread_jobs_limits limits) : sys_(sys), limits_(limits) {}

  void turn_begins() noexcept override {
    auto& unit = this_thread_unit;
    unit.bind(sys_);
    unit.keeping = true;
    in_turn = &unit;
  }

  void turn_ends() noexcept override {
    auto& unit = this_thread_unit;
    unit.run(limits_);
    unit.keeping = false;
    in_turn = nullptr;
  }

private:
  caf::actor_system& sys_;
  io_thread_jobs_limits limits_;
};

} // namespace

std::shared_ptr<io::loop_turn_hook> make_io_thread_jobs(caf::actor_system& sys, io_thread_jobs_limits limits) {
  return std::make_shared<io_thread_jobs>(sys, limits);
}

void before_blocking_wait() noexcept {
  if (auto* unit = in_turn) unit->hand_over();
}

namespace detail {

bool keep_for_io_turn(caf::actor_system& sys, caf::resumable* job) noexcept {
  auto* unit = in_turn;
  if (!unit || !unit->keeping || !unit->bound_to(sys)) return false;
  unit->jobs.push_back(job);
  return true;
}

} // namespace detail

} // namespace mcprt
