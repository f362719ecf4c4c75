// Black-box tests of process containment (issue #13): whatever a server
// starts — a helper in its process group, one in a session of its own, a
// daemonised orphan — is gone soon after the daemon is, however the daemon
// ends (SIGTERM, SIGKILL). The servers write the pids they made to a file
// (mcprt-test-server --pid-file); each pid is checked by its start time, so
// a reused pid cannot pass for a survivor or a casualty.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/actors/proc_table.hpp"
#include "tests/cli/daemon_test_util.hpp"
#include "tests/support/wait_for.hpp"

namespace mcprt_cli_test {
namespace {

using mcprt::test::state_and_start;

// -- processes, identified by pid and start time --------------------------------------------------

struct process_id {
  std::string kind; // what the pid file calls it: server, group, setsid, daemon
  pid_t pid = -1;
  unsigned long long start_time = 0; // /proc/PID/stat field 22
};

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

// The daemon's reaper process: its child named mcprt-reaper.
pid_t reaper_of(pid_t daemon) {
  for (auto& p : mcprt::test::all_processes())
    if (p.ppid == daemon && p.comm == "mcprt-reaper") return p.pid;
  return -1;
}

bool alive(const process_id& p) {
  auto s = state_and_start(p.pid);
  // A zombie has ended; it only waits for its parent to collect it.
  return s && s->second == p.start_time && s->first != 'Z';
}

bool all_gone_within(const std::vector<process_id>& ps, std::chrono::milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  // One after the other under one deadline: the pidfd pins the pid, and the
  // start time checked after that tells a reused pid from the one we mean.
  for (auto& p : ps)
    if (!mcprt::test::wait_for_exit(p.pid, left_until(deadline), [&] { return alive(p); })) return false;
  return true;
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

// -- the fixture --------------------------------------------------------------------------------------

class containment_test : public bare_daemon_test {
protected:
  json server_entry(const fs::path& pid_file, std::vector<std::string> extra) const {
    std::vector<std::string> args{"--pid-file", pid_file.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return {{"command", test_server}, {"args", args}};
  }

  /// Reads `file` until it lists `want` processes of every kind in `kinds`
  /// (each with its start time, taken while it surely runs).
  std::vector<process_id> wait_for_pids(const fs::path& file, const std::vector<std::string>& kinds,
                                        std::size_t want = 1, std::chrono::milliseconds timeout = 30s) {
    std::vector<process_id> out;
    std::set<pid_t> known;
    mcprt::test::wait_for_change_in(file.parent_path(), [&] {
      std::istringstream in(slurp(file));
      std::string kind;
      pid_t pid;
      while (in >> kind >> pid) {
        if (known.count(pid)) continue;
        auto s = state_and_start(pid);
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
      return complete;
    }, timeout);
    return out;
  }
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
  EXPECT_EQ(*code, 0) << daemon_->err();
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
  // Connected first: a server that dies before it has answered failed to
  // start, and the pool does not retry a failed start on its own.
  ASSERT_TRUE(connected("a")) << snapshot().dump();
  pid_t reaper = reaper_of(daemon_->pid());
  ASSERT_GT(reaper, 0) << "no mcprt-reaper child of the daemon";
  ASSERT_EQ(parent_of(first[0].kind == "server" ? first[0].pid : first[1].pid), reaper);
  ASSERT_EQ(::kill(reaper, SIGKILL), 0);
  // The server dies with the reaper, its group mate by the daemon's hand.
  bool gone = all_gone_within(first, 10s);
  EXPECT_TRUE(gone) << "outlived their reaper:" << survivors(first);
  // The daemon says so, and the pool restarts the server under a new reaper.
  EXPECT_TRUE(daemon_->err_contains("reaper process (pid " + std::to_string(reaper) + ") died", 30s))
    << daemon_->err();
  auto all = wait_for_pids(pids, {"server", "group"}, 2, 60s);
  std::vector<process_id> second;
  for (auto& p : all)
    if (p.kind == "server" && alive(p)) second.push_back(p);
  ASSERT_EQ(second.size(), 1u) << "no restarted server; pid file:\n" << slurp(pids) << "\nlog:\n" << daemon_->err();
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
