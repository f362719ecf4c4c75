#pragma once

// Helpers for actor tests that run real server processes: an actor system
// config with mcprt's types, the children of the test process (none may
// outlive a test), and a deadline wait for any process to end.

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <caf/actor_system_config.hpp>

#include "actors/scheduler.hpp"
#include "messages/messages.hpp"

namespace mcprt::test {

/// Real threads on the scheduler the daemon runs, so that every test with
/// real processes exercises it too.
struct process_test_config : caf::actor_system_config {
  process_test_config() {
    add_mcprt_types(*this);
    use_mcprt_scheduler(*this);
  }
};

/// Direct children of this test process.
inline std::vector<pid_t> child_pids() {
  namespace fs = std::filesystem;
  std::vector<pid_t> out;
  auto me = ::getpid();
  for (auto& entry : fs::directory_iterator("/proc")) {
    auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state;
    int ppid;
    if (std::sscanf(line.c_str() + close + 2, "%c %d", &state, &ppid) == 2 && ppid == me)
      out.push_back(std::stoi(name));
  }
  return out;
}

/// Waits (through a pidfd, so for any process, not only children) until
/// `pid` has ended; false when it still runs after `timeout`.
inline bool gone_within(pid_t pid, std::chrono::milliseconds timeout) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, POLLIN, 0};
  int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  ::close(fd);
  return r == 1;
}

} // namespace mcprt::test
