// Waits of the tests that deal with real processes and files: each blocks
// on the kernel's own notice (a pidfd, inotify) under a deadline, so a
// test neither sleeps a fixed time nor spins on /proc.
#pragma once

#include <poll.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace mcprt::test {

namespace wait_detail {

using clock_type = std::chrono::steady_clock;

/// Rounded up: a poll that ends a little early would otherwise spin on 0.
inline int ms_until(clock_type::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 24LL * 3600 * 1000));
}

/// Ended: no such pid, or a zombie (it only waits for its parent to reap it).
inline bool ended(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

/// Closes a descriptor at scope exit.
struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

} // namespace wait_detail

/// Waits until process `pid` has ended (exited, zombie or reaped); false
/// if it still runs after `timeout`. Works for any process, not only a
/// child. `is_it`, when given, says whether `pid` still names the process
/// the caller means (its start time, say): checked once the pidfd pins the
/// pid, so a pid reused by another process counts as the old one gone.
inline bool wait_for_exit(pid_t pid, std::chrono::milliseconds timeout, const std::function<bool()>& is_it = {}) {
  using namespace wait_detail;
  auto deadline = clock_type::now() + timeout;
  wait_detail::fd_guard pidfd{static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))};
  if (pidfd.fd < 0 && errno == ESRCH) return true; // gone before we looked
  if (pidfd.fd >= 0) {
    if (is_it && !is_it()) return true;
    // Readable once the process has exited, whether or not it was reaped.
    for (;;) {
      pollfd p{pidfd.fd, POLLIN, 0};
      int r = ::poll(&p, 1, ms_until(deadline));
      if (r > 0) return true;
      if (r == 0) return false;
      if (errno != EINTR) break; // unexpected: fall back to looking
    }
  }
  // No pidfd_open (ENOSYS, a kernel before 5.3): nothing to block on for a
  // process that is not our child, so look at it until the deadline.
  for (;;) {
    if (ended(pid) || (is_it && !is_it())) return true;
    if (clock_type::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

/// Re-checks `done` after every file created, written, closed or renamed
/// into `dir` (a file another process writes, such as a pid file), until it
/// holds: true, or the deadline: false. `dir` must exist.
inline bool wait_for_change_in(const std::filesystem::path& dir, const std::function<bool()>& done,
                               std::chrono::milliseconds timeout) {
  using namespace wait_detail;
  auto deadline = clock_type::now() + timeout;
  wait_detail::fd_guard in{::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)};
  bool watching = in.fd >= 0
                  && ::inotify_add_watch(in.fd, dir.c_str(), IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO)
                       >= 0;
  // Checked after the watch is in place: a change in between is not lost.
  for (;;) {
    if (done()) return true;
    if (clock_type::now() >= deadline) return false;
    if (!watching) {
      // No inotify (out of instances): look again shortly.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    pollfd p{in.fd, POLLIN, 0};
    int r = ::poll(&p, 1, ms_until(deadline));
    if (r < 0 && errno != EINTR) return done();
    if (r > 0) {
      // Drain: what changed does not matter, only that `done` is asked again.
      alignas(inotify_event) char buf[4096];
      while (::read(in.fd, buf, sizeof buf) > 0) {
      }
    }
  }
}

} // namespace mcprt::test
