#pragma once

#include <chrono>
#include <cstddef>
#include <deque>

namespace mcprt {

/// Defaults for restarting a crashed connection.
inline constexpr std::chrono::milliseconds default_backoff_base{1000};
inline constexpr std::chrono::milliseconds default_backoff_cap{30000};
inline constexpr std::size_t default_max_restarts = 5;
inline constexpr std::chrono::milliseconds default_restart_window{60000};

/// Delay before retry number `attempt` (0 for the first retry):
/// `base * 2^attempt`, capped at `cap`, then spread by up to
/// `±jitter_fraction` so that servers that crashed together do not all
/// restart in the same instant. `unit_random` in [0, 1] picks the point in
/// that spread; the caller supplies it so the result is deterministic.
/// Never overflows, never exceeds `cap`, never negative. Fractions outside
/// [0, 1] (and NaN) are clamped.
std::chrono::milliseconds backoff_delay(unsigned attempt, std::chrono::milliseconds base,
                                        std::chrono::milliseconds cap, double jitter_fraction,
                                        double unit_random);

struct backoff_range {
  std::chrono::milliseconds min;
  std::chrono::milliseconds max;
};

/// The smallest and largest `backoff_delay` over all `unit_random` values.
backoff_range backoff_bounds(unsigned attempt, std::chrono::milliseconds base,
                             std::chrono::milliseconds cap, double jitter_fraction);

/// Erlang-style restart intensity: at most `max_restarts` restarts within
/// any `window`. A server that keeps crashing faster than that is given up
/// on instead of being restarted forever.
class restart_intensity {
public:
  using clock = std::chrono::steady_clock;

  restart_intensity(std::size_t max_restarts = default_max_restarts,
                    std::chrono::milliseconds window = default_restart_window);

  /// Records a restart at `now` and returns true if it is within the limit.
  /// A refused restart is not recorded, so once older restarts leave the
  /// window a new one is allowed again. `now` must not go backwards.
  bool allow(clock::time_point now);

  /// Restarts that happened in `(now - window, now]`.
  std::size_t count_in_window(clock::time_point now) const;

  /// Forgets all restarts, e.g. after the connection proved stable.
  void reset() { restarts_.clear(); }

  std::size_t max_restarts() const { return max_restarts_; }
  std::chrono::milliseconds window() const { return window_; }

private:
  std::size_t max_restarts_;
  std::chrono::milliseconds window_;
  /// Oldest first; never longer than `max_restarts_`.
  std::deque<clock::time_point> restarts_;
};

} // namespace mcprt
