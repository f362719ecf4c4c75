// The waits the process and file tests rely on (tests/support/wait_for.hpp):
// each returns when the thing happens, not at its deadline, and reports a
// deadline that passed.

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/wait_for.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

/// A child that waits until it is killed.
pid_t sleeper() {
  pid_t pid = ::fork();
  if (pid == 0)
    for (;;)
      ::pause();
  return pid;
}

/// A child that runs `then` and exits once `release` is called: no timing
/// guess, the parent says when.
struct gated_child {
  pid_t pid = -1;
  int gate = -1;

  template <class F>
  explicit gated_child(F then) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      ::close(fds[1]);
      char c;
      while (::read(fds[0], &c, 1) < 0 && errno == EINTR) {
      }
      then();
      ::_exit(0);
    }
    ::close(fds[0]);
    gate = fds[1];
  }
  void release() {
    if (gate >= 0) ::close(gate);
    gate = -1;
  }
  ~gated_child() { release(); }
};

void reap(pid_t pid) {
  int status;
  ::waitpid(pid, &status, 0);
}

struct waits_dir {
  fs::path path = fs::temp_directory_path() / ("mcprt-waits-" + std::to_string(::getpid()));
  waits_dir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~waits_dir() { fs::remove_all(path); }
};

} // namespace

TEST(TestWaits, WaitForExitReturnsWhenTheProcessEndsNotAtTheDeadline) {
  gated_child child{[] {}};
  pid_t pid = child.pid;
  ASSERT_GT(pid, 0);
  auto t0 = clock_type::now();
  child.release();
  EXPECT_TRUE(mcprt::test::wait_for_exit(pid, 30s));
  EXPECT_LT(clock_type::now() - t0, 10s);
  reap(pid);
  // Reaped: no such pid any more, which is gone too.
  EXPECT_TRUE(mcprt::test::wait_for_exit(pid, 0ms));
}

TEST(TestWaits, WaitForExitReportsAProcessThatStillRuns) {
  pid_t pid = sleeper();
  ASSERT_GT(pid, 0);
  auto t0 = clock_type::now();
  EXPECT_FALSE(mcprt::test::wait_for_exit(pid, 300ms));
  EXPECT_GE(clock_type::now() - t0, 300ms);
  ::kill(pid, SIGKILL);
  // A zombie (killed, not reaped yet) has ended.
  EXPECT_TRUE(mcprt::test::wait_for_exit(pid, 30s));
  reap(pid);
}

TEST(TestWaits, WaitForExitTakesAReusedPidForTheOldProcessGone) {
  pid_t pid = sleeper();
  ASSERT_GT(pid, 0);
  // `is_it` says the pid names another process now.
  EXPECT_TRUE(mcprt::test::wait_for_exit(pid, 10s, [] { return false; }));
  EXPECT_FALSE(mcprt::test::wait_for_exit(pid, 100ms, [] { return true; }));
  ::kill(pid, SIGKILL);
  reap(pid);
}

TEST(TestWaits, WaitForChangeInSeesAFileAnotherProcessWrites) {
  waits_dir dir;
  auto file = dir.path / "pids";
  gated_child child{[&] { std::ofstream(file) << "server 1\n"; }};
  pid_t pid = child.pid;
  ASSERT_GT(pid, 0);
  auto t0 = clock_type::now();
  child.release();
  EXPECT_TRUE(mcprt::test::wait_for_change_in(dir.path, [&] { return fs::exists(file) && fs::file_size(file) > 0; },
                                              30s));
  EXPECT_LT(clock_type::now() - t0, 10s);
  reap(pid);
}

TEST(TestWaits, WaitForChangeInReportsTheDeadline) {
  waits_dir dir;
  int asked = 0;
  auto t0 = clock_type::now();
  EXPECT_FALSE(mcprt::test::wait_for_change_in(dir.path, [&] { return ++asked < 0; }, 300ms));
  EXPECT_GE(clock_type::now() - t0, 300ms);
  // Nothing changed: asked before the wait and once at the deadline, no spinning.
  EXPECT_LE(asked, 3);
}
