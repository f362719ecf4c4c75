#pragma once

// Work handed to an actor from outside the actors (a host's thread, a
// callback of the runtime): the jobs, which hold callbacks and so cannot be
// serialized, wait here, and the actor is woken with a plain `run` message
// that takes them. Messages between actors stay serializable.

#include <deque>
#include <memory>
#include <mutex>
#include <utility>

#include <caf/send.hpp>

#include "messages/remote.hpp"

namespace mcprt {

template <class Job>
class job_inbox {
public:
  /// False once closed: the job is dropped here, on the calling thread
  /// (whatever it answers when dropped, it answers now).
  bool push(Job job) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (!closed_) {
        jobs_.push_back(std::move(job));
        return true;
      }
    }
    return false;
  }

  std::deque<Job> take() {
    std::lock_guard<std::mutex> guard{mtx_};
    return std::exchange(jobs_, {});
  }

  /// No more jobs; the waiting ones are dropped (outside the lock).
  void close() {
    std::deque<Job> dropped;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      closed_ = true;
      dropped.swap(jobs_);
    }
  }

private:
  std::mutex mtx_;
  std::deque<Job> jobs_;
  bool closed_ = false;
};

/// Pushes `job` into `inbox` and wakes `actor` to take it.
template <class Job, class Handle>
void post_job(job_inbox<Job>& inbox, const Handle& actor, Job job) {
  if (inbox.push(std::move(job))) caf::anon_send(actor, atom::run_v);
}

/// Closes `inbox` when `self` ends, however it ends.
template <class Self, class Job>
void close_on_exit(Self* self, std::shared_ptr<job_inbox<Job>> inbox) {
  self->attach_functor([inbox](const caf::error&) { inbox->close(); });
}

} // namespace mcprt
