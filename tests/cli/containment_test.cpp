// Black-box tests of process containment (issue #13): whatever a server
// starts — a helper in its process group, one in a session of its own, a
// daemonised orphan — is gone soon after the daemon is, however the daemon
// ends (SIGTERM, SIGKILL). The servers write the pids they made to a file
// (mcprt-test-server --pid-file); each pid is checked by its start time, so
// a reused pid cannot pass for a survivor or a casualty.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cli/cli_test_util.hpp"

namespace mcprt_cli_test {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

const std::string test_server = MCPRT_TEST_SERVER;

// -- processes, identified by pid and start time --------------------------------------------------

struct process_id {
  std::string kind; // what the pid file calls it: server, group, setsid, daemon
  pid_t pid = -1;
  unsigned long long start_time = 0; // /proc/PID/stat field 22
};

// State and start time from /proc/PID/stat; nullopt once the pid is gone.
std::optional<std::pair<char, unsigned long long>> stat_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return std::nullopt;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  char state = '?';
  unsigned long long start = 0;
  // Fields from 3 (state) on; start time is field 22.
  for (int n = 3; n <= 22 && rest >> field; ++n) {
    if (n == 3) state = field[0];
    if (n == 22) start = std::stoull(field);
  }
  return std::make_pair(state, start);
}

pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return -1;
  auto close = line.rfind(')');
  if (close == std::string::npos) return -1;
  char state;
  int ppid = -1;
  std::sscanf(line.c_str() + close + 2, "%c %d", &state, &ppid);
  return ppid;
}

std::string comm_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// The daemon's reaper process: its child named mcprt-reaper.
pid_t reaper_of(pid_t daemon) {
  for (auto& entry : fs::directory_iterator("/proc")) {
    auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = std::stoi(name);
    if (parent_of(pid) == daemon && comm_of(pid) == "mcprt-reaper") return pid;
  }
  return -1;
}

bool alive(const process_id& p) {
  auto s = stat_of(p.pid);
  // A zombie has ended; it only waits for its parent to collect it.
  return s && s->second == p.start_time && s->first != 'Z';
}

bool all_gone_within(const std::vector<process_id>& ps, std::chrono::milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  for (;;) {
    bool any = false;
    for (auto& p : ps)
      any = any || alive(p);
    if (!any) return true;
    if (clock_type::now() >= deadline) return false;
    // Nothing to wait on for processes that are not our children, and a
    // pidfd per process would not see a pid reused: poll /proc briefly.
    std::this_thread::sleep_for(20ms);
  }
}

std::string survivors(const std::vector<process_id>& ps) {
  std::string out;
  for (auto& p : ps)
    if (alive(p)) out += " " + p.kind + ":" + std::to_string(p.pid);
  return out.empty() ? " none" : out;
}

// Ends whatever a failed test left running, so no test leaks processes.
void kill_all(const std::vector<process_id>& ps) {
  for (auto& p : ps)
    if (alive(p)) ::kill(p.pid, SIGKILL);
}

// -- the daemon ---------------------------------------------------------------------------------------

class daemon_process {
public:
  daemon_process(const std::vector<std::string>& args, const fs::path& home) {
    std::vector<std::string> argv_s{MCPRT_BIN};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<std::string> env_s;
    for (char** e = environ; e && *e; ++e) {
      std::string kv = *e;
      auto key = kv.substr(0, kv.find('='));
      if (key == "HOME" || key.rfind("MCPRT_", 0) == 0) continue;
      env_s.push_back(kv);
    }
    env_s.push_back("HOME=" + home.string());
    std::vector<char*> argv, envp;
    for (auto& a : argv_s)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_s)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    log_ = fs::temp_directory_path() / ("mcprt-containment-" + std::to_string(::getpid()) + "-"
                                        + std::to_string(counter_++) + ".log");
    std::string log_s = log_.string();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      int err = ::open(log_s.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (err >= 0) ::dup2(err, 2);
      int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, 0);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(out[1]);
    out_fd_ = out[0];
  }

  ~daemon_process() {
    if (!exited_) {
      ::kill(pid_, SIGKILL);
      wait_exit(10s);
    }
    ::close(out_fd_);
    std::error_code ec;
    fs::remove(log_, ec);
  }

  /// The first stdout line ("listening on ..."), or nullopt.
  std::optional<std::string> first_line(std::chrono::milliseconds timeout) {
    auto deadline = clock_type::now() + timeout;
    std::string buf;
    while (buf.find('\n') == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
      if (left <= 0) return std::nullopt;
      pollfd p{out_fd_, POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return std::nullopt;
      char c[256];
      ssize_t n = ::read(out_fd_, c, sizeof c);
      if (n <= 0) return std::nullopt;
      buf.append(c, static_cast<std::size_t>(n));
    }
    return buf.substr(0, buf.find('\n'));
  }

  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    if (exited_) return code_;
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    if (fd >= 0) {
      pollfd p{fd, POLLIN, 0};
      int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
      ::close(fd);
      if (ready != 1) return std::nullopt;
    }
    int status = 0;
    if (::waitpid(pid_, &status, fd >= 0 ? 0 : WNOHANG) != pid_) return std::nullopt;
    exited_ = true;
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return code_;
  }

  void signal(int sig) { ::kill(pid_, sig); }
  pid_t pid() const { return pid_; }
  std::string log() const { return slurp(log_); }

private:
  static inline int counter_ = 0;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  fs::path log_;
  bool exited_ = false;
  int code_ = -1;
};

// -- the fixture --------------------------------------------------------------------------------------

class containment_test : public cli_test {
protected:
  json server_entry(const fs::path& pid_file, std::vector<std::string> extra) const {
    std::vector<std::string> args{"--pid-file", pid_file.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return {{"command", test_server}, {"args", args}};
  }

  void start() {
    daemon_ = std::make_unique<daemon_process>(
      std::vector<std::string>{"serve", "--workspace", ws_.string(), "--home", home_.string()}, home_);
    auto first = daemon_->first_line(30s);
    ASSERT_TRUE(first) << "no first line; log:\n" << daemon_->log();
    ASSERT_EQ(first->rfind("listening on http://", 0), 0u) << *first;
  }

  /// Reads `file` until it lists `want` processes of every kind in `kinds`
  /// (each with its start time, taken while it surely runs).
  std::vector<process_id> wait_for_pids(const fs::path& file, const std::vector<std::string>& kinds,
                                        std::size_t want = 1, std::chrono::milliseconds timeout = 30s) {
    auto deadline = clock_type::now() + timeout;
    std::vector<process_id> out;
    std::set<pid_t> known;
    for (;;) {
      std::istringstream in(slurp(file));
      std::string kind;
      pid_t pid;
      while (in >> kind >> pid) {
        if (known.count(pid)) continue;
        auto s = stat_of(pid);
        if (!s) continue; // already gone: a server that crashed, say
        known.insert(pid);
        out.push_back({kind, pid, s->second});
      }
      bool complete = true;
      for (auto& k : kinds) {
        std::size_t n = 0;
        for (auto& p : out)
          n += p.kind == k;
        complete = complete && n >= want;
      }
      if (complete || clock_type::now() >= deadline) return out;
      std::this_thread::sleep_for(20ms);
    }
  }

  void TearDown() override {
    if (daemon_) {
      auto log = daemon_->log();
      EXPECT_EQ(log.find("Sanitizer"), std::string::npos) << log;
      EXPECT_EQ(log.find("runtime error:"), std::string::npos) << log;
    }
    daemon_.reset();
    cli_test::TearDown();
  }

  std::unique_ptr<daemon_process> daemon_;
};

const std::vector<std::string> every_kind{"server", "group", "setsid", "daemon"};
const std::vector<std::string> escape_flags{"--grandchild-in-group", "--grandchild-setsid", "--grandchild-daemon"};

TEST_F(containment_test, sigkill_of_the_daemon_takes_every_descendant) {
  auto pids_a = root_ / "a.pids";
  auto pids_b = root_ / "b.pids";
  write_file(user_settings(), json{{"mcpServers",
                                    {{"a", server_entry(pids_a, escape_flags)},
                                     {"b", server_entry(pids_b, escape_flags)}}}}
                                .dump(2));
  start();
  auto a = wait_for_pids(pids_a, every_kind);
  auto b = wait_for_pids(pids_b, every_kind);
  ASSERT_EQ(a.size(), 4u) << slurp(pids_a);
  ASSERT_EQ(b.size(), 4u) << slurp(pids_b);
  std::vector<process_id> all = a;
  all.insert(all.end(), b.begin(), b.end());
  daemon_->signal(SIGKILL);
  ASSERT_TRUE(daemon_->wait_exit(10s));
  bool gone = all_gone_within(all, 15s);
  EXPECT_TRUE(gone) << "outlived a SIGKILLed daemon:" << survivors(all);
  kill_all(all);
}

TEST_F(containment_test, sigterm_of_the_daemon_takes_every_descendant) {
  auto pids = root_ / "a.pids";
  write_file(user_settings(), json{{"mcpServers", {{"a", server_entry(pids, escape_flags)}}}}.dump(2));
  start();
  auto all = wait_for_pids(pids, every_kind);
  ASSERT_EQ(all.size(), 4u) << slurp(pids);
  daemon_->signal(SIGTERM);
  auto code = daemon_->wait_exit(30s);
  ASSERT_TRUE(code) << "the daemon did not stop on SIGTERM";
  EXPECT_EQ(*code, 0) << daemon_->log();
  // A clean stop waits for its servers: nothing may be left by the time
  // the daemon has exited, beyond the moment the kernel needs.
  bool gone = all_gone_within(all, 5s);
  EXPECT_TRUE(gone) << "outlived a SIGTERMed daemon:" << survivors(all);
  kill_all(all);
}

TEST_F(containment_test, orphans_of_crashed_servers_are_taken_too) {
  // Each incarnation daemonises a sleeper and crashes; the pool restarts
  // it. The sleepers of the dead incarnations are orphans by then.
  auto pids = root_ / "a.pids";
  write_file(user_settings(),
             json{{"mcpServers", {{"a", server_entry(pids, {"--grandchild-daemon", "--crash-after-ms", "300"})}}}}
               .dump(2));
  start();
  auto all = wait_for_pids(pids, {"daemon"}, 3, 60s);
  std::size_t daemons = 0;
  for (auto& p : all)
    daemons += p.kind == "daemon";
  ASSERT_GE(daemons, 3u) << "the server was not restarted twice; pid file:\n" << slurp(pids);
  for (auto& p : all) {
    if (p.kind == "daemon") {
      EXPECT_TRUE(alive(p)) << "an orphan was killed early (it may serve a live server)";
    }
  }
  daemon_->signal(SIGKILL);
  ASSERT_TRUE(daemon_->wait_exit(10s));
  bool gone = all_gone_within(all, 15s);
  EXPECT_TRUE(gone) << "outlived a SIGKILLed daemon:" << survivors(all);
  kill_all(all);
}

TEST_F(containment_test, a_killed_reaper_takes_its_servers_and_the_daemon_carries_on_with_a_new_one) {
  auto pids = root_ / "a.pids";
  write_file(user_settings(),
             json{{"mcpServers", {{"a", server_entry(pids, {"--grandchild-in-group"})}}}}.dump(2));
  start();
  auto first = wait_for_pids(pids, {"server", "group"});
  ASSERT_EQ(first.size(), 2u) << slurp(pids);
  pid_t reaper = reaper_of(daemon_->pid());
  ASSERT_GT(reaper, 0) << "no mcprt-reaper child of the daemon";
  ASSERT_EQ(parent_of(first[0].kind == "server" ? first[0].pid : first[1].pid), reaper);
  ASSERT_EQ(::kill(reaper, SIGKILL), 0);
  // The server dies with the reaper, its group mate by the daemon's hand.
  bool gone = all_gone_within(first, 10s);
  EXPECT_TRUE(gone) << "outlived their reaper:" << survivors(first);
  // The daemon says so, and the pool restarts the server under a new reaper.
  auto deadline = clock_type::now() + 30s;
  while (daemon_->log().find("reaper process (pid " + std::to_string(reaper) + ") died") == std::string::npos
         && clock_type::now() < deadline)
    std::this_thread::sleep_for(50ms);
  EXPECT_NE(daemon_->log().find("reaper process (pid " + std::to_string(reaper) + ") died"), std::string::npos)
    << daemon_->log();
  auto all = wait_for_pids(pids, {"server", "group"}, 2, 60s);
  std::vector<process_id> second;
  for (auto& p : all)
    if (p.kind == "server" && alive(p)) second.push_back(p);
  ASSERT_EQ(second.size(), 1u) << "no restarted server; pid file:\n" << slurp(pids) << "\nlog:\n" << daemon_->log();
  pid_t new_reaper = reaper_of(daemon_->pid());
  EXPECT_GT(new_reaper, 0);
  EXPECT_NE(new_reaper, reaper);
  EXPECT_EQ(parent_of(second[0].pid), new_reaper);
  daemon_->signal(SIGTERM);
  ASSERT_TRUE(daemon_->wait_exit(30s));
  EXPECT_TRUE(all_gone_within(all, 5s)) << survivors(all);
  kill_all(all);
}

} // namespace
} // namespace mcprt_cli_test
