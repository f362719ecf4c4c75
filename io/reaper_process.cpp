#include "io/reaper_process.hpp"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/proc_text.hpp"
#include "core/reaper_protocol.hpp"
#include "io/exec_child.hpp"

// Everything here runs in the reaper: after fork() in a multi-threaded
// process, or in the static image. So: system calls, fixed buffers in one
// static object, no allocation, no exceptions, never a return to the
// caller (exit_group directly: no atexit handler of the runtime may run).

namespace mcprt::io::detail {

bool force_proc_scan_for_tests = false;

namespace {

namespace wire = mcprt::reaper_protocol;

constexpr std::size_t max_servers = 16384;
// A server gives at most two replies (spawned, exited), plus the hello.
constexpr std::size_t ring_capacity = 2 * max_servers + 64;
constexpr int control_fd = 3;
constexpr int parent_gone_signal = wire::parent_gone_signal;
static_assert(parent_gone_signal == SIGUSR2, "the reaper takes SIGUSR2 as its parent-death signal");
constexpr int shutdown_deadline_s = 10;
constexpr int max_fds_per_message = 8;

struct server_slot {
  std::uint64_t id;
  pid_t pid;
};

// No member has an initializer but zero: the object stays in .bss instead
// of being written out (or constructed) at load time.
struct reaper_state {
  int mode;
  pid_t self;
  int sigfd;
  server_slot servers[max_servers];
  std::size_t server_count;
  alignas(wire::reply) unsigned char ring[ring_capacity][sizeof(wire::reply)];
  std::size_t ring_head;
  std::size_t ring_size;
  alignas(16) char message[wire::max_message + 64];
  alignas(16) char request[wire::max_request];
  char* slots[wire::max_strings + 3];
  alignas(16) char child_stack[64 * 1024];
  char proc_buf[16 * 1024];
#if defined(__SANITIZE_THREAD__)
  volatile int* shared; // stage, error: the forked child reports here
#endif
};

// Zero-initialised, in .bss: pages the reaper never touches cost nothing,
// in the runtime's image as in the reaper's.
reaper_state state;
wire::request_assembler assembler(state.request, sizeof state.request);

[[noreturn]] void leave(int code) {
  ::syscall(SYS_exit_group, code);
  for (;;) {
  }
}

long now_ms() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<long>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

// -- replies ------------------------------------------------------------------------

void queue_reply(wire::kind k, std::uint64_t id, pid_t pid, int a, int b) {
  if (state.ring_size == ring_capacity) return; // cannot happen: see ring_capacity
  wire::reply r;
  r.h.kind = static_cast<std::uint32_t>(k);
  r.h.id = id;
  r.pid = pid;
  r.a = a;
  r.b = b;
  __builtin_memcpy(state.ring[(state.ring_head + state.ring_size) % ring_capacity], &r, sizeof r);
  ++state.ring_size;
}

// False when the runtime's end is gone.
bool flush_replies() {
  while (state.ring_size > 0) {
    ssize_t n = ::send(control_fd, state.ring[state.ring_head], sizeof(wire::reply), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0) return false;
    state.ring_head = (state.ring_head + 1) % ring_capacity;
    --state.ring_size;
  }
  return true;
}

// -- the table of servers -------------------------------------------------------------

long find_pid(pid_t pid) {
  for (std::size_t i = 0; i < state.server_count; ++i)
    if (state.servers[i].pid == pid) return static_cast<long>(i);
  return -1;
}

long find_id(std::uint64_t id) {
  for (std::size_t i = 0; i < state.server_count; ++i)
    if (state.servers[i].id == id) return static_cast<long>(i);
  return -1;
}

void remove_slot(long i) {
  state.servers[i] = state.servers[state.server_count - 1];
  --state.server_count;
}

// -- exits --------------------------------------------------------------------------------

// Reaps every child that has exited. A server's group is SIGKILLed while its
// leader is still a zombie (the group id cannot have been reused then) and
// its exit goes to the runtime; any other child is an orphan a server left
// behind, reaped silently.
void reap_exited() {
  for (;;) {
    siginfo_t si;
    si.si_pid = 0;
    if (::waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0) return;
    pid_t pid = si.si_pid;
    long slot = find_pid(pid);
    if (slot >= 0) ::kill(-pid, SIGKILL);
    siginfo_t done;
    ::waitid(P_PID, static_cast<id_t>(pid), &done, WEXITED | WNOHANG);
    if (slot >= 0) {
      queue_reply(wire::kind::exited, state.servers[slot].id, pid, si.si_code, si.si_status);
      remove_slot(slot);
    }
  }
}

// -- the end: every descendant goes --------------------------------------------------------

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

void kill_pid_and_group(pid_t pid) {
  // The group whose id is a live child's pid can only be that child's own:
  // the kernel does not hand out a pid still in use as a group id.
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
}

struct kill_each {
  void operator()(long pid) const { kill_pid_and_group(static_cast<pid_t>(pid)); }
};

// Appends the decimal `v` at `out[len]`; returns the new length.
int append_number(char* out, int len, long v) {
  char digits[20];
  int nd = 0;
  do {
    digits[nd++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0 && nd < 20);
  while (nd > 0)
    out[len++] = digits[--nd];
  return len;
}

int append_text(char* out, int len, const char* text) {
  while (*text)
    out[len++] = *text++;
  out[len] = '\0';
  return len;
}

// Through /proc/self/task/<tid>/children (the reaper has one thread).
bool kill_children_listed() {
  if (force_proc_scan_for_tests) return false;
  char path[64];
  int len = append_text(path, 0, "/proc/self/task/");
  len = append_number(path, len, state.self);
  append_text(path, len, "/children");
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  proc_text::pid_list_reader<kill_each> reader{kill_each{}};
  for (;;) {
    ssize_t n = ::read(fd, state.proc_buf, sizeof state.proc_buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reader.feed(state.proc_buf, static_cast<std::size_t>(n));
  }
  reader.finish();
  ::close(fd);
  return true;
}

// Without the children file (a kernel without CONFIG_PROC_CHILDREN): every
// /proc/<pid>/stat, for the ones whose parent is the reaper.
void kill_children_scanned() {
  int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  alignas(8) char entries[8192];
  // linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name.
  constexpr int reclen_at = 16;
  constexpr int name_at = 19;
  for (;;) {
    long n = ::syscall(SYS_getdents64, dir, entries, sizeof entries);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      unsigned short reclen;
      __builtin_memcpy(&reclen, entries + off + reclen_at, sizeof reclen);
      const char* name = entries + off + name_at;
      off += reclen;
      if (reclen == 0) break;
      long pid = 0;
      if (!is_digit(name[0])) continue;
      for (; is_digit(*name); ++name)
        pid = pid * 10 + (*name - '0');
      if (*name != '\0' || pid <= 0) continue;
      char path[48];
      int len = append_number(path, 0, pid);
      append_text(path, len, "/stat");
      int fd = ::openat(dir, path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      ssize_t got = ::read(fd, state.proc_buf, sizeof state.proc_buf);
      ::close(fd);
      if (got > 0 && proc_text::parent_in_stat(state.proc_buf, static_cast<std::size_t>(got)) == state.self)
        kill_pid_and_group(static_cast<pid_t>(pid));
    }
  }
  ::close(dir);
}

// Kills every server group, then every child (servers, and whatever was
// re-parented to the reaper because its parent died), reaps, and repeats
// until no child is left: a descendant whose parent is killed becomes the
// reaper's child at that moment, so none escapes. Bounded in time; after
// that the reaper exits anyway and what is left goes to init.
[[noreturn]] void kill_everything_and_exit() {
  for (std::size_t i = 0; i < state.server_count; ++i)
    kill_pid_and_group(state.servers[i].pid);
  long deadline = now_ms() + shutdown_deadline_s * 1000L;
  for (;;) {
    if (!kill_children_listed()) kill_children_scanned();
    for (;;) {
      siginfo_t si;
      si.si_pid = 0;
      if (::waitid(P_ALL, 0, &si, WEXITED | WNOHANG) != 0) {
        if (errno == EINTR) continue;
        leave(0); // ECHILD: nobody left
      }
      if (si.si_pid == 0) break; // children left, none exited yet
    }
    if (now_ms() > deadline) leave(1);
    // Wait for the next exit (SIGCHLD), briefly: new orphans may appear
    // without one.
    pollfd p{state.sigfd, POLLIN, 0};
    ::poll(&p, 1, 20);
    signalfd_siginfo info[16];
    while (::read(state.sigfd, info, sizeof info) > 0) {
    }
  }
}

// -- spawning ---------------------------------------------------------------------------

void close_fds(const int* fds, int n) {
  for (int i = 0; i < n; ++i)
    ::close(fds[i]);
}

void spawn_server(std::uint64_t id, const int* fds, int nfds) {
  auto fail = [&](wire::spawn_stage stage, int err) {
    queue_reply(wire::kind::spawned, id, -1, static_cast<int>(stage), err);
  };
  if (nfds != 3 && nfds != 4) return fail(wire::spawn_stage::bad_request, 0);
  if (state.server_count == max_servers) return fail(wire::spawn_stage::too_many, 0);
  wire::spawn_view view;
  auto e = wire::decode_spawn(assembler.data(), assembler.size(), state.slots,
                              sizeof state.slots / sizeof state.slots[0], view);
  if (e != wire::decode_error::none) return fail(wire::spawn_stage::bad_request, static_cast<int>(e));
  exec_setup setup;
  setup.argv = view.argv;
  setup.envp = view.envp;
  setup.candidates = view.candidates;
  setup.cwd = view.cwd;
  setup.in_fd = fds[0];
  setup.out_fd = fds[1];
  setup.err_fd = fds[2];
  setup.extra_fd = nfds == 4 ? fds[3] : -1;
  setup.parent = state.self;
  ::sigemptyset(&setup.child_mask);
  pid_t pid;
  int spawn_errno = 0;
#if defined(__SANITIZE_THREAD__)
  // Only in the runtime's image under TSan (see child_process.cpp): fork,
  // the child reports through a shared page, exec closes the sync pipe.
  state.shared[0] = -1;
  state.shared[1] = 0;
  setup.stage = &state.shared[0];
  setup.error = &state.shared[1];
  int sync[2];
  if (::pipe2(sync, O_CLOEXEC) != 0) sync[0] = sync[1] = -1;
  pid = ::fork();
  spawn_errno = errno;
  if (pid == 0) exec_child_main(&setup);
  if (sync[1] >= 0) ::close(sync[1]);
  if (pid > 0 && sync[0] >= 0) {
    char byte;
    while (::read(sync[0], &byte, 1) < 0 && errno == EINTR) {
    }
  }
  if (sync[0] >= 0) ::close(sync[0]);
  int stage = state.shared[0];
  int error = state.shared[1];
#else
  // clone(CLONE_VM | CLONE_VFORK): the reaper resumes once the child has
  // exec'd or failed, and no page table is copied (in forked mode the
  // reaper maps as much as the runtime did).
  volatile int stage = -1, error = 0;
  setup.stage = &stage;
  setup.error = &error;
  pid = ::clone(exec_child_main, state.child_stack + sizeof state.child_stack, CLONE_VM | CLONE_VFORK | SIGCHLD,
                &setup);
  spawn_errno = errno;
#endif
  if (pid < 0) return fail(wire::spawn_stage::fork, spawn_errno);
  ::setpgid(pid, pid); // both sides set it: no race with an early killpg
  if (stage >= 0) {
    siginfo_t si;
    ::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED);
    return fail(stage == 0 ? wire::spawn_stage::chdir : wire::spawn_stage::exec, error);
  }
  state.servers[state.server_count++] = {id, pid};
  queue_reply(wire::kind::spawned, id, pid, static_cast<int>(wire::spawn_stage::ok), 0);
}

// -- requests ---------------------------------------------------------------------------

void handle_message(long n, const int* fds, int nfds) {
  wire::header h;
  if (n < static_cast<long>(sizeof h)) return close_fds(fds, nfds);
  __builtin_memcpy(&h, state.message, sizeof h);
  switch (static_cast<wire::kind>(h.kind)) {
    case wire::kind::spawn: {
      wire::spawn_part part;
      if (n < static_cast<long>(sizeof part)) return close_fds(fds, nfds);
      __builtin_memcpy(&part, state.message, sizeof part);
      auto step = assembler.add(part, state.message + sizeof part, static_cast<std::size_t>(n) - sizeof part);
      if (step == wire::request_assembler::step::complete) spawn_server(h.id, fds, nfds);
      else if (step == wire::request_assembler::step::broken)
        queue_reply(wire::kind::spawned, h.id, -1, static_cast<int>(wire::spawn_stage::bad_request), 0);
      // The reaper's copies: the server has its own on 0/1/2 by now.
      return close_fds(fds, nfds);
    }
    case wire::kind::signal: {
      close_fds(fds, nfds);
      wire::signal_request req;
      if (n < static_cast<long>(sizeof req)) return;
      __builtin_memcpy(&req, state.message, sizeof req);
      long slot = find_id(h.id);
      // Only a server not yet reaped: its pid (and group id) are still its own.
      if (slot < 0 || req.signo <= 0 || req.signo >= NSIG) return;
      pid_t pid = state.servers[slot].pid;
      ::kill(-pid, req.signo);
      // A leader that moved to another group is signalled itself (once: a
      // second SIGTERM means "force" to some servers).
      if (::getpgid(pid) != pid) ::kill(pid, req.signo);
      return;
    }
    case wire::kind::shutdown: close_fds(fds, nfds); kill_everything_and_exit();
    default: return close_fds(fds, nfds);
  }
}

// Reads what the runtime sent, a bounded number of messages per wake-up.
// False when the runtime's end is closed.
bool read_requests() {
  for (int round = 0; round < 64; ++round) {
    if (state.ring_size + 2 > ring_capacity) return true; // replies first
    iovec iov{state.message, sizeof state.message};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_fds_per_message)];
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(control_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false; // EOF (the runtime exited) or a broken socket
    int fds[max_fds_per_message];
    int nfds = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      int count = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < count && nfds < max_fds_per_message; ++i)
        __builtin_memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
    if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
      close_fds(fds, nfds); // never sent by the runtime: not trusted
      continue;
    }
    handle_message(n, fds, nfds);
  }
  return true;
}

// -- start ------------------------------------------------------------------------------------

void close_other_fds() {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, control_fd + 1, ~0U, 0) == 0) return;
#endif
  int limit = static_cast<int>(::sysconf(_SC_OPEN_MAX));
  if (limit < 0 || limit > 65536) limit = 65536;
  for (int fd = control_fd + 1; fd < limit; ++fd)
    ::close(fd);
}

void set_up_signals() {
  // In forked mode the runtime's handlers are still installed: none of its
  // code may run here.
  struct sigaction dfl;
  __builtin_memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction cur;
    if (sig != SIGKILL && sig != SIGSTOP && ::sigaction(sig, nullptr, &cur) == 0 && cur.sa_handler != SIG_DFL
        && cur.sa_handler != SIG_IGN)
      ::sigaction(sig, &dfl, nullptr);
  }
  struct sigaction ign;
  __builtin_memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  // Ctrl-C, a hangup, job control: they hit the whole foreground group.
  // The reaper lives exactly as long as the runtime, whatever the terminal.
  const int ignored[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1};
  for (int sig : ignored)
    ::sigaction(sig, &ign, nullptr);
  sigset_t taken;
  ::sigemptyset(&taken);
  ::sigaddset(&taken, SIGCHLD);
  ::sigaddset(&taken, parent_gone_signal);
  ::sigprocmask(SIG_SETMASK, &taken, nullptr);
  state.sigfd = ::signalfd(-1, &taken, SFD_CLOEXEC | SFD_NONBLOCK);
}

// False once the runtime (or its spawning thread) is gone.
bool drain_signals() {
  bool parent_alive = true;
  signalfd_siginfo info[16];
  for (;;) {
    ssize_t n = ::read(state.sigfd, info, sizeof info);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (long i = 0; i < n / static_cast<long>(sizeof info[0]); ++i)
      if (static_cast<int>(info[i].ssi_signo) == parent_gone_signal) parent_alive = false;
  }
  return parent_alive;
}

} // namespace

[[noreturn]] void run_reaper(int control, int mode) {
  state.mode = mode;
  state.self = ::getpid();
  if (control != control_fd) {
    ::dup3(control, control_fd, O_CLOEXEC);
    ::close(control);
  } else {
    ::fcntl(control_fd, F_SETFD, FD_CLOEXEC);
  }
  // The runtime's stdio is not the reaper's to hold open (a reader of the
  // daemon's output would wait for the reaper's end too).
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd <= 2; ++fd)
    if (devnull >= 0) ::dup2(devnull, fd);
  close_other_fds();
  // Every request names its cwd: the reaper holds no directory (and no
  // mount) of the runtime's.
  if (::chdir("/") != 0) {
  }
  ::prctl(PR_SET_NAME, "mcprt-reaper", 0, 0, 0);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  set_up_signals();
#if defined(__SANITIZE_THREAD__)
  state.shared = static_cast<volatile int*>(
    ::mmap(nullptr, 2 * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
#endif
  if (state.sigfd < 0) kill_everything_and_exit();
  queue_reply(wire::kind::hello, 0, state.self, mode, static_cast<int>(wire::version));
  for (;;) {
    pollfd p[2];
    p[0].fd = control_fd;
    p[0].events = static_cast<short>((state.ring_size + 2 <= ring_capacity ? POLLIN : 0)
                                     | (state.ring_size > 0 ? POLLOUT : 0));
    p[0].revents = 0;
    p[1].fd = state.sigfd;
    p[1].events = POLLIN;
    p[1].revents = 0;
    if (::poll(p, 2, -1) < 0 && errno != EINTR) kill_everything_and_exit();
    if (!drain_signals()) kill_everything_and_exit();
    reap_exited();
    if (!read_requests()) kill_everything_and_exit();
    reap_exited();
    if (!flush_replies()) kill_everything_and_exit();
    if ((p[0].revents & (POLLHUP | POLLERR)) && !(p[0].revents & POLLIN)) kill_everything_and_exit();
  }
}

} // namespace mcprt::io::detail
