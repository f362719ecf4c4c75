#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "io/child_process.hpp"

namespace mcprt::io {

/// How the reaper process is started.
enum class reaper_start {
  /// Its own small static image, executed from a memfd (the default). Where
  /// the system refuses to execute it (a noexec policy for memfds), the
  /// fallback is `fork`.
  exec_image,
  /// A child forked from the runtime that never execs: it keeps the
  /// runtime's pages mapped (copy-on-write) for as long as it lives.
  fork,
};

/// What the reaper reported about one server.
struct reaper_exit {
  std::uint64_t id = 0;
  pid_t pid = -1;
  exit_status status;
};

/// The runtime's end of its reaper: one process, the parent of every
/// server, that makes sure no descendant of a server outlives the runtime
/// (see docs/connections.md, "Containment"). It
///
/// - is a child subreaper, so whatever a server leaves behind (a daemonised
///   helper, a setsid grandchild) becomes the reaper's child when its own
///   parent dies;
/// - makes each server (own process group, SIGKILL when the reaper dies,
///   pipes on 0/1/2), reports its exit after SIGKILLing the rest of its
///   group, and signals its group on request (so no pid is signalled after
///   it was reaped);
/// - when the runtime goes away (its socket closes: exit, crash, SIGKILL; the
///   thread that started it ends; or shutdown() asks), SIGKILLs every server
///   group, then every child it has, reaps, and repeats until it has no
///   child left, then exits.
///
/// Not thread-safe: the reactor thread owns it. It starts the process from
/// the calling thread, and the process's PR_SET_PDEATHSIG is tied to that
/// thread: start it from a thread that lives as long as the servers.
class reaper {
public:
  explicit reaper(reaper_start how = reaper_start::exec_image);
  /// shutdown(): no server and no descendant of one is left.
  ~reaper();

  reaper(const reaper&) = delete;
  reaper& operator=(const reaper&) = delete;

  /// Starts the process unless it runs. Throws spawn_error when it cannot.
  void start();
  bool running() const { return fd_ >= 0; }
  /// The socket to watch for reading (and, while wants_write(), writing);
  /// -1 when not running.
  int fd() const { return fd_; }
  pid_t pid() const { return pid_; }
  /// How the running process was started: exec_image, or fork (asked for,
  /// or the fallback).
  reaper_start mode() const { return mode_; }

  /// Has the reaper make one server with the given ends of its pipes
  /// (stdin's read end, stdout's and stderr's write ends; the caller keeps
  /// and closes its copies) and waits for the outcome: the pid. Throws
  /// spawn_error (command not found, cwd missing, reaper gone, ...).
  /// `id` names the server in later messages; never 0, never reused.
  /// `extra_fd`, when given, is the server's fd 3 (a sandbox's way to the
  /// egress proxy).
  pid_t spawn(std::uint64_t id, const spawn_options& opts, int in_fd, int out_fd, int err_fd,
              std::chrono::milliseconds timeout = std::chrono::seconds(30), int extra_fd = -1);

  /// What the reaper's image can set up on this machine for a sandbox
  /// (its `sandbox-probe`): one line, or "" when there is no image or it
  /// could not run. Runs the image once, briefly, from the calling thread.
  static std::string probe_sandbox();

  /// Sends `sig` to the server's process group, if it has not been reaped
  /// yet (asynchronously; unknown ids are ignored by the reaper).
  void signal(std::uint64_t id, int sig);

  /// Reads what the reaper sent and writes what is queued, without
  /// blocking. Exits go to `exits`. Returns false when the reaper is gone
  /// (it was killed, or the socket broke): every server it had was killed
  /// by its parent-death signal, and start() makes a new one.
  bool pump(std::vector<reaper_exit>& exits);

  /// Requests wait for the socket to take them.
  bool wants_write() const { return !outbox_.empty(); }

  /// Exits read while spawn() waited, not handed out by pump() yet.
  bool has_buffered() const { return !early_exits_.empty(); }

  /// Asks the reaper to kill every descendant and exit, and waits for it
  /// (at most `timeout`, then SIGKILL: its servers then die of their
  /// parent-death signal). No-op when not running.
  void shutdown(std::chrono::milliseconds timeout = std::chrono::seconds(15));

private:
  struct outgoing {
    std::string bytes;
    std::vector<int> fds; // closed once sent (or dropped)
  };
  bool flush();                                          // false: broken
  bool read_one(std::vector<reaper_exit>& exits);        // false: nothing (more) to read now
  void lost();                                           // the process is gone: close and reap it
  bool wait_for_exit(std::chrono::milliseconds timeout); // false: still not reaped
  void reap_leftovers(std::chrono::milliseconds timeout);

  reaper_start how_;
  reaper_start mode_ = reaper_start::exec_image;
  int fd_ = -1;
  pid_t pid_ = -1;
  bool broken_ = false;
  std::deque<outgoing> outbox_;
  // Set while spawn() waits: the reply to this id ends the wait.
  std::uint64_t awaited_ = 0;
  bool answered_ = false;
  pid_t answer_pid_ = -1;
  int answer_stage_ = 0;
  int answer_errno_ = 0;
  std::vector<reaper_exit> early_exits_; // read during spawn(), handed out by pump()
  std::vector<pid_t> unreaped_;          // dead reapers not collected yet
};

} // namespace mcprt::io
