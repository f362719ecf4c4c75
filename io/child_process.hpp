#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/sandbox_policy.hpp"

namespace mcprt::io {

struct spawn_options {
  std::string command; // resolved through PATH (of the merged environment)
  std::vector<std::string> args;
  /// Merged over the safe part of the runtime's environment
  /// (core/sandbox_policy's server_environment): no server inherits the
  /// runtime's secrets unless `inherit_all_env` or `inherit_env` say so.
  std::map<std::string, std::string> env;
  std::optional<std::string> cwd;
  bool inherit_all_env = false;
  std::vector<std::string> inherit_env{};
  /// Set: the server runs in the sandbox this plan describes (reactor
  /// spawns only; see io/reactor.hpp).
  std::optional<sandbox_plan> sandbox{};
  /// The server's name, for the egress proxy's refusals.
  std::string name{};
};

/// What execve gets for a spawn: argv, the environment (the runtime's,
/// with `env` merged over it, as "KEY=VALUE"), and the paths to try in
/// order (a command with a slash as is, otherwise each PATH entry of the
/// merged environment).
struct exec_strings {
  std::vector<std::string> argv;
  std::vector<std::string> envp;
  std::vector<std::string> candidates;
};
exec_strings exec_strings_for(const spawn_options& opts);

/// The file `opts.command` runs: the first candidate (exec_strings_for)
/// that is an executable file, relative ones taken from `opts.cwd`. Throws
/// spawn_error as a failed exec would ("cannot run 'x': No such file or
/// directory").
std::string resolve_command(const spawn_options& opts);

/// Why a child could not be started: command not found, not executable, bad
/// cwd, or out of resources; the message names the command and the OS error.
class spawn_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// How a child ended.
struct exit_status {
  bool exited = false; // normal exit (code valid) vs killed by a signal
  int code = 0;
  int signal = 0;
  std::string describe() const; // "exit code 3", "killed by SIGKILL"
};

/// One MCP server process with pipes on stdin, stdout and stderr. The child
/// leads its own process group, so signals reach everything it spawned
/// (`npx` wrappers and the like), and it is killed when the spawning thread
/// dies (PR_SET_PDEATHSIG): spawn from a thread that lives as long as the
/// runtime. The destructor kills the group and reaps: no zombie, no orphan.
class child_process {
public:
  static child_process spawn(const spawn_options& opts);

  child_process(child_process&& other) noexcept;
  child_process& operator=(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process();

  pid_t pid() const { return pid_; }
  int stdin_fd() const { return in_; }
  int stdout_fd() const { return out_; }
  int stderr_fd() const { return err_; }

  /// Closing stdin is how an MCP stdio server is asked to exit.
  void close_stdin();

  /// Reaps the child if it has exited; never blocks.
  std::optional<exit_status> try_wait();

  /// Close stdin, wait `stdin_grace`; SIGTERM the group, wait `term_grace`;
  /// SIGKILL the group. Always reaps the child and returns how it ended.
  exit_status shutdown(std::chrono::milliseconds stdin_grace = std::chrono::milliseconds(2000),
                       std::chrono::milliseconds term_grace = std::chrono::milliseconds(2000));

  bool running() const { return pid_ > 0 && !status_; }

private:
  child_process() = default;
  std::optional<exit_status> wait_for(std::chrono::milliseconds timeout);
  void close_fds();

  pid_t pid_ = -1;
  int in_ = -1;
  int out_ = -1;
  int err_ = -1;
  std::optional<exit_status> status_;
};

} // namespace mcprt::io
