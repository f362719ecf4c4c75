#pragma once

#include <string>
#include <vector>

namespace mcprt::bench {

int connect_fanout(const std::vector<std::string>& args);
int acquire_stress(const std::vector<std::string>& args);
int reconcile_scale(const std::vector<std::string>& args);
int hot_reload_latency(const std::vector<std::string>& args);
int soak(const std::vector<std::string>& args);
int gateway_scale(const std::vector<std::string>& args);
int gateway_overhead(const std::vector<std::string>& args);
int idle_footprint(const std::vector<std::string>& args);
int fleet_budget(const std::vector<std::string>& args);
int remote_call(const std::vector<std::string>& args);
int remote_calls(const std::vector<std::string>& args);

/// Peak resident set size of this process, in MiB.
double peak_rss_mb();
/// User + system CPU time of this process so far, in seconds.
double cpu_seconds();
/// Threads of this process right now.
int thread_count();
/// Directory of the running executable (where mcprt-test-server lives too).
std::string exe_dir();

} // namespace mcprt::bench
