#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "io/child_process.hpp"
#include "io/egress_proxy.hpp"
#include "io/loop_turn.hpp"
#include "io/reaper.hpp"

namespace mcprt::io {

/// How a process served by the reactor ended. It *is* an exit_status (so an
/// `on_exit` taking `exit_status` works unchanged), plus why the reactor
/// itself stepped in, if it did.
struct process_exit : exit_status {
  /// Empty when the process ended on its own (or after a plain stdin close).
  /// Otherwise what the reactor did and why, e.g. "still running 2000 ms
  /// after stdin was closed: sent SIGTERM", "stdin backlog over 67108864
  /// bytes (server not reading): killed", "killed on request". Several
  /// reasons are joined with "; ".
  std::string reason;

  /// The server closed its stdout and was still running
  /// reactor_options::stdout_close_grace later, so the reactor killed it: a
  /// server that can no longer answer is a failed one.
  bool stdout_closed = false;

  /// "exit code 3", "killed by SIGKILL (killed on request)".
  std::string describe() const;
};

/// Callbacks of one process. All are called on the reactor thread, one at a
/// time (never concurrently, neither for one process nor across processes),
/// so they must be quick and must not block: the intended use is an
/// `anon_send` to the actor owning the connection. Empty functions are
/// skipped. An exception escaping a callback is swallowed (one bad callback
/// must not take the I/O of every server down).
struct process_events {
  /// Raw stdout chunks, in order (the caller frames lines). The view is only
  /// valid during the call.
  std::function<void(std::string_view bytes)> on_stdout;
  /// Complete stderr lines, without the trailing "\n" / "\r\n". A line longer
  /// than reactor_options::max_stderr_line is cut there and gets
  /// " [... N bytes truncated]" appended. An unterminated last line is
  /// delivered when stderr closes.
  std::function<void(std::string line)> on_stderr_line;
  /// Exactly once per spawned process, after the child was reaped AND its
  /// stdout and stderr were drained to EOF (or reactor_options::drain_grace
  /// passed after the exit: a process that escaped the group still holds
  /// them). Every on_stdout / on_stderr_line call comes before it; none after.
  /// Not called for processes still alive when the reactor is destroyed.
  std::function<void(const process_exit& how)> on_exit;
};

struct reactor_options {
  /// Bytes written to a process but not yet accepted by its stdin pipe. A
  /// server that lets more pile up is not reading: it is SIGKILLed (group)
  /// and on_exit says so. Dropping bytes instead would corrupt the JSON-RPC
  /// stream, and blocking the writer would stall every other server.
  std::size_t max_write_backlog = 64 * 1024 * 1024;
  /// stderr lines are cut after this many bytes (see on_stderr_line).
  std::size_t max_stderr_line = 4096;
  /// After the leader is reaped (and its group SIGKILLed), how long to keep
  /// reading stdout/stderr for EOF before on_exit fires anyway.
  std::chrono::milliseconds drain_grace{2000};
  /// A server that closes its stdout and is still running this much later
  /// (and was not asked to stop) is SIGKILLed (group) and on_exit says so
  /// (process_exit::stdout_closed): it can no longer answer anything.
  std::chrono::milliseconds stdout_close_grace{2000};
  /// How the reaper process, the parent of every server, is started.
  reaper_start reaper = reaper_start::exec_image;
  /// A reaper that takes longer to answer a spawn is taken for wedged (it
  /// was stopped, say): it is killed, with its servers, and a new one starts
  /// with the next spawn.
  std::chrono::milliseconds reaper_answer_timeout{30000};
  /// Problems of the reactor itself rather than of one process (the reaper
  /// process died, say). Called on the reactor thread; may be empty.
  std::function<void(const std::string&)> on_warning;
  /// Told around each turn of the reactor thread (may be empty).
  std::shared_ptr<loop_turn_hook> turn_hook;
  /// After a turn that handled something, how long the thread keeps
  /// looking for the next event before it sleeps. A wake-up from sleep costs
  /// more than the round trip to a quick stdio server; the look costs CPU
  /// only right after work. Zero: sleep at once.
  std::chrono::microseconds poll_before_sleep{50};
  /// A sandboxed server's egress proxy refused a connection (on the proxy's
  /// thread; may be empty).
  std::function<void(const egress_refusal&)> on_egress_refused;
};

/// A loop that runs on the reactor thread instead of a thread of its own
/// (the daemon's HTTP server): the reactor watches its descriptor beside
/// the servers' pipes, in the same turns, so that a request, the server's
/// answer and the response can all be handled by one thread without waking
/// another. Its methods are called on the reactor thread only.
class guest_loop {
public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~guest_loop() = default;
  /// Readable while the guest has work (an epoll descriptor, say). Fixed.
  virtual int fd() const = 0;
  /// Does what is ready without waiting; `readable`: the descriptor was
  /// seen readable in this turn (else the guest runs for its deadline or
  /// because it wanted a turn). Returns when to be called again at the
  /// latest, or nullopt when the guest is done. Must not block, like every
  /// callback of the reactor.
  virtual std::optional<time_point> run_ready(bool readable) noexcept = 0;
  /// Asked when the actor work of a turn has run: true runs the guest
  /// again now though its descriptor was not readable (it was handed
  /// work on the reactor thread itself, which needs no wake-up).
  virtual bool wants_turn() const noexcept { return false; }
  /// The last call, once the reactor no longer watches fd() (the guest may
  /// close it now): after run_ready said it is done, or because the reactor
  /// is stopping (`orphaned`; it may have been before the guest came), when
  /// the guest must carry on by itself if it has to.
  virtual void released(bool orphaned) noexcept = 0;
};

/// ONE epoll thread that serves the pipes of all MCP server processes of the
/// runtime: the number of I/O threads does not depend on the number of
/// servers (thread_count() is 1). POSIX/Linux only (epoll, eventfd,
/// SOCK_SEQPACKET, memfd).
///
/// - Servers are made by the reaper process (io/reaper.hpp), which the
///   reactor thread starts before the first spawn (and again after it died):
///   the servers are its children, each leads its own process group and dies
///   with the reaper (PR_SET_PDEATHSIG), and no descendant of a server
///   outlives the reactor, or the process, however it ends.
/// - Exits are reported by the reaper (no SIGCHLD handler, no waitpid in the
///   runtime). When a server's leader exits, for whatever reason, the rest
///   of its process group is SIGKILLed before the leader is reaped: a
///   server's helpers in its group never outlive it, and the group id
///   cannot have been recycled at that point. Signals to a server go
///   through the reaper too, so none reaches a reaped (and reused) pid.
/// - A server that closes its stdout but keeps running is killed after
///   reactor_options::stdout_close_grace (see process_exit::stdout_closed).
/// - Writes are queued and written non-blocking when the pipe has room.
/// - The constructor sets SIGPIPE to SIG_IGN for the whole process if it
///   still has its default disposition (a write to a server that went away
///   must be an EPIPE, not the death of the runtime). Children get SIG_DFL
///   back (child_process resets it).
///
/// All member functions are thread-safe. write/shutdown/kill are
/// asynchronous and ignore unknown or already finished ids. Callbacks may
/// call any member function (spawn from a callback runs inline), but the
/// reactor must not be destroyed from one of its callbacks.
class reactor {
public:
  using process_id = std::uint64_t; // never 0, never reused

  struct spawned {
    process_id id;
    pid_t pid;
    /// For a sandboxed spawn: what is in force and what is missing.
    std::optional<sandbox_launch> sandbox;
  };

  /// What the sandbox can use on this machine (probed once, on the
  /// reactor thread, at the first sandboxed spawn).
  sandbox_support sandbox_capabilities();

  reactor();
  explicit reactor(reactor_options opts);
  /// Stops: the reaper SIGKILLs every server group and every other
  /// descendant, reaps them all and exits; then the thread is joined. No
  /// callback runs once destruction has begun.
  ~reactor();

  reactor(const reactor&) = delete;
  reactor& operator=(const reactor&) = delete;

  /// Spawns on the reactor thread and blocks the caller until the fork/exec
  /// outcome is known. Throws spawn_error (from child_process) on failure;
  /// the reactor is unaffected. Callbacks may start before this returns.
  spawned spawn(const spawn_options& opts, process_events events);

  /// Queues bytes for the process's stdin. Dropped once shutdown or kill
  /// was called or stdin is closed (the server closed its end). See
  /// reactor_options::max_write_backlog for servers that stop reading.
  void write(process_id id, std::string bytes);

  /// Asks the process to end, asynchronously: close stdin (once what was
  /// already written has been flushed); if still running after
  /// `stdin_grace`, drop any unflushed bytes and SIGTERM the group; if still
  /// running `term_grace` later, SIGKILL the group. on_exit fires once it
  /// is reaped. A second shutdown of the same process is ignored.
  void shutdown(process_id id, std::chrono::milliseconds stdin_grace = std::chrono::milliseconds(2000),
                std::chrono::milliseconds term_grace = std::chrono::milliseconds(2000));

  /// SIGKILLs the process group right away (asynchronously); on_exit follows.
  void kill(process_id id);

  /// Runs `guest` on the reactor thread from its next turn on (see
  /// guest_loop); a stopping reactor releases it at once.
  void host(std::shared_ptr<guest_loop> guest);

  /// Processes spawned and not yet reaped.
  std::size_t process_count() const;

  /// The reaper process, or -1 before the first spawn (and after it died,
  /// until the next one).
  pid_t reaper_pid() const;

  static constexpr std::size_t thread_count() { return 1; }

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace mcprt::io
