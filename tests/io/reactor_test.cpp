#include <gtest/gtest.h>

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "io/reactor.hpp"
#include "process_test_support.hpp"

using namespace mcprt::io;
using namespace std::chrono_literals;

namespace {

using mcprt::io::test::ping;
using mcprt::io::test::server;

const std::string initialize_line =
  R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"
  "\n";

// Observes one process's callbacks from the test thread.
class collector {
 public:
  process_events events() {
    process_events ev;
    ev.on_stdout = [this](std::string_view bytes) {
      std::lock_guard<std::mutex> lk(m_);
      EXPECT_FALSE(exited_) << "stdout after on_exit";
      out_.append(bytes);
      cv_.notify_all();
    };
    ev.on_stderr_line = [this](std::string line) {
      std::lock_guard<std::mutex> lk(m_);
      EXPECT_FALSE(exited_) << "stderr after on_exit";
      err_.push_back(std::move(line));
      cv_.notify_all();
    };
    ev.on_exit = [this](const process_exit& how) {
      std::lock_guard<std::mutex> lk(m_);
      ++exits_;
      exited_ = true;
      how_ = how;
      cv_.notify_all();
    };
    return ev;
  }

  template <class Pred>
  bool wait(Pred pred, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lk(m_);
    return cv_.wait_for(lk, timeout, [&] { return pred(); });
  }

  bool wait_stdout(const std::string& needle, std::chrono::milliseconds timeout = 10s) {
    return wait([&] { return out_.find(needle) != std::string::npos; }, timeout);
  }
  bool wait_stdout_size(std::size_t n, std::chrono::milliseconds timeout = 10s) {
    return wait([&] { return out_.size() >= n; }, timeout);
  }
  bool wait_stderr(const std::string& needle, std::chrono::milliseconds timeout = 10s) {
    return wait(
      [&] {
        for (auto& l : err_)
          if (l.find(needle) != std::string::npos) return true;
        return false;
      },
      timeout);
  }
  bool wait_exit(std::chrono::milliseconds timeout = 10s) {
    return wait([&] { return exited_; }, timeout);
  }

  std::string out() {
    std::lock_guard<std::mutex> lk(m_);
    return out_;
  }
  std::vector<std::string> err() {
    std::lock_guard<std::mutex> lk(m_);
    return err_;
  }
  process_exit how() {
    std::lock_guard<std::mutex> lk(m_);
    return how_;
  }
  int exits() {
    std::lock_guard<std::mutex> lk(m_);
    return exits_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::string out_;
  std::vector<std::string> err_;
  int exits_ = 0;
  bool exited_ = false;
  process_exit how_;
};

// Waits for any process (not only our children) to exit, via a pidfd.
bool wait_gone_via_pidfd(pid_t pid, std::chrono::milliseconds timeout = 10s) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH; // already gone (and reaped)
  pollfd p{fd, POLLIN, 0};
  int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  ::close(fd);
  return r == 1;
}

// Reaped, not merely exited: the pid does not exist at all (no zombie).
bool pid_gone(pid_t pid) {
  errno = 0;
  return ::kill(pid, 0) == -1 && errno == ESRCH;
}

std::size_t thread_count_of_this_process() {
  std::size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (auto* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}

pid_t grandchild_pid(collector& c) {
  if (!c.wait_stderr("child pid ")) return -1;
  for (auto& l : c.err())
    if (auto at = l.find("child pid "); at != std::string::npos) return std::stoi(l.substr(at + 10));
  return -1;
}

} // namespace

TEST(Reactor, UsesOneThread) {
  EXPECT_EQ(reactor::thread_count(), 1u);
}

TEST(Reactor, SpawnsAServerAndSpeaksJsonRpc) {
  reactor r;
  collector c;
  auto s = r.spawn({server, {}, {}, {}}, c.events());
  EXPECT_GT(s.id, 0u);
  EXPECT_GT(s.pid, 0);
  EXPECT_EQ(::getpgid(s.pid), s.pid) << "the child must lead its own process group";
  EXPECT_EQ(r.process_count(), 1u);
  r.write(s.id, initialize_line);
  ASSERT_TRUE(c.wait_stdout("\n")) << c.out();
  EXPECT_NE(c.out().find("\"protocolVersion\":\"2025-06-18\""), std::string::npos) << c.out();
  r.shutdown(s.id, 5s, 5s);
  ASSERT_TRUE(c.wait_exit());
  EXPECT_TRUE(c.how().exited);
  EXPECT_EQ(c.how().code, 0) << c.how().describe();
  EXPECT_EQ(c.how().reason, "");
  EXPECT_EQ(r.process_count(), 0u);
  EXPECT_TRUE(pid_gone(s.pid));
}

TEST(Reactor, ServesAHundredServersWithOneThread) {
  constexpr int n = 100;
  auto threads_before = thread_count_of_this_process();
  reactor r;
  std::vector<std::unique_ptr<collector>> cs;
  std::vector<reactor::spawned> ss;
  for (int i = 0; i < n; ++i) {
    cs.push_back(std::make_unique<collector>());
    ss.push_back(r.spawn({server, {}, {}, {}}, cs.back()->events()));
  }
  EXPECT_EQ(r.process_count(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    r.write(ss[i].id, R"({"jsonrpc":"2.0","id":)" + std::to_string(1000 + i) + R"(,"method":"ping"})" + "\n");
  for (int i = 0; i < n; ++i)
    ASSERT_TRUE(cs[i]->wait_stdout("\"id\":" + std::to_string(1000 + i))) << "server " << i << ": " << cs[i]->out();
  auto threads_after = thread_count_of_this_process();
  EXPECT_LE(threads_after, threads_before + 2) << "threads must not grow with the number of servers";
  for (auto& s : ss)
    r.shutdown(s.id, 5s, 5s);
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(cs[i]->wait_exit()) << "server " << i;
    EXPECT_EQ(cs[i]->how().code, 0) << cs[i]->how().describe();
    EXPECT_EQ(cs[i]->exits(), 1);
  }
  EXPECT_EQ(r.process_count(), 0u);
}

TEST(Reactor, StderrArrivesAsLines) {
  reactor r;
  collector c;
  auto s = r.spawn({server, {"--stderr-lines", "5"}, {}, {}}, c.events());
  ASSERT_TRUE(c.wait_stderr("stderr line 5"));
  auto lines = c.err();
  ASSERT_GE(lines.size(), 5u);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(lines[i], "stderr line " + std::to_string(i + 1));
  r.kill(s.id);
  ASSERT_TRUE(c.wait_exit());
}

TEST(Reactor, StderrStripsCarriageReturnsAndTruncatesLongLines) {
  reactor_options o;
  o.max_stderr_line = 100;
  reactor r(o);
  collector c;
  r.spawn({"sh", {"-c", "printf 'a\\r\\n' >&2; head -c 1000 /dev/zero | tr '\\0' x >&2; printf '\\nlast' >&2"}, {}, {}},
          c.events());
  ASSERT_TRUE(c.wait_exit());
  auto lines = c.err();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "a");
  EXPECT_EQ(lines[1], std::string(100, 'x') + " [... 900 bytes truncated]");
  EXPECT_EQ(lines[2], "last") << "an unterminated last line is still delivered";
}

TEST(Reactor, ACrashIsReportedOnce) {
  reactor r;
  collector c;
  r.spawn({server, {"--crash-after-ms", "20"}, {}, {}}, c.events());
  ASSERT_TRUE(c.wait_exit());
  EXPECT_TRUE(c.how().exited);
  EXPECT_EQ(c.how().code, 3);
  EXPECT_EQ(c.how().describe(), "exit code 3");
  EXPECT_EQ(r.process_count(), 0u);
  // No second on_exit trickles in.
  EXPECT_FALSE(c.wait([&] { return false; }, 100ms));
  EXPECT_EQ(c.exits(), 1);
}

TEST(Reactor, ShutdownOfAWellBehavedServerClosesStdin) {
  reactor r;
  collector c;
  auto s = r.spawn({server, {}, {}, {}}, c.events());
  r.write(s.id, ping);
  ASSERT_TRUE(c.wait_stdout("\"id\":1"));
  auto start = std::chrono::steady_clock::now();
  r.shutdown(s.id, 10s, 10s);
  ASSERT_TRUE(c.wait_exit());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "stdin close alone must end it";
  EXPECT_TRUE(c.how().exited);
  EXPECT_EQ(c.how().code, 0);
  EXPECT_EQ(c.how().reason, "");
}

TEST(Reactor, AServerIgnoringSigtermEndsWithSigkill) {
  reactor r;
  collector c;
  auto s = r.spawn({server, {"--ignore-sigterm"}, {}, {}}, c.events());
  r.write(s.id, ping); // answered once the SIG_IGN is in place
  ASSERT_TRUE(c.wait_stdout("\"id\":1"));
  r.shutdown(s.id, 50ms, 50ms);
  ASSERT_TRUE(c.wait_exit());
  auto how = c.how();
  EXPECT_FALSE(how.exited);
  EXPECT_EQ(how.signal, SIGKILL) << how.describe();
  EXPECT_NE(how.reason.find("sent SIGTERM"), std::string::npos) << how.reason;
  EXPECT_NE(how.reason.find("sent SIGKILL"), std::string::npos) << how.reason;
  EXPECT_TRUE(pid_gone(s.pid));
}

TEST(Reactor, ShutdownLeavesNoGrandchildBehind) {
  reactor r;
  collector c;
  auto s = r.spawn({server, {"--spawn-child"}, {}, {}}, c.events());
  pid_t grandchild = grandchild_pid(c);
  ASSERT_GT(grandchild, 0);
  ASSERT_EQ(::getpgid(grandchild), s.pid);
  r.shutdown(s.id, 2s, 2s);
  ASSERT_TRUE(c.wait_exit());
  EXPECT_TRUE(wait_gone_via_pidfd(grandchild)) << "grandchild " << grandchild << " outlived its server";
}

TEST(Reactor, ACrashLeavesNoGrandchildBehindEither) {
  reactor r;
  collector c;
  r.spawn({server, {"--spawn-child", "--crash-after-ms", "200"}, {}, {}}, c.events());
  pid_t grandchild = grandchild_pid(c);
  ASSERT_GT(grandchild, 0);
  ASSERT_TRUE(c.wait_exit());
  EXPECT_EQ(c.how().code, 3);
  EXPECT_TRUE(wait_gone_via_pidfd(grandchild));
}

TEST(Reactor, KillEndsTheProcessAtOnce) {
  reactor r;
  collector c;
  auto s = r.spawn({server, {"--ignore-sigterm"}, {}, {}}, c.events());
  r.kill(s.id);
  ASSERT_TRUE(c.wait_exit());
  EXPECT_EQ(c.how().signal, SIGKILL);
  EXPECT_EQ(c.how().describe(), "killed by SIGKILL (killed on request)");
  // Calls for a finished process are ignored.
  r.write(s.id, ping);
  r.shutdown(s.id);
  r.kill(s.id);
  EXPECT_EQ(r.process_count(), 0u);
}

TEST(Reactor, SpawnFailureThrowsAndTheReactorKeepsWorking) {
  reactor r;
  collector bad;
  try {
    r.spawn({"mcprt-no-such-command", {}, {}, {}}, bad.events());
    FAIL() << "expected spawn_error";
  } catch (const spawn_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("cannot run 'mcprt-no-such-command'"), std::string::npos) << what;
    EXPECT_NE(what.find("No such file"), std::string::npos) << what;
  }
  EXPECT_THROW(r.spawn({server, {}, {}, std::string("/nonexistent/mcprt-dir")}, bad.events()), spawn_error);
  EXPECT_EQ(r.process_count(), 0u);
  EXPECT_EQ(bad.exits(), 0) << "no on_exit for a process that never started";

  collector c;
  auto s = r.spawn({server, {}, {}, {}}, c.events());
  r.write(s.id, ping);
  EXPECT_TRUE(c.wait_stdout("\"id\":1"));
}

TEST(Reactor, DestructorKillsAndReapsEverything) {
  std::vector<pid_t> pids;
  std::vector<pid_t> grandchildren;
  std::vector<std::unique_ptr<collector>> cs;
  {
    reactor r;
    for (int i = 0; i < 5; ++i) {
      cs.push_back(std::make_unique<collector>());
      pids.push_back(r.spawn({server, {"--ignore-sigterm", "--spawn-child"}, {}, {}}, cs.back()->events()).pid);
    }
    for (auto& c : cs) {
      pid_t g = grandchild_pid(*c);
      ASSERT_GT(g, 0);
      grandchildren.push_back(g);
    }
    EXPECT_EQ(r.process_count(), 5u);
  }
  for (auto pid : pids)
    EXPECT_TRUE(pid_gone(pid)) << "server " << pid << " was not killed and reaped";
  for (auto g : grandchildren)
    EXPECT_TRUE(wait_gone_via_pidfd(g)) << "grandchild " << g << " survived";
  for (auto& c : cs)
    EXPECT_EQ(c->exits(), 0) << "no callbacks once destruction began";
}

TEST(Reactor, LargeWritesGoThroughNonBlockingPartialWrites) {
  reactor r;
  collector c;
  auto s = r.spawn({"/bin/cat", {}, {}, {}}, c.events());
  std::string big(8 * 1024 * 1024, 'x');
  for (std::size_t i = 0; i < big.size(); i += 4099)
    big[i] = static_cast<char>('a' + (i / 4099) % 26);
  big.back() = '\n';
  r.write(s.id, big);
  ASSERT_TRUE(c.wait_stdout_size(big.size(), 30s)) << c.out().size();
  EXPECT_TRUE(c.out() == big) << "echo differs from what was written";
  r.shutdown(s.id);
  ASSERT_TRUE(c.wait_exit());
  EXPECT_EQ(c.how().code, 0);
}

TEST(Reactor, WritesFromManyThreadsKeepTheirOrderPerThread) {
  reactor r;
  collector c;
  auto s = r.spawn({"/bin/cat", {}, {}, {}}, c.events());
  constexpr int writers = 4, lines = 500;
  std::vector<std::thread> ts;
  for (int w = 0; w < writers; ++w)
    ts.emplace_back([&, w] {
      for (int i = 0; i < lines; ++i)
        r.write(s.id, "w" + std::to_string(w) + ":" + std::to_string(i) + "\n");
    });
  for (auto& t : ts)
    t.join();
  r.shutdown(s.id);
  ASSERT_TRUE(c.wait_exit());
  auto out = c.out();
  std::vector<int> next(writers, 0);
  std::size_t pos = 0;
  int total = 0;
  while (pos < out.size()) {
    auto nl = out.find('\n', pos);
    ASSERT_NE(nl, std::string::npos);
    auto line = out.substr(pos, nl - pos);
    int w = std::stoi(line.substr(1));
    int i = std::stoi(line.substr(line.find(':') + 1));
    EXPECT_EQ(i, next[w]++) << line;
    ++total;
    pos = nl + 1;
  }
  EXPECT_EQ(total, writers * lines);
}

TEST(Reactor, AServerThatStopsReadingIsKilledWhenTheBacklogOverflows) {
  reactor_options o;
  o.max_write_backlog = 1024 * 1024;
  reactor r(o);
  collector c;
  auto s = r.spawn({"sleep", {"100"}, {}, {}}, c.events());
  for (int i = 0; i < 4; ++i)
    r.write(s.id, std::string(512 * 1024, 'x'));
  ASSERT_TRUE(c.wait_exit());
  EXPECT_EQ(c.how().signal, SIGKILL);
  EXPECT_NE(c.how().reason.find("stdin backlog over 1048576 bytes"), std::string::npos) << c.how().reason;
}

TEST(Reactor, LastWordsArriveBeforeOnExit) {
  reactor r;
  for (int round = 0; round < 20; ++round) {
    collector c;
    r.spawn({"sh", {"-c", "printf hello; printf bye >&2; exit 7"}, {}, {}}, c.events());
    ASSERT_TRUE(c.wait_exit());
    EXPECT_EQ(c.out(), "hello") << "round " << round;
    EXPECT_EQ(c.err(), std::vector<std::string>{"bye"}) << "round " << round;
    EXPECT_TRUE(c.how().exited);
    EXPECT_EQ(c.how().code, 7);
  }
}

TEST(Reactor, AWriteToAServerThatClosedStdinDoesNotKillTheRuntime) {
  reactor r;
  collector c;
  // Closes its stdin, then waits to be told to go.
  auto s = r.spawn({"sh", {"-c", "exec 0<&-; printf ready; sleep 100"}, {}, {}}, c.events());
  ASSERT_TRUE(c.wait_stdout("ready"));
  r.write(s.id, "into the void\n"); // EPIPE, not SIGPIPE
  r.write(s.id, "again\n");
  collector probe; // the reactor still works
  auto t = r.spawn({"sh", {"-c", "printf ok"}, {}, {}}, probe.events());
  (void) t;
  ASSERT_TRUE(probe.wait_exit());
  EXPECT_EQ(probe.out(), "ok");
  r.kill(s.id);
  ASSERT_TRUE(c.wait_exit());
}

TEST(Reactor, CallbacksMaySpawnAndWrite) {
  reactor r;
  collector second;
  std::mutex m;
  std::condition_variable cv;
  bool spawned = false;
  collector first;
  auto ev = first.events();
  auto inner_exit = ev.on_exit;
  ev.on_exit = [&, inner_exit](const process_exit& how) {
    // On the reactor thread: spawn runs inline, write is queued.
    auto s = r.spawn({"/bin/cat", {}, {}, {}}, second.events());
    r.write(s.id, "from a callback\n");
    r.shutdown(s.id);
    {
      std::lock_guard<std::mutex> lk(m);
      spawned = true;
    }
    cv.notify_all();
    inner_exit(how);
  };
  r.spawn({"true", {}, {}, {}}, std::move(ev));
  ASSERT_TRUE(first.wait_exit());
  {
    std::unique_lock<std::mutex> lk(m);
    ASSERT_TRUE(cv.wait_for(lk, 10s, [&] { return spawned; }));
  }
  ASSERT_TRUE(second.wait_exit());
  EXPECT_EQ(second.out(), "from a callback\n");
}

TEST(Reactor, AServerThatClosesStdoutButKeepsRunningIsKilled) {
  reactor_options o;
  o.stdout_close_grace = 200ms;
  reactor r(o);
  collector c;
  auto s = r.spawn({"/bin/sh", {"-c", "echo hello; exec 1>&-; exec sleep 100000"}, {}, {}}, c.events());
  ASSERT_TRUE(c.wait_stdout("hello"));
  ASSERT_TRUE(c.wait_exit());
  auto how = c.how();
  EXPECT_TRUE(how.stdout_closed);
  EXPECT_EQ(how.signal, SIGKILL);
  EXPECT_NE(how.reason.find("closed its stdout but kept running for 200 ms"), std::string::npos) << how.reason;
  EXPECT_TRUE(pid_gone(s.pid));
}

TEST(Reactor, AServerThatClosesStdoutAndThenExitsIsNotBlamed) {
  reactor_options o;
  o.stdout_close_grace = 2000ms;
  reactor r(o);
  collector c;
  r.spawn({"/bin/sh", {"-c", "exec 1>&-; sleep 0.1; exit 3"}, {}, {}}, c.events());
  ASSERT_TRUE(c.wait_exit());
  EXPECT_FALSE(c.how().stdout_closed);
  EXPECT_EQ(c.how().describe(), "exit code 3");
}

TEST(Reactor, AServerAskedToStopMayCloseStdoutBeforeItExits) {
  reactor_options o;
  o.stdout_close_grace = 100ms;
  reactor r(o);
  collector c;
  auto s = r.spawn({"/bin/sh", {"-c", "read line; exec 1>&-; sleep 0.4; exit 0"}, {}, {}}, c.events());
  r.shutdown(s.id);
  ASSERT_TRUE(c.wait_exit());
  EXPECT_FALSE(c.how().stdout_closed);
  EXPECT_EQ(c.how().describe(), "exit code 0");
}

TEST(Reactor, ExitStatusCallbacksStillWork) {
  // An on_exit written against plain exit_status keeps compiling and working.
  reactor r;
  std::mutex m;
  std::condition_variable cv;
  std::optional<exit_status> got;
  process_events ev;
  ev.on_exit = [&](exit_status st) {
    std::lock_guard<std::mutex> lk(m);
    got = st;
    cv.notify_all();
  };
  r.spawn({"sh", {"-c", "exit 5"}, {}, {}}, std::move(ev));
  std::unique_lock<std::mutex> lk(m);
  ASSERT_TRUE(cv.wait_for(lk, 10s, [&] { return got.has_value(); }));
  EXPECT_EQ(got->code, 5);
}
