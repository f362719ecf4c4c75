#pragma once

// Every event a runtime publishes, collected by a subscriber actor, for
// tests to wait on with deadlines.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "mcprt/runtime.hpp"

namespace mcprt::test {

struct event_log {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<event> events;

  /// The number of events so far: a later wait from here sees only newer ones.
  std::size_t mark() {
    std::lock_guard<std::mutex> guard{mtx};
    return events.size();
  }

  /// The first event from index `from` on that satisfies `pred`.
  std::optional<event> wait(const std::function<bool(const event&)>& pred, std::size_t from,
                            std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock{mtx};
    std::optional<event> hit;
    cv.wait_for(lock, timeout, [&] {
      for (std::size_t i = from; i < events.size(); ++i)
        if (pred(events[i])) {
          hit = events[i];
          return true;
        }
      return false;
    });
    return hit;
  }
};

/// Subscribe it to a runtime: it appends every event to `log`.
inline event_subscriber_actor::behavior_type collector(event_subscriber_actor::pointer,
                                                       std::shared_ptr<event_log> log) {
  return {
    [log](event& ev) {
      std::lock_guard<std::mutex> guard{log->mtx};
      log->events.push_back(std::move(ev));
      log->cv.notify_all();
    },
  };
}

} // namespace mcprt::test
