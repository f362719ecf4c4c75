#pragma once

// Call loops of the benchmarks that time one request at a time per client:
// calls per second and latency percentiles over a fixed time.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace mcprt::bench {

struct loop_result {
  int clients = 0;
  uint64_t calls = 0;
  uint64_t errors = 0;
  double seconds = 0;
  double p50_us = 0, p99_us = 0;
  double rate() const { return seconds > 0 ? static_cast<double>(calls) / seconds : 0; }
};

/// One client's call: true on a good answer.
using call_fn = std::function<bool()>;

/// `clients` threads, each with its own caller from `make`, call in a loop
/// for `seconds`.
loop_result run_call_loop(const std::function<call_fn()>& make, int clients, double seconds);

/// Calls until one answers (unmeasured), at most 10 s: "connected" comes a
/// moment before the first call can go through.
bool warm_up(const call_fn& call);

/// The first line of `file` that starts with `prefix`, once it is there.
std::optional<std::string> line_starting(const std::string& file, const std::string& prefix, double timeout_s);

} // namespace mcprt::bench
