#include <gtest/gtest.h>

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>
#include <filesystem>
#include <string>

#include "io/child_process.hpp"
#include "process_test_support.hpp"
#include "tests/support/wait_for.hpp"

using namespace mcprt::io;
using namespace std::chrono_literals;

namespace {

using mcprt::io::test::server;

// Reads until a full line arrives on `fd` or the deadline passes.
std::string read_line(int fd, std::chrono::milliseconds timeout = 10s) {
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return line;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return line;
    char c;
    ssize_t n = ::read(fd, &c, 1);
    if (n <= 0) return line;
    if (c == '\n') return line;
    line.push_back(c);
  }
}

// Reads `fd` until a line contains `needle` (or the deadline passes).
std::string read_until(int fd, const std::string& needle, std::chrono::milliseconds timeout = 10s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto line = read_line(fd, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
    if (line.find(needle) != std::string::npos) return line;
    if (line.empty()) break;
  }
  return {};
}

bool wait_gone(pid_t pid, std::chrono::milliseconds timeout = 10s) {
  return mcprt::test::wait_for_exit(pid, timeout);
}

bool wait_exit(child_process& c, std::chrono::milliseconds timeout = 10s) {
  if (!wait_gone(c.pid(), timeout)) return false;
  return c.try_wait().has_value();
}

void write_line(int fd, const std::string& s) {
  std::string line = s + "\n";
  ASSERT_EQ(::write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
}

} // namespace

TEST(ChildProcess, SpawnsAServerAndSpeaksJsonRpcOverItsPipes) {
  auto c = child_process::spawn({server, {}, {}, {}});
  EXPECT_GT(c.pid(), 0);
  EXPECT_EQ(::getpgid(c.pid()), c.pid()) << "the child must lead its own process group";
  write_line(c.stdin_fd(), R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})");
  auto reply = read_line(c.stdout_fd());
  EXPECT_NE(reply.find("\"protocolVersion\":\"2025-06-18\""), std::string::npos) << reply;
  auto st = c.shutdown(5s, 5s);
  EXPECT_TRUE(st.exited);
  EXPECT_EQ(st.code, 0) << st.describe();
}

TEST(ChildProcess, ClosingStdinEndsAWellBehavedServer) {
  auto c = child_process::spawn({server, {}, {}, {}});
  auto st = c.shutdown(10s, 10s);
  EXPECT_TRUE(st.exited) << st.describe();
  EXPECT_FALSE(c.running());
}

TEST(ChildProcess, AServerIgnoringSigtermIsKilled) {
  auto c = child_process::spawn({server, {"--ignore-sigterm"}, {}, {}});
  // Wait until the server is up (and has installed its SIG_IGN).
  write_line(c.stdin_fd(), R"({"jsonrpc":"2.0","id":1,"method":"ping"})");
  ASSERT_NE(read_line(c.stdout_fd()).find("\"id\":1"), std::string::npos);
  auto st = c.shutdown(100ms, 100ms);
  EXPECT_FALSE(st.exited);
  EXPECT_EQ(st.signal, SIGKILL) << st.describe();
  EXPECT_EQ(st.describe(), "killed by SIGKILL");
}

// A daemon blocks SIGTERM in all its threads to take it with sigwait; the
// servers it starts must not inherit that, or they could not be stopped.
TEST(ChildProcess, AServerStartsWithNoSignalBlockedWhateverTheSpawningThreadBlocks) {
  std::string blocked;
  exit_status st;
  bool gone = false;
  // Its own thread: the mask is per thread, and the child dies with the
  // thread that spawned it (PDEATHSIG), so everything happens in there.
  std::thread([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &set, nullptr), 0);
    auto c = child_process::spawn({"sleep", {"30"}, {}, {}});
    // Only after exec does /proc show sleep's own mask.
    for (int i = 0; i < 1000 && blocked.empty(); ++i) {
      std::ifstream status("/proc/" + std::to_string(c.pid()) + "/status");
      std::string line, name;
      bool exec_done = false;
      while (std::getline(status, line)) {
        if (line.rfind("Name:", 0) == 0) exec_done = line.find("sleep") != std::string::npos;
        if (exec_done && line.rfind("SigBlk:", 0) == 0) blocked = line.substr(7);
      }
      if (blocked.empty()) sched_yield();
    }
    ::kill(c.pid(), SIGTERM);
    gone = wait_gone(c.pid());
    if (auto s = c.try_wait()) st = *s;
  }).join();
  EXPECT_EQ(blocked.find_first_not_of("\t 0"), std::string::npos) << "SigBlk:" << blocked;
  EXPECT_FALSE(blocked.empty());
  EXPECT_TRUE(gone);
  EXPECT_EQ(st.signal, SIGTERM) << st.describe();
}

TEST(ChildProcess, ShutdownLeavesNoGrandchildBehind) {
  auto c = child_process::spawn({server, {"--spawn-child"}, {}, {}});
  auto line = read_until(c.stderr_fd(), "child pid ");
  ASSERT_FALSE(line.empty());
  pid_t grandchild = std::stoi(line.substr(line.find("child pid ") + 10));
  ASSERT_EQ(::getpgid(grandchild), c.pid());
  c.shutdown(2s, 2s);
  EXPECT_TRUE(wait_gone(grandchild)) << "grandchild " << grandchild << " outlived its server";
}

TEST(ChildProcess, DestructorKillsTheGroupAndReaps) {
  pid_t pid;
  {
    auto c = child_process::spawn({server, {"--ignore-sigterm"}, {}, {}});
    pid = c.pid();
  }
  // Reaped by the destructor: the pid no longer exists at all (not a zombie).
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(ChildProcess, ReportsTheExitCodeOfACrash) {
  auto c = child_process::spawn({server, {"--crash-after-ms", "10"}, {}, {}});
  ASSERT_TRUE(wait_exit(c));
  auto st = *c.try_wait();
  EXPECT_TRUE(st.exited);
  EXPECT_EQ(st.code, 3);
  EXPECT_EQ(st.describe(), "exit code 3");
}

TEST(ChildProcess, MissingCommandIsAClearSpawnError) {
  try {
    child_process::spawn({"mcprt-no-such-command", {}, {}, {}});
    FAIL() << "expected spawn_error";
  } catch (const spawn_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("cannot run 'mcprt-no-such-command'"), std::string::npos) << what;
    EXPECT_NE(what.find("No such file"), std::string::npos) << what;
  }
}

TEST(ChildProcess, MissingWorkingDirectoryIsAClearSpawnError) {
  try {
    child_process::spawn({server, {}, {}, std::string("/nonexistent/mcprt-dir")});
    FAIL() << "expected spawn_error";
  } catch (const spawn_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/mcprt-dir"), std::string::npos) << e.what();
  }
}

TEST(ChildProcess, EnvIsMergedOverTheRuntimeEnvironmentAndCwdIsApplied) {
  auto dir = std::filesystem::temp_directory_path();
  auto c = child_process::spawn({"sh", {"-c", "echo \"$MCPRT_TEST_VALUE|$(pwd)|${PATH:+has-path}\""},
                                 {{"MCPRT_TEST_VALUE", "from-config"}}, dir.string()});
  auto line = read_line(c.stdout_fd());
  EXPECT_EQ(line, "from-config|" + std::filesystem::canonical(dir).string() + "|has-path");
  ASSERT_TRUE(wait_exit(c));
  EXPECT_EQ(c.try_wait()->code, 0);
}

TEST(ChildProcess, CommandIsResolvedThroughThePathOfTheMergedEnvironment) {
  auto dir = std::filesystem::path(server).parent_path();
  auto c = child_process::spawn({"mcprt-test-server", {"--version"}, {{"PATH", dir.string() + ":/usr/bin:/bin"}}, {}});
  EXPECT_FALSE(read_line(c.stdout_fd()).empty());
  ASSERT_TRUE(wait_exit(c));
  EXPECT_EQ(c.try_wait()->code, 0);
}
