// The reaper process (io/reaper) through the reactor, with real processes:
// who is whose child, that nothing a server starts outlives the reactor,
// and what happens when the reaper itself is killed or stops answering.
// Both ways of starting the reaper (its own image, a fork) run each test.

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "io/reactor.hpp"
#include "io/reaper_process.hpp"
#include "process_test_support.hpp"
#include "tests/support/wait_for.hpp"

using namespace mcprt::io;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

using mcprt::io::test::ping;
using mcprt::io::test::server;

// -- observing one process ----------------------------------------------------------

class process_collector {
 public:
  process_events events() {
    process_events ev;
    ev.on_stdout = [this](std::string_view bytes) {
      std::lock_guard<std::mutex> lk(m_);
      out_.append(bytes);
      cv_.notify_all();
    };
    ev.on_exit = [this](const process_exit& how) {
      std::lock_guard<std::mutex> lk(m_);
      ++exits_;
      how_ = how;
      cv_.notify_all();
    };
    return ev;
  }
  bool wait_stdout(const std::string& needle, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lk(m_);
    return cv_.wait_for(lk, timeout, [&] { return out_.find(needle) != std::string::npos; });
  }
  bool wait_exit(std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lk(m_);
    return cv_.wait_for(lk, timeout, [&] { return exits_ > 0; });
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
  int exits_ = 0;
  process_exit how_;
};

class warnings {
 public:
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& w) {
      std::lock_guard<std::mutex> lk(m_);
      all_.push_back(w);
      cv_.notify_all();
    };
  }
  bool wait_for(const std::string& needle, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lk(m_);
    return cv_.wait_for(lk, timeout, [&] {
      for (auto& w : all_)
        if (w.find(needle) != std::string::npos) return true;
      return false;
    });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::string> all_;
};

// -- processes in /proc, identified by pid and start time ----------------------------------

struct proc {
  std::string kind;
  pid_t pid = -1;
  unsigned long long start = 0;
};

struct stat_fields {
  char state = '?';
  pid_t ppid = -1;
  unsigned long long start = 0;
};

std::optional<stat_fields> stat_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 2));
  stat_fields f;
  std::string field;
  for (int n = 3; n <= 22 && rest >> field; ++n) {
    if (n == 3) f.state = field[0];
    if (n == 4) f.ppid = std::stoi(field);
    if (n == 22) f.start = std::stoull(field);
  }
  return f;
}

// Still there: running, or a zombie nobody reaped.
bool exists(const proc& p) {
  auto s = stat_of(p.pid);
  return s && s->start == p.start;
}

bool running(const proc& p) {
  auto s = stat_of(p.pid);
  return s && s->start == p.start && s->state != 'Z';
}

// The start time, checked once the pidfd pins the pid, tells a reused pid
// from the process we mean.
bool gone_within(const proc& p, std::chrono::milliseconds timeout) {
  return mcprt::test::wait_for_exit(p.pid, timeout, [&] { return running(p); });
}

std::string comm_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// The pid file of mcprt-test-server --pid-file, once every kind is listed.
std::vector<proc> read_pids(const fs::path& file, const std::vector<std::string>& kinds,
                            std::chrono::milliseconds timeout = 10s) {
  std::vector<proc> out;
  mcprt::test::wait_for_change_in(file.parent_path(), [&] {
    out.clear();
    std::ifstream in(file);
    std::string kind;
    pid_t pid;
    while (in >> kind >> pid) {
      auto s = stat_of(pid);
      out.push_back({kind, pid, s ? s->start : 0});
    }
    bool complete = true;
    for (auto& k : kinds) {
      bool found = false;
      for (auto& p : out)
        found = found || p.kind == k;
      complete = complete && found;
    }
    return complete;
  }, timeout);
  return out;
}

void kill_leftovers(const std::vector<proc>& ps) {
  for (auto& p : ps)
    if (running(p)) ::kill(p.pid, SIGKILL);
}

class scratch_dir {
 public:
  scratch_dir() {
    char tmpl[] = "/tmp/mcprt-reaper-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

const std::vector<std::string> every_kind{"server", "group", "setsid", "daemon"};

std::vector<std::string> escaping_server(const fs::path& pid_file) {
  return {"--pid-file", pid_file.string(), "--grandchild-in-group", "--grandchild-setsid", "--grandchild-daemon"};
}

// -- both ways of starting the reaper ---------------------------------------------------------

class reaper_modes : public ::testing::TestWithParam<reaper_start> {
 protected:
  reactor_options options() const {
    reactor_options o;
    o.reaper = GetParam();
    return o;
  }
};

INSTANTIATE_TEST_SUITE_P(Reaper, reaper_modes, ::testing::Values(reaper_start::exec_image, reaper_start::fork),
                         [](const ::testing::TestParamInfo<reaper_start>& info) {
                           return info.param == reaper_start::exec_image ? std::string("ExecImage")
                                                                         : std::string("Fork");
                         });

TEST_P(reaper_modes, ServersAreChildrenOfOneReaperThatIsOurOnlyChild) {
  std::vector<proc> servers;
  proc reaper_proc;
  {
    reactor r(options());
    EXPECT_EQ(r.reaper_pid(), -1) << "no reaper before the first spawn";
    std::vector<std::unique_ptr<process_collector>> cs;
    reactor::process_id first = 0;
    for (int i = 0; i < 3; ++i) {
      cs.push_back(std::make_unique<process_collector>());
      auto s = r.spawn({"/bin/cat", {}, {}, {}}, cs.back()->events());
      if (i == 0) first = s.id;
      servers.push_back({"cat", s.pid, stat_of(s.pid)->start});
    }
    pid_t rp = r.reaper_pid();
    ASSERT_GT(rp, 0);
    reaper_proc = {"reaper", rp, stat_of(rp)->start};
    EXPECT_EQ(stat_of(rp)->ppid, ::getpid());
    EXPECT_EQ(comm_of(rp), "mcprt-reaper");
    for (auto& s : servers) {
      EXPECT_EQ(stat_of(s.pid)->ppid, rp) << "server " << s.pid;
      EXPECT_EQ(::getpgid(s.pid), s.pid) << "each server leads its own group";
    }
    auto exe = fs::read_symlink("/proc/" + std::to_string(rp) + "/exe").string();
    if (GetParam() == reaper_start::exec_image)
      EXPECT_EQ(exe.rfind("/memfd:mcprt-reaper", 0), 0u) << exe;
    else
      EXPECT_EQ(exe, fs::read_symlink("/proc/self/exe").string());
    r.write(first, "hello\n");
    EXPECT_TRUE(cs[0]->wait_stdout("hello"));
  }
  // Not merely killed: reaped, the reaper by us and the servers by it.
  EXPECT_FALSE(exists(reaper_proc));
  for (auto& s : servers)
    EXPECT_FALSE(exists(s)) << "server " << s.pid;
}

TEST_P(reaper_modes, DestructionLeavesNoDescendantNotEvenAZombie) {
  scratch_dir dir;
  std::vector<proc> all;
  {
    reactor r(options());
    process_collector c;
    r.spawn({server, escaping_server(dir / "pids"), {}, {}}, c.events());
    all = read_pids(dir / "pids", every_kind);
    ASSERT_EQ(all.size(), 4u);
    for (auto& p : all)
      ASSERT_TRUE(running(p)) << p.kind;
  }
  // The destructor returns once the reaper has killed and reaped them all.
  for (auto& p : all)
    EXPECT_FALSE(exists(p)) << p.kind << " " << p.pid << " outlived the reactor";
  kill_leftovers(all);
}

TEST_P(reaper_modes, OrphansOfAnExitedServerStayWithTheReaperUntilTheEnd) {
  scratch_dir dir;
  std::vector<proc> all;
  {
    reactor r(options());
    process_collector c;
    r.spawn({server,
             {"--pid-file", (dir / "pids").string(), "--grandchild-setsid", "--grandchild-daemon", "--crash-after-ms",
              "100"},
             {},
             {}},
            c.events());
    all = read_pids(dir / "pids", {"server", "setsid", "daemon"});
    ASSERT_EQ(all.size(), 3u);
    ASSERT_TRUE(c.wait_exit());
    EXPECT_EQ(c.how().describe(), "exit code 3");
    // Outside the server's group, so alive: they may be serving a server
    // that still runs, as far as anyone can tell. Their parent is the reaper.
    for (auto& p : all) {
      if (p.kind == "server") continue;
      EXPECT_TRUE(running(p)) << p.kind;
      EXPECT_EQ(stat_of(p.pid)->ppid, r.reaper_pid()) << p.kind;
    }
  }
  for (auto& p : all)
    EXPECT_FALSE(exists(p)) << p.kind << " " << p.pid << " outlived the reactor";
  kill_leftovers(all);
}

TEST_P(reaper_modes, AKilledReaperTakesItsServersAndTheNextSpawnStartsANewOne) {
  scratch_dir dir;
  warnings w;
  auto o = options();
  o.on_warning = w.sink();
  reactor r(o);
  process_collector a, b;
  r.spawn({server, {"--pid-file", (dir / "pids").string(), "--grandchild-in-group"}, {}, {}}, a.events());
  r.spawn({"/bin/cat", {}, {}, {}}, b.events());
  auto pids = read_pids(dir / "pids", {"server", "group"});
  ASSERT_EQ(pids.size(), 2u);
  pid_t old = r.reaper_pid();
  ASSERT_GT(old, 0);
  ASSERT_EQ(::kill(old, SIGKILL), 0);
  for (auto* c : {&a, &b}) {
    ASSERT_TRUE(c->wait_exit());
    EXPECT_EQ(c->how().signal, SIGKILL);
    EXPECT_NE(c->how().reason.find("reaper process died"), std::string::npos) << c->how().reason;
  }
  EXPECT_TRUE(w.wait_for("reaper process (pid " + std::to_string(old) + ") died"));
  for (auto& p : pids)
    EXPECT_TRUE(gone_within(p, 10s)) << p.kind << " survived the reaper";
  EXPECT_EQ(r.process_count(), 0u);
  // A new reaper for the next server.
  process_collector c;
  auto s = r.spawn({"/bin/cat", {}, {}, {}}, c.events());
  EXPECT_GT(r.reaper_pid(), 0);
  EXPECT_NE(r.reaper_pid(), old);
  EXPECT_EQ(stat_of(s.pid)->ppid, r.reaper_pid());
  r.write(s.id, "again\n");
  EXPECT_TRUE(c.wait_stdout("again"));
}

TEST(Reaper, WithoutTheChildrenFileAScanOfProcFindsEveryDescendant) {
  // A forked reaper inherits the flag: it finds its children as on a kernel
  // without /proc/<pid>/task/<tid>/children.
  detail::force_proc_scan_for_tests = true;
  scratch_dir dir;
  std::vector<proc> all;
  {
    reactor_options o;
    o.reaper = reaper_start::fork;
    reactor r(o);
    process_collector c;
    r.spawn({server, escaping_server(dir / "pids"), {}, {}}, c.events());
    all = read_pids(dir / "pids", every_kind);
    detail::force_proc_scan_for_tests = false;
    ASSERT_EQ(all.size(), 4u);
  }
  detail::force_proc_scan_for_tests = false;
  for (auto& p : all)
    EXPECT_FALSE(exists(p)) << p.kind << " " << p.pid << " outlived the reactor";
  kill_leftovers(all);
}

// -- the reaper's own behaviour --------------------------------------------------------------

TEST(Reaper, AStoppedReaperIsKilledAndReplaced) {
  warnings w;
  reactor_options o;
  o.reaper_answer_timeout = 500ms;
  o.on_warning = w.sink();
  reactor r(o);
  process_collector a;
  r.spawn({"/bin/cat", {}, {}, {}}, a.events());
  pid_t old = r.reaper_pid();
  ASSERT_EQ(::kill(old, SIGSTOP), 0);
  process_collector b;
  try {
    r.spawn({"/bin/cat", {}, {}, {}}, b.events());
    FAIL() << "a stopped reaper cannot have answered";
  } catch (const spawn_error& e) {
    EXPECT_NE(std::string(e.what()).find("did not answer within 500 ms"), std::string::npos) << e.what();
  }
  ASSERT_TRUE(a.wait_exit()) << "its server went with it";
  EXPECT_NE(a.how().reason.find("reaper process died"), std::string::npos) << a.how().reason;
  EXPECT_TRUE(w.wait_for("died"));
  process_collector c;
  auto s = r.spawn({"/bin/cat", {}, {}, {}}, c.events());
  EXPECT_NE(r.reaper_pid(), old);
  r.write(s.id, "fresh\n");
  EXPECT_TRUE(c.wait_stdout("fresh"));
}

TEST(Reaper, TerminalSignalsDoNotStopIt) {
  reactor r;
  process_collector a;
  auto s = r.spawn({"/bin/cat", {}, {}, {}}, a.events());
  pid_t rp = r.reaper_pid();
  // Ctrl-C, a hangup, a stray TERM to the whole group: the runtime decides
  // when its servers stop, not the terminal.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP})
    ASSERT_EQ(::kill(rp, sig), 0);
  // A round trip through the reaper: the spawn answers only after it has
  // taken the signals above (they arrive before the request).
  process_collector b;
  r.spawn({"/bin/cat", {}, {}, {}}, b.events());
  EXPECT_EQ(r.reaper_pid(), rp);
  EXPECT_EQ(stat_of(rp)->state == 'T', false) << "stopped by SIGTSTP";
  r.write(s.id, "still here\n");
  EXPECT_TRUE(a.wait_stdout("still here"));
  EXPECT_EQ(a.exits(), 0);
}

TEST(Reaper, ARequestLargerThanOneMessageArrivesWhole) {
  // 4 x 60,000 bytes of environment (execve takes at most 128 KiB per
  // string): the request spans several messages to the reaper.
  std::map<std::string, std::string> env;
  std::string all;
  for (int v = 0; v < 4; ++v) {
    std::string value(60000, 'x');
    for (std::size_t i = 0; i < value.size(); i += 997)
      value[i] = static_cast<char>('a' + (i / 997 + v) % 26);
    env["BIG" + std::to_string(v)] = value;
    all += value;
  }
  reactor r;
  process_collector c;
  r.spawn({"/bin/sh", {"-c", "printf %s \"$BIG0$BIG1$BIG2$BIG3\" | cksum"}, env, {}}, c.events());
  ASSERT_TRUE(c.wait_exit());
  // The same bytes through a pipe here.
  std::string expected;
  {
    std::string path = (fs::temp_directory_path() / ("mcprt-reaper-big-" + std::to_string(::getpid()))).string();
    std::ofstream(path, std::ios::binary) << all;
    FILE* p = ::popen(("cksum < " + path).c_str(), "r");
    char line[256] = {0};
    if (p && std::fgets(line, sizeof line, p)) expected = line;
    if (p) ::pclose(p);
    fs::remove(path);
  }
  ASSERT_FALSE(expected.empty());
  EXPECT_TRUE(c.wait_stdout(expected.substr(0, expected.find(' ')))) << "cksum differs: the environment did not arrive whole";
}

TEST(Reaper, AServerWithoutACwdStartsWhereTheRuntimeIsNow) {
  reactor r;
  auto before = fs::current_path();
  process_collector a;
  r.spawn({"/bin/pwd", {}, {}, {}}, a.events());
  ASSERT_TRUE(a.wait_exit());
  EXPECT_TRUE(a.wait_stdout(before.string() + "\n"));
  // The reaper was started before the runtime moved; the server follows the
  // runtime, not the reaper.
  scratch_dir dir;
  auto elsewhere = fs::canonical(dir / ".");
  fs::current_path(elsewhere);
  process_collector b;
  r.spawn({"/bin/pwd", {}, {}, {}}, b.events());
  ASSERT_TRUE(b.wait_exit());
  fs::current_path(before);
  EXPECT_TRUE(b.wait_stdout(elsewhere.string() + "\n"));
}

TEST(Reaper, ANulByteInAnArgumentIsAnErrorNotACut) {
  reactor r;
  process_collector c;
  try {
    r.spawn({"/bin/echo", {std::string("a\0b", 3)}, {}, {}}, c.events());
    FAIL() << "expected spawn_error";
  } catch (const spawn_error& e) {
    EXPECT_NE(std::string(e.what()).find("NUL byte"), std::string::npos) << e.what();
  }
  EXPECT_EQ(r.process_count(), 0u);
}

TEST(Reaper, AnEnvironmentBeyondTheLimitIsRefusedWithTheReason) {
  reactor r;
  process_collector c;
  try {
    r.spawn({"/bin/true", {}, {{"HUGE", std::string(3 * 1024 * 1024, 'x')}}, {}}, c.events());
    FAIL() << "expected spawn_error";
  } catch (const spawn_error& e) {
    EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos) << e.what();
  }
  // Nothing was sent: the reaper still serves.
  auto s = r.spawn({"/bin/cat", {}, {}, {}}, c.events());
  r.write(s.id, "ok\n");
  EXPECT_TRUE(c.wait_stdout("ok"));
}

} // namespace
