#include "core/backoff.hpp"

#include <gtest/gtest.h>

#include <limits>

using namespace mcprt;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

// -- backoff_delay ------------------------------------------------------------

TEST(Backoff, GrowsExponentiallyFromBase) {
  milliseconds expected[] = {1s, 2s, 4s, 8s, 16s, 32s};
  for (unsigned attempt = 0; attempt < 6; ++attempt)
    EXPECT_EQ(backoff_delay(attempt, 1s, 1h, 0.0, 0.5), expected[attempt]) << attempt;
}

TEST(Backoff, IsCappedAtCap) {
  EXPECT_EQ(backoff_delay(4, default_backoff_base, default_backoff_cap, 0.0, 0.5), 16s);
  EXPECT_EQ(backoff_delay(5, default_backoff_base, default_backoff_cap, 0.0, 0.5), 30s);
  EXPECT_EQ(backoff_delay(6, default_backoff_base, default_backoff_cap, 0.0, 0.5), 30s);
}

TEST(Backoff, SaturatesInsteadOfOverflowingForHugeAttempts) {
  for (unsigned attempt : {62u, 63u, 64u, 1000u, std::numeric_limits<unsigned>::max()})
    EXPECT_EQ(backoff_delay(attempt, 1s, 30s, 0.0, 0.5), 30s) << attempt;
  // A cap at the top of the range must not overflow either.
  auto top = milliseconds::max();
  EXPECT_EQ(backoff_delay(1000, 1s, top, 0.0, 0.5), top);
  EXPECT_EQ(backoff_delay(1000, 1s, top, 0.5, 0.999), top);
  EXPECT_EQ(backoff_delay(62, 1ms, top, 0.0, 0.5), milliseconds{std::int64_t{1} << 62});
}

TEST(Backoff, JitterStaysWithinBounds) {
  // attempt 2: 4 s, spread by ±20%.
  auto bounds = backoff_bounds(2, 1s, 30s, 0.2);
  EXPECT_EQ(bounds.min, 3200ms);
  EXPECT_EQ(bounds.max, 4800ms);
  auto low = backoff_delay(2, 1s, 30s, 0.2, 0.0);
  auto high = backoff_delay(2, 1s, 30s, 0.2, 0.999);
  EXPECT_EQ(low, 3200ms);
  EXPECT_GE(high, 4790ms);
  EXPECT_LT(high, 4800ms);
  EXPECT_EQ(backoff_delay(2, 1s, 30s, 0.2, 0.5), 4s);
}

TEST(Backoff, JitterNeverExceedsCap) {
  auto bounds = backoff_bounds(10, 1s, 30s, 0.2);
  EXPECT_EQ(bounds.min, 24s);
  EXPECT_EQ(bounds.max, 30s);
  EXPECT_EQ(backoff_delay(10, 1s, 30s, 0.2, 0.999), 30s);
}

TEST(Backoff, IsNeverNegative) {
  EXPECT_EQ(backoff_delay(0, -5s, 30s, 0.0, 0.5), 0ms);
  EXPECT_EQ(backoff_delay(3, 1s, -1s, 0.0, 0.5), 0ms);
  // Out-of-range fractions are clamped: a jitter of 5 acts like 1.
  EXPECT_EQ(backoff_delay(0, 1s, 30s, 5.0, 0.0), 0ms);
  EXPECT_EQ(backoff_delay(0, 1s, 30s, 5.0, 1.0), 2s);
  EXPECT_EQ(backoff_delay(0, 1s, 30s, 0.2, -3.0), 800ms);
  EXPECT_EQ(backoff_delay(0, 1s, 30s, std::numeric_limits<double>::quiet_NaN(), 0.0), 1s);
}

// -- restart_intensity --------------------------------------------------------

namespace {

const restart_intensity::clock::time_point t0{};

} // namespace

TEST(RestartIntensity, DefaultsToFiveRestartsInSixtySeconds) {
  restart_intensity r;
  EXPECT_EQ(r.max_restarts(), 5u);
  EXPECT_EQ(r.window(), 60s);
}

TEST(RestartIntensity, AllowsExactlyNWithinTheWindow) {
  restart_intensity r{5, 60s};
  for (int i = 0; i < 5; ++i)
    EXPECT_TRUE(r.allow(t0 + i * 1s)) << i;
  EXPECT_EQ(r.count_in_window(t0 + 5s), 5u);
}

TEST(RestartIntensity, RefusesTheNPlusFirstWithoutRecordingIt) {
  restart_intensity r{3, 60s};
  for (int i = 0; i < 3; ++i)
    r.allow(t0 + i * 1s);
  EXPECT_FALSE(r.allow(t0 + 10s));
  EXPECT_FALSE(r.allow(t0 + 20s));
  EXPECT_EQ(r.count_in_window(t0 + 20s), 3u);
}

TEST(RestartIntensity, OldRestartsSlideOutOfTheWindow) {
  restart_intensity r{3, 60s};
  EXPECT_TRUE(r.allow(t0));
  EXPECT_TRUE(r.allow(t0 + 20s));
  EXPECT_TRUE(r.allow(t0 + 40s));
  EXPECT_FALSE(r.allow(t0 + 59s));
  // Exactly one window later the first restart no longer counts.
  EXPECT_EQ(r.count_in_window(t0 + 60s), 2u);
  EXPECT_TRUE(r.allow(t0 + 60s));
  EXPECT_FALSE(r.allow(t0 + 61s));
  EXPECT_TRUE(r.allow(t0 + 80s));
}

TEST(RestartIntensity, AllowsAgainAfterTheWindowPasses) {
  restart_intensity r{2, 60s};
  r.allow(t0);
  r.allow(t0 + 1s);
  EXPECT_FALSE(r.allow(t0 + 2s));
  auto later = t0 + 1s + 60s;
  EXPECT_EQ(r.count_in_window(later), 0u);
  EXPECT_TRUE(r.allow(later));
  EXPECT_TRUE(r.allow(later + 1s));
  EXPECT_FALSE(r.allow(later + 2s));
}

TEST(RestartIntensity, ResetForgetsEarlierRestarts) {
  restart_intensity r{1, 60s};
  r.allow(t0);
  EXPECT_FALSE(r.allow(t0 + 1s));
  r.reset();
  EXPECT_EQ(r.count_in_window(t0 + 1s), 0u);
  EXPECT_TRUE(r.allow(t0 + 1s));
}

TEST(RestartIntensity, ZeroRestartsAllowsNone) {
  restart_intensity r{0, 60s};
  EXPECT_FALSE(r.allow(t0));
  EXPECT_EQ(r.count_in_window(t0), 0u);
}
