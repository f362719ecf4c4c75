#pragma once

// The actor work an I/O thread starts, run on that thread.
//
// A server's answer used to cross three threads before its HTTP client saw
// it: the reactor read it and woke a scheduler worker for the connection
// actor, which handed the answer to the call broker, whose delivery woke
// the HTTP loop. On a machine where waking a sleeping thread costs 10-30 µs
// those wake-ups were most of what a gateway call added to the floor
// (docs/performance.md). With this hook on an I/O loop, a message its
// callbacks send to an idle actor does not wake a worker: the actor runs on
// the loop's thread when the turn's callbacks are done, and so do the
// actors it wakes in turn, within limits; whatever is left then goes to the
// scheduler as before.
//
// Only mcprt's scheduler (use_mcprt_scheduler) hands jobs over; on another
// scheduler the hook does nothing.

#include <chrono>
#include <cstddef>
#include <memory>

#include <caf/fwd.hpp>

#include "io/loop_turn.hpp"

namespace mcprt {

struct io_thread_jobs_limits {
  /// Actor resumes in one turn; the jobs left go to the scheduler.
  std::size_t max_resumes = 64;
  /// Messages an actor handles per resume on the I/O thread.
  std::size_t max_throughput = 16;
  /// Once a turn's actor work has taken this long, the rest goes to the
  /// scheduler: an I/O thread serves every server's pipes (or every HTTP
  /// connection), and a long handler must not hold them up.
  std::chrono::microseconds budget{300};
};

/// A hook for an I/O loop of `sys` (io::reactor_options::turn_hook,
/// io::http_client_options::turn_hook, the daemon's HTTP server). One hook
/// may serve several loops; `sys` must outlive the loops.
std::shared_ptr<io::loop_turn_hook> make_io_thread_jobs(caf::actor_system& sys, io_thread_jobs_limits limits = {});

/// For code that blocks its thread until actors answer (the runtime's
/// blocking calls): on an I/O thread inside a turn, the jobs kept for the
/// end of the turn go to the scheduler now, and so does every further one
/// until the turn ends. Without this, a blocking call made from an I/O
/// callback would wait for work that only runs after it returns.
void before_blocking_wait() noexcept;

namespace detail {

/// For the scheduler's central queue: keeps `job` for the end of the
/// calling thread's turn and returns true when the thread is an I/O thread
/// of `sys` inside a turn.
bool keep_for_io_turn(caf::actor_system& sys, caf::resumable* job) noexcept;

} // namespace detail

} // namespace mcprt
