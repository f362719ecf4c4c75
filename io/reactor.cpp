#include "io/reactor.hpp"

#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace mcprt::io {

std::string process_exit::describe() const {
  auto s = exit_status::describe();
  if (!reason.empty()) s += " (" + reason + ")";
  return s;
}

namespace {

using clock = std::chrono::steady_clock;

constexpr std::size_t read_chunk = 64 * 1024;
// Chunks read from one fd per wake-up: with level-triggered epoll the rest
// comes next round, so one chatty server cannot starve the others.
constexpr int reads_per_event = 4;
// Chunks read at once after the leader exited (the rest, if any, comes
// through epoll as usual): bounded, as a process outside the group may keep
// writing forever.
constexpr int reads_after_exit = 256;

// epoll_event.data.u64: process id << 2 | which fd (a guest loop's id, from
// the same counter, with k_guest). Ids start at 1; id 0 tags the eventfd and
// the reaper's socket.
enum fd_kind : std::uint64_t { k_stdout = 0, k_stderr = 1, k_stdin = 2, k_guest = 3 };

/// Writes what the pipe takes now; the count written. EAGAIN, EPIPE and
/// the like end it: the reactor thread takes the rest (and the error).
std::size_t write_some(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n > 0) done += static_cast<std::size_t>(n);
    else if (n < 0 && errno == EINTR) continue;
    else break;
  }
  return done;
}

constexpr std::uint64_t tag(std::uint64_t id, fd_kind k) {
  return (id << 2) | k;
}
constexpr std::uint64_t wake_tag = 0;
constexpr std::uint64_t reaper_tag = 1;

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

void set_nonblocking(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

// True once `pid` has exited (a zombie, or reaped), through a pidfd: it is
// not our child. Without pidfd (Linux < 5.3), false.
bool has_exited(pid_t pid) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, POLLIN, 0};
  bool exited = ::poll(&p, 1, 0) == 1;
  ::close(fd);
  return exited;
}

void append_reason(std::string& to, const std::string& what) {
  if (!to.empty()) to += "; ";
  to += what;
}

template <class F, class... Args>
void invoke_quietly(F& f, Args&&... args) {
  if (!f) return;
  try {
    f(std::forward<Args>(args)...);
  } catch (...) {
    // Documented: a throwing callback must not kill the I/O thread.
  }
}

std::string ms_text(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " ms";
}

} // namespace

struct reactor::impl {
  enum class timer_kind { term, kill, drain, stdout_closed };

  // Lets the writer's thread write a server's stdin itself while nothing
  // is queued for it: a hand-over to the reactor thread (a wake-up, a
  // context switch) on every message was the largest cost of a tool call's
  // way out. `direct` holds while stdin is open, not shutting down, the
  // backlog is empty and no write is posted; writes and the closing of `fd`
  // happen under `mtx`, so a direct write never meets a closed (or reused)
  // descriptor.
  struct stdin_lane {
    std::mutex mtx;
    int fd = -1;
    bool direct = false;
    std::size_t posted = 0; // writes on their way to the reactor thread
    /// Written on the reactor thread during a turn: sent as one write when
    /// the turn's actor work is done (several calls to one server in a turn
    /// cost one system call, and wake the server once). Later writes from
    /// any thread queue behind it.
    std::string held;

    /// Under mtx: writes what the pipe takes now if the lane is direct.
    /// Returns what is left, which must go through the reactor thread
    /// (counted in `posted`, and the lane is no longer direct).
    std::string send_or_rest(std::string bytes) {
      if (bytes.empty()) return bytes;
      if (direct) {
        bytes.erase(0, write_some(fd, bytes));
        if (bytes.empty()) return bytes;
        direct = false;
      }
      ++posted;
      return bytes;
    }
  };

  // One server: the runtime's ends of its pipes; the process itself is the
  // reaper's child.
  struct process {
    process_id id = 0;
    pid_t pid = -1;
    int in_fd = -1;
    int out_fd = -1;
    int err_fd = -1;
    process_events events;
    bool stdout_open = true; // registered in epoll, not at EOF
    bool stderr_open = true;
    bool stdin_open = true;
    bool close_stdin_when_flushed = false;
    bool shutting_down = false;
    bool reaped = false;
    exit_status status;
    std::string reason;
    std::chrono::milliseconds stdin_grace{0};
    std::chrono::milliseconds term_grace{0};
    std::deque<std::string> backlog;
    std::size_t backlog_offset = 0; // into backlog.front()
    std::size_t backlog_bytes = 0;
    std::string err_line;
    std::size_t err_cut = 0; // bytes dropped from the current stderr line
    bool stdout_closed_early = false;
    std::shared_ptr<stdin_lane> lane = std::make_shared<stdin_lane>();

    process(process_id i, pid_t p, int in, int out, int err)
        : id(i), pid(p), in_fd(in), out_fd(out), err_fd(err) {}
    process(const process&) = delete;
    process& operator=(const process&) = delete;
    ~process() {
      for (int fd : {in_fd, out_fd, err_fd})
        if (fd >= 0) ::close(fd);
    }
  };

  // A command runs on the reactor thread; `cancelled` when the reactor stops
  // before it got to run.
  using command = std::function<void(bool cancelled)>;

  reactor_options opts;
  int epfd = -1;
  int wakefd = -1;
  std::thread thread;
  std::atomic<std::size_t> live{0};
  std::atomic<pid_t> reaper_pid{-1};

  std::mutex mtx; // guards queue and stopping
  std::vector<command> queue;
  bool stopping = false;

  // Reactor thread only.
  std::map<process_id, std::unique_ptr<process>> procs;
  std::multimap<clock::time_point, std::pair<process_id, timer_kind>> timers;
  process_id next_id = 1;
  std::vector<char> buf = std::vector<char>(read_chunk);
  bool stop_requested = false;
  io::reaper reaper;
  std::optional<sandbox_support> sandbox_probe;
  std::unique_ptr<egress_proxy> egress;
  struct guest_entry {
    std::shared_ptr<guest_loop> loop;
    int fd = -1;
    bool ready = true;                  // to run in this turn
    bool readable = false;              // its descriptor was seen readable
    clock::time_point due = clock::time_point::max(); // when it asked to run
  };
  std::map<std::uint64_t, guest_entry> guests;
  /// Lanes with bytes held for the end of the turn (reactor thread only).
  std::vector<std::pair<process_id, std::shared_ptr<stdin_lane>>> held_lanes;
  bool holding = false; // in a turn: writes on this thread are held
  int reaper_fd = -1;              // as registered in epoll
  std::uint32_t reaper_events = 0; // its epoll interest

  static thread_local const impl* current; // the impl whose thread this is

  explicit impl(reactor_options o) : opts(std::move(o)), reaper(opts.reaper) {
    struct sigaction sa {};
    if (::sigaction(SIGPIPE, nullptr, &sa) == 0 && sa.sa_handler == SIG_DFL && !(sa.sa_flags & SA_SIGINFO))
      ::signal(SIGPIPE, SIG_IGN);
    epfd = ::epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) throw std::system_error(errno, std::generic_category(), "reactor: epoll_create1");
    wakefd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wakefd < 0) {
      int e = errno;
      ::close(epfd);
      throw std::system_error(e, std::generic_category(), "reactor: eventfd");
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 0;
    ::epoll_ctl(epfd, EPOLL_CTL_ADD, wakefd, &ev);
    thread = std::thread([this] { run(); });
  }

  ~impl() {
    {
      std::lock_guard<std::mutex> lk(mtx);
      stopping = true;
    }
    wake();
    if (thread.joinable()) thread.join();
    ::close(wakefd);
    ::close(epfd);
  }

  bool on_reactor_thread() const { return current == this; }

  void wake() {
    std::uint64_t one = 1;
    while (::write(wakefd, &one, sizeof one) < 0 && errno == EINTR) {
    }
  }

  // The stdin lanes by process, for writers on other threads.
  std::mutex lanes_mtx;
  std::unordered_map<process_id, std::shared_ptr<stdin_lane>> lanes;

  std::shared_ptr<stdin_lane> lane_of(process_id id) {
    std::lock_guard<std::mutex> guard{lanes_mtx};
    auto i = lanes.find(id);
    return i == lanes.end() ? nullptr : i->second;
  }

  // False when the reactor is stopping (the command was not queued).
  bool post(command c) {
    {
      std::lock_guard<std::mutex> lk(mtx);
      if (stopping) return false;
      queue.push_back(std::move(c));
    }
    wake();
    return true;
  }

  process* find(process_id id) {
    auto i = procs.find(id);
    return i == procs.end() ? nullptr : i->second.get();
  }

  // --- epoll bookkeeping ---------------------------------------------------

  void add_fd(int fd, std::uint32_t events, std::uint64_t data) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = data;
    ::epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
  }

  void del_fd(int fd) {
    if (fd >= 0) ::epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nullptr);
  }

  void add_timer(clock::time_point at, process_id id, timer_kind k) { timers.emplace(at, std::make_pair(id, k)); }

  // --- spawning --------------------------------------------------------------

  sandbox_support capabilities() {
    ensure_reaper(); // throws spawn_error
    if (reaper.mode() != reaper_start::exec_image) {
      sandbox_support none;
      none.why_none = "the reaper runs without its image (no executable memfd here)";
      return none;
    }
    if (!sandbox_probe) {
      auto line = reaper::probe_sandbox();
      if (line.empty()) {
        sandbox_support none;
        none.why_none = "the sandbox probe did not run";
        sandbox_probe = none;
      } else {
        sandbox_probe = parse_sandbox_probe(line);
      }
    }
    return *sandbox_probe;
  }

  // The options that start `o` in its sandbox: the reaper's image again
  // (/proc/self/exe in the reaper's child), told the policy, then the
  // server. The command is resolved here, so a missing one fails as
  // without the sandbox.
  struct sandboxed {
    spawn_options wrapped;
    sandbox_launch launch;
    int control_fd = -1; // the egress proxy's end for the forwarder, or -1
  };
  sandboxed sandbox_spawn(const spawn_options& o) {
    auto support = capabilities();
    auto plan = *o.sandbox;
    auto resolved = resolve_command(o);
    std::vector<std::string> keep{resolved};
    if (o.cwd) keep.push_back(*o.cwd);
    keep_visible(plan, keep);
    sandboxed out;
    out.launch = plan_launch(plan, support);
    if (plan.required && !out.launch.complete()) {
      std::string why;
      for (auto& m : out.launch.missing)
        if (m.rfind(protection::memory, 0) != 0) why += (why.empty() ? "" : "; ") + m;
      throw spawn_error("cannot start '" + o.command + "' sandboxed as required: " + why);
    }
    out.wrapped = o;
    out.wrapped.sandbox.reset();
    if (!support.image) return out; // nothing to wrap: the environment is all
    if (out.launch.forward_port) {
      if (!egress) egress = std::make_unique<egress_proxy>(opts.on_egress_refused);
      out.control_fd = egress->add_server(o.name.empty() ? o.command : o.name, plan.network);
      auto proxy = "http://127.0.0.1:" + std::to_string(out.launch.forward_port);
      for (const char* k : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"})
        out.wrapped.env[k] = proxy;
      for (const char* k : {"NO_PROXY", "no_proxy"})
        out.wrapped.env[k] = "";
    }
    out.wrapped.command = "/proc/self/exe";
    out.wrapped.args = out.launch.args;
    out.wrapped.args.push_back(resolved);
    out.wrapped.args.push_back(o.command);
    for (auto& a : o.args)
      out.wrapped.args.push_back(a);
    return out;
  }

  spawned do_spawn(const spawn_options& o, process_events events) {
    if (o.command.empty()) throw spawn_error("cannot start server: no command given");
    ensure_reaper(); // throws spawn_error
    if (o.sandbox) {
      auto s = sandbox_spawn(o);
      struct fd_closer {
        int fd;
        ~fd_closer() {
          if (fd >= 0) ::close(fd);
        }
      } control{s.control_fd};
      auto r = spawn_plain(s.wrapped, std::move(events), s.control_fd);
      r.sandbox = std::move(s.launch);
      return r;
    }
    return spawn_plain(o, std::move(events), -1);
  }

  spawned spawn_plain(const spawn_options& o, process_events events, int extra_fd) {
    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) != 0)
      throw spawn_error("cannot start '" + o.command + "': pipe: " + std::strerror(errno));
    if (::pipe2(out, O_CLOEXEC) != 0) {
      int e = errno;
      for (int fd : in)
        ::close(fd);
      throw spawn_error("cannot start '" + o.command + "': pipe: " + std::strerror(e));
    }
    if (::pipe2(err, O_CLOEXEC) != 0) {
      int e = errno;
      for (int fd : {in[0], in[1], out[0], out[1]})
        ::close(fd);
      throw spawn_error("cannot start '" + o.command + "': pipe: " + std::strerror(e));
    }
    auto id = next_id++;
    pid_t pid = -1;
    try {
      pid = reaper.spawn(id, o, in[0], out[1], err[1], opts.reaper_answer_timeout, extra_fd);
    } catch (...) {
      for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]})
        ::close(fd);
      service_reaper(); // exits read while waiting come first
      if (!reaper.running() && reaper_fd >= 0) on_reaper_lost();
      throw;
    }
    for (int fd : {in[0], out[1], err[1]})
      ::close(fd);
    auto p = std::make_unique<process>(id, pid, in[1], out[0], err[0]);
    p->events = std::move(events);
    for (int fd : {p->in_fd, p->out_fd, p->err_fd})
      set_nonblocking(fd);
    add_fd(p->out_fd, EPOLLIN, tag(p->id, k_stdout));
    add_fd(p->err_fd, EPOLLIN, tag(p->id, k_stderr));
    // Edge-triggered: only interesting after a write hit EAGAIN.
    add_fd(p->in_fd, EPOLLOUT | EPOLLET, tag(p->id, k_stdin));
    spawned s{p->id, pid, std::nullopt};
    {
      std::lock_guard<std::mutex> guard{p->lane->mtx};
      p->lane->fd = p->in_fd;
      p->lane->direct = true;
    }
    {
      std::lock_guard<std::mutex> guard{lanes_mtx};
      lanes.emplace(p->id, p->lane);
    }
    procs.emplace(p->id, std::move(p));
    live.fetch_add(1);
    return s;
  }

  // --- the reaper ------------------------------------------------------------

  void ensure_reaper() {
    if (reaper.running()) return;
    if (reaper_fd >= 0) on_reaper_lost();
    reaper.start(); // throws spawn_error
    // epoll watches a copy that only this thread closes, after taking it
    // out of epoll: the reaper object closes its own when the process is
    // gone, and a closed fd whose file lives on (in a forked copy of the
    // host, say) would otherwise stay in the interest list.
    reaper_fd = ::fcntl(reaper.fd(), F_DUPFD_CLOEXEC, 3);
    if (reaper_fd < 0) {
      int e = errno;
      reaper.shutdown();
      throw spawn_error(std::string("cannot watch the reaper process: ") + std::strerror(e));
    }
    reaper_events = EPOLLIN;
    add_fd(reaper_fd, reaper_events, reaper_tag);
    reaper_pid.store(reaper.pid());
  }

  void forget_reaper_fd() {
    if (reaper_fd < 0) return;
    del_fd(reaper_fd);
    ::close(reaper_fd);
    reaper_fd = -1;
    reaper_events = 0;
  }

  // Reads the reaper's reports; called when its socket is ready and after
  // anything that may have left replies or requests in its buffers.
  void service_reaper() {
    if (!reaper.running() && !reaper.has_buffered()) return;
    std::vector<reaper_exit> exits;
    bool alive = reaper.pump(exits);
    for (auto& e : exits)
      on_reported_exit(e);
    if (!alive) on_reaper_lost();
    else update_reaper_interest();
  }

  void update_reaper_interest() {
    if (!reaper.running()) return;
    std::uint32_t want = EPOLLIN | (reaper.wants_write() ? EPOLLOUT : 0u);
    if (want == reaper_events) return;
    epoll_event ev{};
    ev.events = want;
    ev.data.u64 = reaper_tag;
    ::epoll_ctl(epfd, EPOLL_CTL_MOD, reaper_fd, &ev);
    reaper_events = want;
  }

  void signal_group(process& p, int sig) {
    reaper.signal(p.id, sig);
    update_reaper_interest();
  }

  // The reaper is gone (killed, most likely): its servers died of their
  // parent-death signal, unreaped by us. Their group mates did not: kill
  // the groups from here, which is safe as long as one of them lives (a
  // group id is not reused while the group exists).
  void on_reaper_lost() {
    forget_reaper_fd();
    auto old = reaper_pid.exchange(-1);
    std::vector<process_id> ids;
    for (auto& [id, p] : procs)
      if (!p->reaped) ids.push_back(id);
    if (opts.on_warning)
      invoke_quietly(opts.on_warning, "the reaper process (pid " + std::to_string(old) + ") died; its "
                                        + std::to_string(ids.size())
                                        + " servers were killed with it; a new one starts with the next server");
    for (auto id : ids) {
      auto* p = find(id);
      if (!p || p->reaped) continue;
      ::kill(-p->pid, SIGKILL);
      append_reason(p->reason, "the reaper process died and took the server with it");
      exit_status st;
      st.signal = SIGKILL;
      on_exit_known(*p, st);
    }
  }

  // --- stdin -------------------------------------------------------------------

  void drop_backlog(process& p) {
    p.backlog.clear();
    p.backlog_offset = 0;
    p.backlog_bytes = 0;
  }

  // On the reactor thread: whether writers may write `p`'s stdin directly.
  void update_lane(process& p) {
    std::lock_guard<std::mutex> guard{p.lane->mtx};
    p.lane->direct = p.stdin_open && !p.shutting_down && !p.reaped && p.backlog.empty() && p.lane->posted == 0;
  }

  void close_stdin(process& p) {
    if (!p.stdin_open) return;
    del_fd(p.in_fd);
    {
      std::lock_guard<std::mutex> guard{p.lane->mtx};
      p.lane->direct = false;
      p.lane->fd = -1;
      ::close(p.in_fd);
    }
    p.in_fd = -1;
    p.stdin_open = false;
    drop_backlog(p);
  }

  void flush_stdin(process& p) {
    if (!p.stdin_open) return;
    while (!p.backlog.empty()) {
      auto& front = p.backlog.front();
      ssize_t n = ::write(p.in_fd, front.data() + p.backlog_offset, front.size() - p.backlog_offset);
      if (n > 0) {
        p.backlog_offset += static_cast<std::size_t>(n);
        p.backlog_bytes -= static_cast<std::size_t>(n);
        if (p.backlog_offset == front.size()) {
          p.backlog.pop_front();
          p.backlog_offset = 0;
        }
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return; // EPOLLOUT (edge) tells us when there is room again
      } else {
        // EPIPE (SIGPIPE is ignored) or worse: the reader is gone, the exit
        // (if any) is reported by the reaper.
        close_stdin(p);
        return;
      }
    }
    if (p.close_stdin_when_flushed) close_stdin(p);
    else update_lane(p);
  }

  void do_write(process_id id, std::string bytes) {
    auto* p = find(id);
    if (p) {
      std::lock_guard<std::mutex> guard{p->lane->mtx};
      if (p->lane->posted > 0) --p->lane->posted;
    }
    if (!p || !p->stdin_open || p->shutting_down || p->reaped || bytes.empty()) return;
    p->backlog_bytes += bytes.size();
    p->backlog.push_back(std::move(bytes));
    flush_stdin(*p);
    if (p->stdin_open && p->backlog_bytes > opts.max_write_backlog) {
      append_reason(p->reason, "stdin backlog over " + std::to_string(opts.max_write_backlog)
                                 + " bytes (server not reading): killed");
      hard_kill(*p);
    }
  }

  // --- stopping a process ----------------------------------------------------

  void hard_kill(process& p) {
    close_stdin(p);
    if (!p.reaped) signal_group(p, SIGKILL);
  }

  void do_shutdown(process_id id, std::chrono::milliseconds stdin_grace, std::chrono::milliseconds term_grace) {
    auto* p = find(id);
    if (!p || p->reaped || p->shutting_down) return;
    p->shutting_down = true;
    update_lane(*p);
    p->term_grace = term_grace;
    p->close_stdin_when_flushed = true;
    if (p->backlog.empty()) close_stdin(*p);
    p->stdin_grace = stdin_grace;
    add_timer(clock::now() + stdin_grace, id, timer_kind::term);
  }

  void do_kill(process_id id) {
    auto* p = find(id);
    if (!p || p->reaped) return;
    append_reason(p->reason, "killed on request");
    hard_kill(*p);
  }

  void fire(process_id id, timer_kind k) {
    auto* p = find(id);
    if (!p) return;
    switch (k) {
      case timer_kind::term:
        if (p->reaped) return;
        close_stdin(*p);
        append_reason(p->reason,
                      "still running " + ms_text(p->stdin_grace) + " after stdin was closed: sent SIGTERM");
        signal_group(*p, SIGTERM);
        add_timer(clock::now() + p->term_grace, id, timer_kind::kill);
        return;
      case timer_kind::kill:
        if (p->reaped) return;
        append_reason(p->reason, "still running " + ms_text(p->term_grace) + " after SIGTERM: sent SIGKILL");
        signal_group(*p, SIGKILL);
        return;
      case timer_kind::drain:
        if (!p->reaped) return;
        if (p->stdout_open || p->stderr_open) {
          drain(*p, k_stdout, reads_after_exit, true);
          drain(*p, k_stderr, reads_after_exit, true);
          if (p->stdout_open || p->stderr_open)
            append_reason(p->reason, "output still open " + ms_text(opts.drain_grace)
                                       + " after exit (held by a process outside the group): not read further");
        }
        finish(id);
        return;
      case timer_kind::stdout_closed:
        // Asked to stop meanwhile: that has its own escalation.
        if (p->reaped || p->shutting_down) return;
        // An exit closes stdout first; its report may just be late (a busy
        // machine, a busy reaper). Only a server that still runs is blamed.
        service_reaper();
        p = find(id);
        if (!p || p->reaped) return;
        if (has_exited(p->pid)) {
          add_timer(clock::now() + std::chrono::milliseconds(100), id, timer_kind::stdout_closed);
          return;
        }
        p->stdout_closed_early = true;
        append_reason(p->reason,
                      "closed its stdout but kept running for " + ms_text(opts.stdout_close_grace) + ": killed");
        hard_kill(*p);
        return;
    }
  }

  // --- reading -------------------------------------------------------------

  void deliver_stderr(process& p, const char* data, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      char c = data[i];
      if (c == '\n') {
        flush_stderr_line(p);
        continue;
      }
      if (p.err_line.size() < opts.max_stderr_line) p.err_line.push_back(c);
      else ++p.err_cut;
    }
  }

  void flush_stderr_line(process& p) {
    std::string line = std::move(p.err_line);
    p.err_line.clear();
    // A '\r' cut off by truncation does not count as content.
    if (p.err_cut == 0 && !line.empty() && line.back() == '\r') line.pop_back();
    if (p.err_cut > 0) line += " [... " + std::to_string(p.err_cut) + " bytes truncated]";
    p.err_cut = 0;
    invoke_quietly(p.events.on_stderr_line, std::move(line));
  }

  // Reads what `which` has to offer, at most `rounds` chunks (stopping early
  // at a short read unless `until_empty`). Returns false once the fd is at
  // EOF (or failed) and has been taken out of epoll.
  bool drain(process& p, fd_kind which, int rounds, bool until_empty) {
    bool& open = which == k_stdout ? p.stdout_open : p.stderr_open;
    int fd = which == k_stdout ? p.out_fd : p.err_fd;
    for (int round = 0; open && round < rounds; ++round) {
      ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n > 0) {
        if (which == k_stdout)
          invoke_quietly(p.events.on_stdout, std::string_view(buf.data(), static_cast<std::size_t>(n)));
        else deliver_stderr(p, buf.data(), static_cast<std::size_t>(n));
        if (static_cast<std::size_t>(n) < buf.size() && !until_empty) break; // pipe is (probably) empty
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      // EOF or a read error: this stream is over.
      del_fd(fd);
      open = false;
      if (which == k_stderr && (!p.err_line.empty() || p.err_cut > 0)) flush_stderr_line(p);
      // A server without stdout cannot answer anything. If it does not exit
      // on its own shortly (exiting closes stdout first), it is killed.
      if (which == k_stdout && !p.reaped && !p.shutting_down)
        add_timer(clock::now() + opts.stdout_close_grace, p.id, timer_kind::stdout_closed);
    }
    return open;
  }

  // The reaper reaped a server (after SIGKILLing the rest of its group).
  void on_reported_exit(const reaper_exit& e) {
    auto* p = find(e.id);
    if (!p || p->reaped) return;
    on_exit_known(*p, e.status);
  }

  void on_exit_known(process& p, const exit_status& st) {
    p.reaped = true;
    p.status = st;
    live.fetch_sub(1);
    close_stdin(p);
    // The server's last words: read what is already in the pipes now, wait
    // (bounded) for EOF on what is not.
    drain(p, k_stdout, reads_after_exit, true);
    drain(p, k_stderr, reads_after_exit, true);
    if (p.stdout_open || p.stderr_open) add_timer(clock::now() + opts.drain_grace, p.id, timer_kind::drain);
    else finish(p.id);
  }

  void finish(process_id id) {
    auto it = procs.find(id);
    if (it == procs.end()) return;
    auto p = std::move(it->second);
    procs.erase(it);
    {
      std::lock_guard<std::mutex> guard{lanes_mtx};
      lanes.erase(id);
    }
    {
      // ~process closes the descriptor: no direct write may still use it.
      std::lock_guard<std::mutex> guard{p->lane->mtx};
      p->lane->direct = false;
      p->lane->fd = -1;
    }
    if (p->stdout_open) del_fd(p->out_fd);
    if (p->stderr_open) del_fd(p->err_fd);
    if (!p->err_line.empty() || p->err_cut > 0) flush_stderr_line(*p);
    close_stdin(*p);
    process_exit how;
    static_cast<exit_status&>(how) = p->status;
    how.reason = std::move(p->reason);
    how.stdout_closed = p->stdout_closed_early;
    auto on_exit = std::move(p->events.on_exit);
    p.reset(); // reaped already: closes the fds
    invoke_quietly(on_exit, how);
  }

  // --- the loop --------------------------------------------------------------

  void handle(std::uint64_t data, std::uint32_t events) {
    if (data == wake_tag) {
      std::uint64_t v;
      while (::read(wakefd, &v, sizeof v) > 0) {
      }
      run_commands();
      return;
    }
    if (data == reaper_tag) {
      service_reaper();
      return;
    }
    auto id = data >> 2;
    auto kind = static_cast<fd_kind>(data & 3);
    if (kind == k_guest) {
      if (auto g = guests.find(id); g != guests.end()) g->second.ready = g->second.readable = true;
      return;
    }
    auto* p = find(id);
    if (!p) return; // finished earlier in this batch
    switch (kind) {
      case k_stdout:
      case k_stderr:
        if (!drain(*p, kind, reads_per_event, false) && p->reaped && !p->stdout_open && !p->stderr_open)
          finish(id);
        return;
      case k_stdin:
        flush_stdin(*p);
        if (p->stdin_open && p->backlog.empty() && (events & (EPOLLERR | EPOLLHUP))) close_stdin(*p);
        return;
      case k_guest: return;
    }
  }

  /// Before the thread waits: what the turn's writes held goes out.
  void flush_held() {
    holding = false;
    for (auto& [id, lane] : std::exchange(held_lanes, {})) {
      std::string rest;
      {
        std::lock_guard<std::mutex> guard{lane->mtx};
        rest = lane->send_or_rest(std::exchange(lane->held, {}));
      }
      if (!rest.empty()) do_write(id, std::move(rest));
    }
  }

  void add_guest(std::shared_ptr<guest_loop> loop) {
    auto id = next_id++;
    int fd = loop->fd();
    add_fd(fd, EPOLLIN, tag(id, k_guest));
    guests.emplace(id, guest_entry{std::move(loop), fd});
  }

  void note_guest_wishes() {
    for (auto& [id, g] : guests)
      if (!g.ready && g.loop->wants_turn()) g.ready = true;
  }

  void run_guests() {
    auto now = clock::now();
    for (auto it = guests.begin(); it != guests.end();) {
      auto& g = it->second;
      if (!g.ready && g.due > now) {
        ++it;
        continue;
      }
      bool readable = g.readable;
      g.ready = g.readable = false;
      if (auto next = g.loop->run_ready(readable)) {
        g.due = *next;
        ++it;
      } else {
        auto loop = std::move(g.loop);
        del_fd(g.fd);
        it = guests.erase(it);
        loop->released(false);
      }
    }
  }

  void orphan_guests() {
    auto gone = std::move(guests);
    guests.clear();
    for (auto& [id, g] : gone) {
      del_fd(g.fd);
      g.loop->released(true);
    }
  }

  void run_commands() {
    std::vector<command> batch;
    bool stop;
    {
      std::lock_guard<std::mutex> lk(mtx);
      batch.swap(queue);
      stop = stopping;
    }
    for (auto& c : batch)
      c(stop);
    if (stop) stop_requested = true;
  }

  int timeout_ms() {
    auto next = timers.empty() ? clock::time_point::max() : timers.begin()->first;
    for (auto& [id, g] : guests) {
      if (g.ready) return 0;
      next = std::min(next, g.due);
    }
    if (next == clock::time_point::max()) return -1;
    auto left = next - clock::now();
    if (left <= clock::duration::zero()) return 0;
    // Round up: waking a hair early would just spin once more.
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left + std::chrono::milliseconds(1)
                                                                    - std::chrono::nanoseconds(1));
    return static_cast<int>(std::min<long long>(ms.count(), 60 * 60 * 1000));
  }

  void fire_due_timers() {
    auto now = clock::now();
    while (!timers.empty() && timers.begin()->first <= now) {
      auto [id, kind] = timers.begin()->second;
      timers.erase(timers.begin());
      fire(id, kind);
    }
  }

  void run() {
    current = this;
    std::vector<epoll_event> events(256);
    loop_turn turn{opts.turn_hook};
    bool busy = false;
    while (!stop_requested) {
      turn.end();
      flush_held();
      note_guest_wishes();
      int wait = timeout_ms();
      int n = 0;
      // After a busy turn the next event (a server's answer, a client's
      // next request) usually comes within microseconds: looking for it
      // before going to sleep saves the sleep and the wake-up, which cost
      // more than the look. Yielding lets whatever else wants this core run.
      if (wait != 0 && busy && opts.poll_before_sleep.count() > 0) {
        auto until = clock::now() + opts.poll_before_sleep;
        do {
          n = ::epoll_wait(epfd, events.data(), static_cast<int>(events.size()), 0);
          if (n != 0) break;
          ::sched_yield();
        } while (clock::now() < until);
      }
      if (n == 0) n = ::epoll_wait(epfd, events.data(), static_cast<int>(events.size()), wait);
      busy = n > 0;
      if (n < 0 && errno != EINTR) break; // cannot happen with valid fds
      holding = true;
      turn.begin();
      for (int i = 0; i < n; ++i)
        handle(events[i].data.u64, events[i].events);
      fire_due_timers();
      // Exits read while a spawn waited for its answer, and signals queued
      // by the handlers above. What the reaper sends, epoll reports (level
      // triggered): no read on every turn of the loop.
      if (reaper.has_buffered() || reaper.wants_write()) service_reaper();
      if (!guests.empty()) {
        // What the callbacks above started runs before the guests do, so
        // that a guest sends what it produced (an HTTP response to a
        // server's answer) in this same turn.
        turn.end();
        turn.begin();
        note_guest_wishes();
        run_guests();
      }
    }
    turn.end();
    flush_held();
    orphan_guests();
    // Whatever is still queued (a spawn caller may be waiting on it) is
    // cancelled; nothing can be queued any more.
    {
      std::lock_guard<std::mutex> lk(mtx);
      stopping = true;
    }
    run_commands();
    // Stopping: no more callbacks. The reaper kills every server group and
    // every other descendant, reaps them all and exits.
    reaper.shutdown();
    forget_reaper_fd();
    reaper_pid.store(-1);
    {
      std::lock_guard<std::mutex> guard{lanes_mtx};
      lanes.clear();
    }
    for (auto& [id, p] : procs) {
      std::lock_guard<std::mutex> guard{p->lane->mtx};
      p->lane->direct = false;
      p->lane->fd = -1;
    }
    procs.clear();
    live.store(0);
    current = nullptr;
  }
};

thread_local const reactor::impl* reactor::impl::current = nullptr;

reactor::reactor() : reactor(reactor_options{}) {}

reactor::reactor(reactor_options opts) : impl_(std::make_unique<impl>(opts)) {}

reactor::~reactor() = default;

void reactor::host(std::shared_ptr<guest_loop> guest) {
  auto* p = impl_.get();
  bool queued = p->post([p, guest](bool cancelled) {
    if (cancelled) guest->released(true);
    else p->add_guest(guest);
  });
  if (!queued) guest->released(true);
}

reactor::spawned reactor::spawn(const spawn_options& opts, process_events events) {
  if (impl_->on_reactor_thread()) return impl_->do_spawn(opts, std::move(events));
  // The outcome crosses threads as a value (the error as its message, thrown
  // afresh here), not as an exception_ptr shared by two threads.
  using outcome = std::variant<spawned, std::string>;
  auto done = std::make_shared<std::promise<outcome>>();
  auto result = done->get_future();
  auto* self = impl_.get();
  // std::function needs a copyable closure: share what cannot be copied.
  auto shared_events = std::make_shared<process_events>(std::move(events));
  auto stopping = "cannot start '" + opts.command + "': the reactor is stopping";
  bool queued = impl_->post([self, &opts, shared_events, done, stopping](bool cancelled) {
    if (cancelled) {
      done->set_value(outcome(std::in_place_index<1>, stopping));
      return;
    }
    try {
      done->set_value(outcome(std::in_place_index<0>, self->do_spawn(opts, std::move(*shared_events))));
    } catch (const spawn_error& e) {
      done->set_value(outcome(std::in_place_index<1>, e.what()));
    } catch (const std::exception& e) {
      done->set_value(outcome(std::in_place_index<1>, "cannot start '" + opts.command + "': " + e.what()));
    }
  });
  if (!queued) throw spawn_error(stopping);
  auto got = result.get(); // `opts` outlives the command: we wait for it here
  if (got.index() == 1) throw spawn_error(std::get<1>(got));
  return std::get<0>(got);
}

sandbox_support reactor::sandbox_capabilities() {
  if (impl_->on_reactor_thread()) return impl_->capabilities();
  auto done = std::make_shared<std::promise<sandbox_support>>();
  auto result = done->get_future();
  auto* self = impl_.get();
  bool queued = impl_->post([self, done](bool cancelled) {
    sandbox_support none;
    none.why_none = "the reactor is stopping";
    if (cancelled) return done->set_value(none);
    try {
      done->set_value(self->capabilities());
    } catch (const std::exception& e) {
      none.why_none = e.what();
      done->set_value(none);
    }
  });
  if (!queued) {
    sandbox_support none;
    none.why_none = "the reactor is stopping";
    return none;
  }
  return result.get();
}

void reactor::write(process_id id, std::string bytes) {
  auto* self = impl_.get();
  if (bytes.empty()) return;
  auto post_write = [self, id](std::string rest) {
    auto shared = std::make_shared<std::string>(std::move(rest));
    self->post([self, id, shared](bool cancelled) {
      if (!cancelled) self->do_write(id, std::move(*shared));
    });
  };
  auto lane = impl_->lane_of(id);
  if (!lane) {
    post_write(std::move(bytes)); // not started, or gone: do_write decides
    return;
  }
  // Posted under the lane's lock, so that writes reach the pipe in the
  // order they were made.
  std::lock_guard<std::mutex> guard{lane->mtx};
  if (!lane->held.empty()) {
    lane->held += bytes; // behind what the reactor thread holds: it sends both
    return;
  }
  if (lane->direct && impl_->on_reactor_thread() && impl_->holding) {
    lane->held = std::move(bytes);
    impl_->held_lanes.emplace_back(id, lane);
    return;
  }
  auto rest = lane->send_or_rest(std::move(bytes));
  if (!rest.empty()) post_write(std::move(rest));
}

void reactor::shutdown(process_id id, std::chrono::milliseconds stdin_grace,
                       std::chrono::milliseconds term_grace) {
  auto* self = impl_.get();
  impl_->post([self, id, stdin_grace, term_grace](bool cancelled) {
    if (!cancelled) self->do_shutdown(id, stdin_grace, term_grace);
  });
}

void reactor::kill(process_id id) {
  auto* self = impl_.get();
  impl_->post([self, id](bool cancelled) {
    if (!cancelled) self->do_kill(id);
  });
}

std::size_t reactor::process_count() const {
  return impl_->live.load();
}

pid_t reactor::reaper_pid() const {
  return impl_->reaper_pid.load();
}

} // namespace mcprt::io
