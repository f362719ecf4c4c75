#pragma once

// Helpers for actor tests that run real server processes: an actor system
// config with mcprt's types, the server processes of the test process
// (none may outlive a test), and a deadline wait for any process to end.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_system_config.hpp>

#include "mcprt/scheduler.hpp"
#include "messages/messages.hpp"
#include "tests/actors/proc_table.hpp"
#include "tests/support/wait_for.hpp"

namespace mcprt::test {

/// Real threads on the scheduler the daemon runs, so that every test with
/// real processes exercises it too.
struct process_test_config : caf::actor_system_config {
  process_test_config() {
    add_mcprt_types(*this);
    use_mcprt_scheduler(*this);
  }
};

/// This test process's reaper processes (io/reaper: the parent of every
/// server of a reactor).
inline std::vector<pid_t> reaper_pids() {
  std::vector<pid_t> out;
  auto me = ::getpid();
  for (auto& p : all_processes())
    if (p.ppid == me && p.comm == "mcprt-reaper") out.push_back(p.pid);
  return out;
}

/// The server processes of this test process that still run: its children
/// and its reapers' children, not the reapers themselves.
inline std::vector<pid_t> child_pids() {
  std::vector<pid_t> out;
  auto me = ::getpid();
  auto all = all_processes();
  std::vector<pid_t> reapers;
  for (auto& p : all)
    if (p.ppid == me && p.comm == "mcprt-reaper") reapers.push_back(p.pid);
  for (auto& p : all) {
    bool of_reaper = std::find(reapers.begin(), reapers.end(), p.ppid) != reapers.end();
    bool mine = p.ppid == me && p.comm != "mcprt-reaper";
    // A zombie has ended; its reaper collects it a moment later.
    if ((mine || of_reaper) && p.state != 'Z') out.push_back(p.pid);
  }
  return out;
}

/// The lines "<kind> <pid>" of mcprt-test-server --pid-file, once every
/// kind in `kinds` is there (or at the deadline), with each start time.
struct recorded_process {
  std::string kind;
  pid_t pid;
  unsigned long long start;
};
inline std::vector<recorded_process> read_pid_file(const std::filesystem::path& file,
                                                   const std::vector<std::string>& kinds,
                                                   std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  std::vector<recorded_process> out;
  wait_for_change_in(file.parent_path(), [&] {
    out.clear();
    std::ifstream in(file);
    std::string kind;
    pid_t pid;
    while (in >> kind >> pid) {
      auto s = state_and_start(pid);
      out.push_back({kind, pid, s ? s->second : 0});
    }
    bool complete = true;
    for (auto& k : kinds)
      complete = complete && std::any_of(out.begin(), out.end(), [&](auto& p) { return p.kind == k; });
    return complete;
  }, timeout);
  return out;
}

/// Still in the process table, running or as a zombie.
inline bool still_there(const recorded_process& p) {
  auto s = state_and_start(p.pid);
  return s && s->second == p.start;
}

/// Waits (through a pidfd, so for any process, not only children) until
/// `pid` has ended; false when it still runs after `timeout`.
inline bool gone_within(pid_t pid, std::chrono::milliseconds timeout) {
  return wait_for_exit(pid, timeout);
}

} // namespace mcprt::test
