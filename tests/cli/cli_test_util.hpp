// Helpers for the black-box tests of the `mcprt` binary: run it with an
// argument vector (no shell), capture stdout / stderr / exit code, and build
// throw-away homes and workspaces under the system temp directory.
#pragma once

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

extern char** environ;

namespace mcprt_cli_test {

namespace fs = std::filesystem;
using nlohmann::json;

inline const std::string test_server = MCPRT_TEST_SERVER;
inline const json null_j = nullptr;

struct run_result {
  int code = -1;   // exit status; 128 + signal when killed by a signal
  std::string out; // stdout
  std::string err; // stderr
  json j;          // stdout parsed as JSON (discarded when it is not JSON)

  bool has_json() const { return !j.is_discarded(); }
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

inline void write_file(const fs::path& p, const std::string& text) {
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + p.string());
  out << text;
}

/// A test that writes to a socket the daemon closed (a refused request
/// body) must see EPIPE, not die of SIGPIPE.
inline const bool sigpipe_ignored = [] {
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}();

/// Runs `MCPRT_BIN args...` in `cwd` (when given) with $HOME set to `home_env`
/// (so that a forgotten --home can never touch the real home directory).
/// An argument vector and an environment with the arrays execve takes,
/// built before fork(): the child only calls exec().
struct exec_image {
  exec_image(std::vector<std::string> argv_strings, std::vector<std::string> env_strings)
      : argv_s(std::move(argv_strings)), env_s(std::move(env_strings)) {
    for (auto& a : argv_s)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_s)
      envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  exec_image(const exec_image&) = delete;
  exec_image& operator=(const exec_image&) = delete;
  [[noreturn]] void exec() {
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  std::vector<std::string> argv_s, env_s;
  std::vector<char*> argv, envp;
};

/// This process's environment without the variables `drop` says to drop.
template <class Drop>
std::vector<std::string> environment_without(Drop drop) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    if (!drop(kv.substr(0, kv.find('=')))) out.push_back(std::move(kv));
  }
  return out;
}

/// `MCPRT_BIN args...` with HOME set to `home_env`.
inline std::unique_ptr<exec_image> mcprt_exec(const std::vector<std::string>& args, const fs::path& home_env) {
  std::vector<std::string> argv{MCPRT_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  auto env = environment_without([](const std::string& key) { return key == "HOME"; });
  env.push_back("HOME=" + home_env.string());
  return std::make_unique<exec_image>(std::move(argv), std::move(env));
}

inline run_result run_mcprt(const std::vector<std::string>& args, const fs::path& home_env,
                            const fs::path& cwd = {}) {
  auto command = mcprt_exec(args, home_env);
  std::string cwd_s = cwd.string();

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (!cwd_s.empty() && ::chdir(cwd_s.c_str()) != 0) ::_exit(126);
    command->exec();
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);

  run_result r;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.code = 128 + WTERMSIG(status);
  r.j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  return r;
}

/// Runs `MCPRT_BIN args...` as a command the owner typed: on a terminal of
/// its own (a pseudo-terminal, the child its foreground process group),
/// with $HOME set to `home_env`. stdout and stderr both go to the
/// terminal: `out` holds them together, `err` is empty.
inline run_result run_mcprt_at_terminal(const std::vector<std::string>& args, const fs::path& home_env) {
  auto command = mcprt_exec(args, home_env);
  int master = -1;
  pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  if (pid < 0) throw std::runtime_error(std::string("forkpty: ") + std::strerror(errno));
  if (pid == 0) command->exec();
  run_result r;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(master, buf, sizeof buf);
    if (n > 0) r.out.append(buf, static_cast<size_t>(n));
    else if (n < 0 && errno == EINTR) continue;
    else break; // EIO once the child closed its side
  }
  ::close(master);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.code = 128 + WTERMSIG(status);
  return r;
}

/// The entry for `name` in an explain --json document, or nullptr.
inline const json* find_server(const json& doc, const std::string& name) {
  if (!doc.is_object() || !doc.contains("servers")) return nullptr;
  for (auto& s : doc["servers"])
    if (s.value("name", "") == name) return &s;
  return nullptr;
}

inline std::vector<std::string> server_names(const json& doc) {
  std::vector<std::string> out;
  if (doc.is_object() && doc.contains("servers"))
    for (auto& s : doc["servers"])
      out.push_back(s.value("name", ""));
  return out;
}

inline std::vector<std::string> strings(const json& arr) {
  std::vector<std::string> out;
  if (arr.is_array())
    for (auto& x : arr)
      out.push_back(x.is_string() ? x.get<std::string>() : x.dump());
  return out;
}

/// Describes a run for failure messages.
inline std::string describe(const run_result& r) {
  return "exit " + std::to_string(r.code) + "\n--- stdout ---\n" + r.out + "--- stderr ---\n" + r.err;
}

/// A fresh `home/` and `ws/` under a unique temp directory, removed at the end.
class cli_test : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "mcprt-cli-test-XXXXXX").string();
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    ASSERT_NE(::mkdtemp(buf.data()), nullptr) << std::strerror(errno);
    // Lexically normal and absolute, as mcprt reports paths.
    root_ = fs::path(buf.data()).lexically_normal();
    home_ = root_ / "home";
    ws_ = root_ / "ws";
    fs::create_directories(home_);
    fs::create_directories(ws_);
  }

  void TearDown() override {
    std::error_code ec;
    if (!root_.empty()) fs::remove_all(root_, ec);
  }

  // Settings files of the default (.mcprt) profile.
  fs::path user_settings() const { return home_ / ".mcprt" / "settings.json"; }
  fs::path project_file() const { return ws_ / ".mcp.json"; }
  fs::path workspace_settings() const { return ws_ / ".mcprt" / "settings.json"; }
  fs::path approvals_file() const { return home_ / ".mcprt" / "mcp-approvals.json"; }

  run_result mcprt(std::vector<std::string> args, const fs::path& cwd = {}) const {
    return run_mcprt(args, home_, cwd);
  }

  /// `mcprt explain --json --workspace ws --home home extra...`
  run_result explain(std::initializer_list<std::string> extra = {}) const {
    std::vector<std::string> args = {"explain", "--json", "--workspace", ws_.string(), "--home",
                                     home_.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return mcprt(args);
  }

  /// `mcprt approve|reject NAME --workspace ws --home home extra...`
  run_result decide(const std::string& verb, const std::string& name,
                    std::initializer_list<std::string> extra = {}) const {
    std::vector<std::string> args = {verb, name, "--workspace", ws_.string(), "--home",
                                     home_.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return mcprt(args);
  }

  fs::path root_, home_, ws_;
};

} // namespace mcprt_cli_test
