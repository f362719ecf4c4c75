#include "core/backoff.hpp"

#include <algorithm>
#include <limits>

namespace mcprt {

namespace {

// Written so that NaN also lands on 0.
double clamp_unit(double x) {
  return x >= 0.0 ? std::min(x, 1.0) : 0.0;
}

} // namespace

std::chrono::milliseconds backoff_delay(unsigned attempt, std::chrono::milliseconds base,
                                        std::chrono::milliseconds cap, double jitter_fraction,
                                        double unit_random) {
  using rep = std::chrono::milliseconds::rep;
  constexpr unsigned rep_bits = std::numeric_limits<rep>::digits;
  auto b = std::max<rep>(base.count(), 0);
  auto c = std::max<rep>(cap.count(), 0);
  // b * 2^attempt > c exactly when b > c >> attempt; testing it this way
  // keeps the shift from overflowing.
  rep raw = 0;
  if (b == 0)
    raw = 0;
  else if (attempt >= rep_bits || b > (c >> attempt))
    raw = c;
  else
    raw = b << attempt;
  auto j = clamp_unit(jitter_fraction);
  auto factor = 1.0 + j * (2.0 * clamp_unit(unit_random) - 1.0);
  auto jittered = static_cast<double>(raw) * factor;
  // Compared in double before converting back: a cap near the top of the
  // range would otherwise round up past it and overflow the conversion.
  if (jittered >= static_cast<double>(c)) return std::chrono::milliseconds{c};
  return std::chrono::milliseconds{static_cast<rep>(jittered)};
}

backoff_range backoff_bounds(unsigned attempt, std::chrono::milliseconds base,
                             std::chrono::milliseconds cap, double jitter_fraction) {
  // The delay grows monotonically with unit_random, so the ends are exact.
  return {backoff_delay(attempt, base, cap, jitter_fraction, 0.0),
          backoff_delay(attempt, base, cap, jitter_fraction, 1.0)};
}

restart_intensity::restart_intensity(std::size_t max_restarts, std::chrono::milliseconds window)
  : max_restarts_(max_restarts), window_(window) {
  // nop
}

bool restart_intensity::allow(clock::time_point now) {
  while (!restarts_.empty() && now - restarts_.front() >= window_)
    restarts_.pop_front();
  if (restarts_.size() >= max_restarts_) return false;
  restarts_.push_back(now);
  return true;
}

std::size_t restart_intensity::count_in_window(clock::time_point now) const {
  return static_cast<std::size_t>(
    std::count_if(restarts_.begin(), restarts_.end(),
                  [&](clock::time_point t) { return now - t < window_; }));
}

} // namespace mcprt
