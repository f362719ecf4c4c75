#pragma once

// Child processes of the benchmarks (each in its own process group), and
// what /proc says of them.

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mcprt::bench {

struct child {
  pid_t pid = -1;
  std::string out_file;
};

/// Starts `argv` in its own process group, stdout and stderr to the files.
child spawn(const std::vector<std::string>& argv, const std::string& out_file, const std::string& err_file,
            const std::vector<std::pair<std::string, std::string>>& env = {});
/// SIGTERM to the group, SIGKILL after 5 s.
void stop(child& c);
bool alive(const child& c);
/// The first line the child wrote to stdout, once it is there.
std::optional<std::string> first_line(const child& c, double timeout_s);
/// "listening on http://127.0.0.1:PORT..." -> PORT (0: none).
int port_of(const std::string& line);
/// CPU seconds (user + system) of a process so far.
double proc_cpu_s(pid_t pid);
/// Peak resident set size of a process (VmHWM), in MiB.
double proc_peak_rss_mb(pid_t pid);
/// Threads of a process right now (-1: it is gone).
int proc_threads(pid_t pid);
/// A free loopback TCP port.
int free_port();
/// The owner's bearer token that a daemon run with `--home HOME` requires
/// (HOME/.mcprt/token), or "" when there is none yet.
std::string owner_token(const std::string& home);
/// The token to send to the daemon at `port` (wait_http sends it).
void use_token(int port, const std::string& token);
std::string token_for(int port);
/// GETs `path` until it answers 200 with JSON that `ok` accepts.
bool wait_http(int port, const std::string& path, const std::function<bool(const nlohmann::json&)>& ok,
               double timeout_s);

} // namespace mcprt::bench
