// `mcprt gateway`: the workspace daemon found (or started) and proven, then
// MCP over stdio bridged to its /mcp (cli/stdio_bridge).
//
// A gateway's command line is what a repository's `.mcp.json` wrote, so it
// takes only flags that select or narrow what the owner's own files allow,
// serves only the workspace it was started in, and sends only the token a
// verified daemon of the owner names, only to that daemon.

#include "cli/gateway_stdio.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/daemon_file.hpp"
#include "cli/exit_codes.hpp"
#include "cli/stdio_bridge.hpp"
#include "core/tool_sets.hpp"
#include "core/untrusted_text.hpp"
#include "io/http_client.hpp"
#include "io/state_dir.hpp"

extern char** environ;

namespace mcprt::cli {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

void log_gateway_error(const std::string& text) {
  std::cerr << "mcprt gateway: " << text << std::endl;
}

/// Whether `path` is `dir` or lies below it, compared by components (both
/// canonical: every link resolved).
bool is_within(const fs::path& dir, const fs::path& path) {
  return std::mismatch(dir.begin(), dir.end(), path.begin(), path.end()).first == dir.end();
}

// --------------------------------------------------------------------------
// The daemon: found, or started detached
// --------------------------------------------------------------------------

bool process_ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return true;
  char state = line[close + 2];
  return state == 'Z' || state == 'X';
}

std::string log_tail(const fs::path& log) {
  std::ifstream in(log, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > 2000) text = text.substr(text.size() - 2000);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

/// Starts `mcprt serve` in its own session, not our child (double fork), so
/// it outlives this gateway and serves the next ones; stdin /dev/null,
/// stdout and stderr to `log` in `dir` (written afresh). The daemon's pid,
/// or -1 with `error`.
pid_t spawn_daemon(const std::vector<std::string>& args, const io::state_dir& dir, const std::string& log,
                   std::string& error) {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    error = "cannot find the mcprt binary: " + ec.message();
    return -1;
  }
  // Everything the children need is prepared before fork.
  std::vector<std::string> argv_s{exe.string()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  // MCPRT_BUDGET and its kind set limits, and an `.mcp.json` entry's "env"
  // sets the gateway's environment: a daemon the gateway starts takes none.
  std::vector<char*> envp;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "MCPRT_", 6) != 0) envp.push_back(*e);
  envp.push_back(nullptr);
  int log_fd = dir.create_fresh(log, error);
  if (log_fd < 0) return -1;
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int report[2];
  if (null_fd < 0 || ::pipe2(report, O_CLOEXEC) != 0) {
    error = std::string("cannot set up the daemon's process: ") + std::strerror(errno);
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    return -1;
  }
  // Descriptors the client left open to us must not leak into the daemon
  // (one of them may be the client's own pipe).
  std::vector<int> inherited;
  for (auto& e : fs::directory_iterator("/proc/self/fd", ec)) {
    int fd = std::atoi(e.path().filename().c_str());
    if (fd > 2 && fd != report[1] && fd != log_fd && fd != null_fd) inherited.push_back(fd);
  }
  pid_t middle = ::fork();
  if (middle < 0) {
    error = std::string("fork: ") + std::strerror(errno);
    ::close(log_fd);
    ::close(null_fd);
    ::close(report[0]);
    ::close(report[1]);
    return -1;
  }
  if (middle == 0) {
    ::close(report[0]);
    ::setsid();
    pid_t daemon = ::fork();
    if (daemon == 0) {
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      ::dup2(null_fd, 0);
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
      for (int fd : inherited)
        ::close(fd);
      ::execve(argv[0], argv.data(), envp.data());
      int e = errno;
      [[maybe_unused]] auto n = ::write(report[1], &e, sizeof e);
      ::_exit(127);
    }
    [[maybe_unused]] auto n = ::write(report[1], &daemon, sizeof daemon);
    ::_exit(daemon > 0 ? 0 : 1);
  }
  ::close(report[1]);
  ::close(log_fd);
  ::close(null_fd);
  int status = 0;
  while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
  }
  pid_t daemon = -1;
  int exec_errno = 0;
  auto read_all = [&](void* p, std::size_t size) {
    std::size_t got = 0;
    while (got < size) {
      auto n = ::read(report[0], static_cast<char*>(p) + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    return got == size;
  };
  bool have_pid = read_all(&daemon, sizeof daemon);
  // EOF here: the exec succeeded (the pipe closed with it).
  bool exec_failed = have_pid && read_all(&exec_errno, sizeof exec_errno);
  ::close(report[0]);
  if (!have_pid || daemon <= 0) {
    error = "cannot start the daemon (fork failed)";
    return -1;
  }
  if (exec_failed) {
    error = "cannot run " + exe.string() + ": " + std::strerror(exec_errno);
    return -1;
  }
  return daemon;
}

/// Closes the descriptor (and so releases its lock) at scope exit.
struct lock_file {
  int fd = -1;
  ~lock_file() {
    if (fd >= 0) ::close(fd);
  }
};

/// Whether a daemon holds `lock` (mcprt serve keeps it while it runs).
bool daemon_lock_held(const fs::path& lock) {
  int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return held;
}

/// Why a daemon the gateway starts must not read user settings from
/// $HOME, or "". An `.mcp.json` entry's "env" may set HOME, and user
/// settings are trusted: a home inside the workspace (the repository's own
/// files) or a directory of another user would hand the repository servers
/// that run without approval.
std::string borrowed_home(const std::string& ws) {
  const char* home = std::getenv("HOME");
  if (!home || !*home) return {}; // serve says what it needs
  std::error_code ec;
  auto canonical = fs::canonical(home, ec);
  if (ec) return {};              // serve says it is missing
  struct stat st {};
  auto shown = escape_for_display(canonical.string());
  auto yourself = "; start the daemon yourself (`mcprt serve --workspace " + escape_for_display(ws)
                  + "`) and the gateway uses it";
  if (::stat(canonical.c_str(), &st) != 0 || st.st_uid != ::geteuid())
    return "HOME (" + shown + ") is not a directory of yours, and a daemon takes its user settings from there"
           + yourself;
  if (canonical != fs::path(ws) && is_within(ws, canonical))
    return "HOME (" + shown + ") lies inside the workspace: its user settings would be the repository's (an "
           + "entry's \"env\" can set HOME)" + yourself;
  return {};
}

/// The daemon of `ws`, started when none runs. Gateways of one workspace
/// that start together take turns under an flock on
/// `<ws>/.mcprt/gateway.lock`: the first starts the daemon and holds the
/// lock until its daemon.json is usable, the others then find it.
std::optional<verified_daemon> find_or_start_daemon(const std::string& ws, const gateway_flags& f,
                                                    std::string& error) {
  // Only a daemon that passes every check is used; a file that fails one
  // while its daemon runs is not replaced behind the user's back.
  auto usable = [&](bool& start) -> std::optional<verified_daemon> {
    start = false;
    auto check = check_daemon(ws);
    if (check.daemon) return check.daemon;
    if (!check.absent && check_daemon(ws, false).daemon) {
      error = check.error;
      return std::nullopt;
    }
    start = true;
    return std::nullopt;
  };
  bool start = false;
  if (auto d = usable(start)) return d;
  if (!start) return std::nullopt;
  error = borrowed_home(ws);
  if (!error.empty()) return std::nullopt;

  // The workspace's .mcprt is a repository's to fill: its files are
  // written through io::state_dir, never through a link planted there.
  auto dir = io::state_dir::open(ws, ".mcprt", error);
  if (!dir) return std::nullopt;
  lock_file lock;
  auto lock_path = dir->path() / "gateway.lock";
  lock.fd = dir->open_file("gateway.lock", O_RDWR | O_CREAT, error);
  if (lock.fd < 0) return std::nullopt;
  while (::flock(lock.fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    error = "cannot lock " + lock_path.string() + ": " + std::strerror(errno);
    return std::nullopt;
  }
  // Another gateway may have started it while we waited for the lock.
  if (auto d = usable(start)) return d;
  if (!start) return std::nullopt;

  std::vector<std::string> args{"serve", "--workspace", ws};
  args.insert(args.end(), f.serve_args.begin(), f.serve_args.end());
  auto log = dir->path() / "daemon.log";
  pid_t pid = spawn_daemon(args, *dir, "daemon.log", error);
  if (pid < 0) return std::nullopt;
  std::cerr << "mcprt gateway: started a daemon for " << escape_for_display(ws) << " (pid " << pid << ", log "
            << escape_for_display(log.string()) << ")" << std::endl;
  auto deadline = std::chrono::steady_clock::now() + f.daemon_start_timeout;
  for (;;) {
    auto check = check_daemon(ws);
    if (check.daemon) return check.daemon;
    if (process_ended(pid)) {
      // It may have lost to a daemon someone started by hand meanwhile,
      // which may still be starting (it holds daemon.lock): wait for that.
      if (auto again = check_daemon(ws); again.daemon) return again.daemon;
      if (daemon_lock_held(dir->path() / "daemon.lock") && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(50ms);
        continue;
      }
      error = "the daemon it started (pid " + std::to_string(pid) + ") exited; its log " + log.string()
              + " ends:\n" + escape_for_display(log_tail(log));
      return std::nullopt;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      error = "the daemon it started (pid " + std::to_string(pid) + ") did not write a usable " + daemon_file(ws)
              + " within " + std::to_string(f.daemon_start_timeout.count()) + " ms (" + check.error + "); see "
              + log.string();
      return std::nullopt;
    }
    std::this_thread::sleep_for(50ms);
  }
}

/// The daemon proves it is the one daemon.json names (its /healthz echoes
/// the instance id there) before anything else is sent. "" or why not.
std::string prove_daemon(const verified_daemon& d, const std::string& token) {
  io::http_client client;
  io::http_request req;
  req.url = d.url + "/healthz";
  req.connect_timeout = std::chrono::seconds(3);
  req.idle_timeout = std::chrono::seconds(30);
  req.proxy = "direct";
  if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
  auto answer = client.fetch(std::move(req), 64 * 1024);
  if (!answer.outcome.ok()) return "cannot reach the daemon at " + d.url + ": " + answer.outcome.reason;
  const auto* r = &answer.head;
  if (r->status == 401)
    return "the daemon at " + d.url
           + " refused the token its daemon.json names (is that file the one the daemon was started with?)";
  if (r->status != 200)
    return "the daemon at " + d.url + " answered /healthz with HTTP " + std::to_string(r->status);
  auto j = json::parse(answer.body, nullptr, false);
  if (d.instance.empty() || !j.is_object() || j.value("instance", std::string()) != d.instance)
    return "the daemon at " + d.url + " is not the one its daemon.json names (its instance id differs)";
  return {};
}

} // namespace

const std::vector<std::string>& gateway_serve_flags() {
  static const std::vector<std::string> flags{"--profile", "--allowed-mcp-server-names", "--untrusted", "--log-level",
                                              "--log-format"};
  return flags;
}

std::string gateway_refusal(const std::string& flag) {
  struct instead {
    const char* flag;
    const char* what;  // what the flag would decide
    const char* owner; // where the owner decides it
  };
  static const instead table[] = {
    {"--url", "where the token goes",
     "the gateway bridges only to the workspace's own daemon, found and verified through <workspace>/.mcprt/daemon.json; "
     "a client that speaks streamable HTTP can be given the daemon's /mcp itself"},
    {"--token-file", "which file's first line is sent as the token",
     "the gateway sends the token the verified daemon's daemon.json names; a daemon with a token of its own is one you "
     "start: `mcprt serve --token-file FILE`"},
    {"--home", "whose user settings and approvals count",
     "they are $HOME's; for another home start the daemon yourself: `mcprt serve --home DIR`"},
    {"--mcp-config", "servers that run without approval",
     "put them in your user settings (~/.mcprt/settings.json, \"mcpServers\"), or start the daemon yourself: "
     "`mcprt serve --mcp-config FILE`"},
    {"--elicitation", "how servers' questions are answered",
     "set a server's \"elicitation\" in your user settings (~/.mcprt/settings.json), or start the daemon yourself: "
     "`mcprt serve --elicitation ...`"},
    {"--sampling", "whether servers may ask for completions", "start the daemon yourself: `mcprt serve --sampling ask`"},
    {"--budget", "the workspace budget", "start the daemon yourself: `mcprt serve --budget N` (or MCPRT_BUDGET)"},
    {"--budget-mode", "the workspace budget", "start the daemon yourself: `mcprt serve --budget-mode MODE`"},
    {"--no-pool", "the workspace budget and the shared pool", "start the daemon yourself: `mcprt serve --no-pool`"},
    {"--listen", "who can reach the daemon", "start the daemon yourself: `mcprt serve --listen HOST:PORT`"},
    {"--allow-origin", "which web pages can call the daemon",
     "start the daemon yourself: `mcprt serve --allow-origin ORIGIN`"},
    {"--no-gateway", "whether the daemon serves MCP", "start the daemon yourself: `mcprt serve --no-gateway`"},
  };
  for (auto& i : table)
    if (flag == i.flag)
      return "mcprt gateway does not take " + flag + ": its arguments may come from a repository's .mcp.json, and "
             + i.what + " is the owner's to decide; " + i.owner + " (the gateway then uses the daemon that runs)";
  bool caf = flag.rfind("--caf-", 0) == 0 || flag == "--fleet-budget";
  return "mcprt gateway does not take " + flag + ": its arguments may come from a repository's .mcp.json, and "
         + (caf ? std::string("who reaches the workspace over CAF, and which budget it answers to,")
                : std::string("the daemon's limits and resources are"))
         + " the owner's to decide; start the daemon yourself: `mcprt serve " + flag
         + " ...` (the gateway then uses the daemon that runs)";
}

std::optional<std::string> gateway_workspace(const std::string& requested, std::string& error) {
  std::error_code ec;
  auto cwd = fs::canonical(fs::current_path(ec), ec);
  if (ec) {
    error = "cannot tell its working directory: " + ec.message();
    return std::nullopt;
  }
  auto ws = fs::canonical(fs::path(requested), ec);
  if (ec || !fs::is_directory(ws, ec)) {
    error = "workspace '" + escape_for_display(requested) + "' is not a directory";
    return std::nullopt;
  }
  // The working directory itself or one of its ancestors.
  if (!is_within(ws, cwd)) {
    error = "--workspace '" + escape_for_display(requested) + "' is " + escape_for_display(ws.string())
            + ", which does not contain the gateway's working directory " + escape_for_display(cwd.string())
            + ": a gateway serves the workspace it runs in (its directory or one above it), so that one "
              "repository's .mcp.json cannot reach another workspace's daemon. Run the gateway from that workspace";
    return std::nullopt;
  }
  return ws.string();
}

int run_gateway(const gateway_flags& f) {
  std::signal(SIGPIPE, SIG_IGN);
  if (!f.set.empty() && !valid_tool_set_name(f.set)) {
    log_gateway_error("--set names a tool set of the settings (mcp.toolSets): 1 to 64 of A-Z a-z 0-9 _ . -");
    return exit_usage;
  }
  std::string error;
  auto ws = gateway_workspace(f.workspace, error);
  if (!ws) {
    log_gateway_error(error);
    return exit_usage;
  }
  auto daemon = find_or_start_daemon(*ws, f, error);
  if (!daemon) {
    log_gateway_error(error);
    return exit_failure;
  }
  if (auto why = prove_daemon(*daemon, daemon->token); !why.empty()) {
    log_gateway_error(why);
    return exit_failure;
  }
  return run_stdio_bridge(daemon->url + (f.set.empty() ? "/mcp" : "/mcp/" + f.set), daemon->token);
}

} // namespace mcprt::cli
