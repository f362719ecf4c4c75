// mcprt-bench NAME [options]: runs one benchmark.

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "mcprt/scheduler.hpp"
#include "bench.hpp"

namespace mcprt::bench {

double peak_rss_mb() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto secs = [](timeval t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

int thread_count() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return 0;
}

std::string exe_dir() {
  char buf[4096];
  auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<std::size_t>(n));
  return p.substr(0, p.rfind('/'));
}

} // namespace mcprt::bench

int main(int argc, char** argv) {
  using namespace mcprt::bench;
  // As the daemon runs, so that the figures are the daemon's.
  mcprt::tune_allocator_for_messages();
  std::map<std::string, int (*)(const std::vector<std::string>&)> benches = {
    {"connect_fanout", connect_fanout},
    {"acquire_stress", acquire_stress},
    {"reconcile_scale", reconcile_scale},
    {"hot_reload_latency", hot_reload_latency},
    {"soak", soak},
    {"gateway_scale", gateway_scale},
    {"gateway_overhead", gateway_overhead},
    {"idle_footprint", idle_footprint},
    {"fleet_budget", fleet_budget},
    {"remote_call", remote_call},
    {"remote_calls", remote_calls},
  };
  if (argc < 2 || !benches.count(argv[1])) {
    std::cerr << "usage: mcprt-bench NAME [options]\n  benchmarks:";
    for (auto& [name, fn] : benches)
      std::cerr << " " << name;
    std::cerr << "\n";
    return 2;
  }
  return benches[argv[1]](std::vector<std::string>(argv + 2, argv + argc));
}
