#include "io/reaper.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "core/reaper_protocol.hpp"
#include "io/reaper_process.hpp"

#ifdef MCPRT_HAVE_REAPER_IMAGE
// io/reaper_image.cpp: the static image built from io/reaper_image/main.cpp.
extern "C" const char mcprt_reaper_image_begin[];
extern "C" const char mcprt_reaper_image_end[];
#endif

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

namespace mcprt::io {

namespace {

namespace wire = mcprt::reaper_protocol;
using clock = std::chrono::steady_clock;

constexpr auto hello_timeout = std::chrono::seconds(10);

// The image as a sealed, executable memfd, made once per process (-1 when
// there is no image or the system does not allow one).
int image_fd() {
  static std::once_flag once;
  static int fd = -1;
  std::call_once(once, [] {
#ifdef MCPRT_HAVE_REAPER_IMAGE
    unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
    // Kernels >= 6.3 want executability said out loud; older ones refuse the flag.
    int f = ::memfd_create("mcprt-reaper", flags | MFD_EXEC);
    if (f < 0 && errno == EINVAL) f = ::memfd_create("mcprt-reaper", flags);
    if (f < 0) return;
    const char* p = mcprt_reaper_image_begin;
    std::size_t left = static_cast<std::size_t>(mcprt_reaper_image_end - mcprt_reaper_image_begin);
    while (left > 0) {
      ssize_t n = ::write(f, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(f);
        return;
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    // Nobody changes the image after this (not even this process).
    ::fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    fd = f;
#endif
  });
  return fd;
}

// What the child that becomes the reaper needs before exec.
struct start_setup {
  int socket = -1;
  int image = -1;
  int report = -1; // write end of a close-on-exec pipe: errno if exec fails
  pid_t parent = -1;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
};

// Runs in a child sharing the runtime's memory (or forked from it): system
// calls only. The reaper's parent-death signal ties it to the calling
// thread; the socket goes on fd 3, open across exec.
__attribute__((no_sanitize("address", "thread", "undefined"))) int exec_reaper_main(void* arg) {
  auto* s = static_cast<start_setup*>(arg);
  ::prctl(PR_SET_PDEATHSIG, wire::parent_gone_signal);
  if (::getppid() != s->parent) ::_exit(127);
  if (s->socket == 3) ::fcntl(3, F_SETFD, 0);
  else ::dup2(s->socket, 3);
  ::syscall(SYS_execveat, s->image, "", s->argv, s->envp, AT_EMPTY_PATH);
  int e = errno;
  while (::write(s->report, &e, sizeof e) < 0 && errno == EINTR) {
  }
  ::_exit(127);
}

// Starts the image; the pid, or -1 with errno set (exec refused included).
pid_t start_image(int socket, int image) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return -1;
  char name[] = "mcprt-reaper";
  char* argv[] = {name, nullptr};
  char* envp[] = {nullptr};
  start_setup s;
  s.socket = socket;
  s.image = image;
  s.report = report[1];
  s.parent = ::getpid();
  s.argv = argv;
  s.envp = envp;
#if defined(__SANITIZE_THREAD__)
  // See child_process.cpp: no clone(CLONE_VM) under TSan.
  pid_t pid = ::fork();
  if (pid == 0) exec_reaper_main(&s);
#else
  constexpr std::size_t stack_size = 32 * 1024;
  std::unique_ptr<char[]> stack(new char[stack_size]);
  pid_t pid = ::clone(exec_reaper_main, stack.get() + stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, &s);
#endif
  int clone_errno = errno;
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    errno = clone_errno;
    return -1;
  }
  int exec_errno = 0;
  ssize_t n;
  while ((n = ::read(report[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    errno = exec_errno;
    return -1;
  }
  return pid;
}

pid_t start_forked(int socket) {
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, wire::parent_gone_signal);
    if (::getppid() != parent) ::_exit(127);
    detail::run_reaper(socket, static_cast<int>(wire::reaper_mode::forked));
  }
  return pid;
}

exit_status status_of(const wire::reply& r) {
  exit_status s;
  if (r.a == CLD_EXITED) {
    s.exited = true;
    s.code = r.b;
  } else {
    s.signal = r.b;
  }
  return s;
}

int ms_left(clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
  return static_cast<int>(std::max<long long>(0, std::min<long long>(left, 60 * 60 * 1000)));
}

} // namespace

reaper::reaper(reaper_start how) : how_(how) {}

reaper::~reaper() {
  shutdown();
}

void reaper::start() {
  if (fd_ >= 0) return;
  reap_leftovers(std::chrono::milliseconds(0));
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    throw spawn_error(std::string("cannot start the reaper process: socketpair: ") + std::strerror(errno));
  // No handler of the runtime may run in the child before it execs (or,
  // forked, before it has its own dispositions): block everything across.
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  pid_t pid = -1;
  int image = how_ == reaper_start::exec_image ? image_fd() : -1;
  if (image >= 0) {
    pid = start_image(sv[1], image);
    mode_ = reaper_start::exec_image;
  }
  if (pid < 0) {
    pid = start_forked(sv[1]);
    mode_ = reaper_start::fork;
  }
  int start_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::close(sv[1]);
  if (pid < 0) {
    ::close(sv[0]);
    throw spawn_error(std::string("cannot start the reaper process: ") + std::strerror(start_errno));
  }
  fd_ = sv[0];
  pid_ = pid;
  broken_ = false;
  // The hello says it runs, set up, before anything is asked of it.
  auto deadline = clock::now() + hello_timeout;
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    wire::reply hello;
    ssize_t n = r > 0 ? ::recv(fd_, &hello, sizeof hello, MSG_DONTWAIT) : -1;
    if (n == static_cast<ssize_t>(sizeof hello) && hello.h.kind == static_cast<std::uint32_t>(wire::kind::hello)
        && hello.b == static_cast<int>(wire::version))
      return;
    if (n < 0 && errno == EINTR) continue;
    ::kill(pid_, SIGKILL);
    lost();
    throw spawn_error("cannot start the reaper process: it did not say hello");
  }
}

std::string reaper::probe_sandbox() {
  int image = image_fd();
  if (image < 0) return "";
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return "";
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  // The image is open here close-on-exec: its /proc path is valid until exec.
  std::string path = "/proc/self/fd/" + std::to_string(image);
  char name[] = "mcprt-sandbox";
  char mode[] = "sandbox-probe";
  char* argv[] = {name, mode, nullptr};
  char* envp[] = {nullptr};
  pid_t pid = -1;
  int r = ::posix_spawn(&pid, path.c_str(), &actions, nullptr, argv, envp);
  ::posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  std::string line;
  if (r == 0) {
    auto deadline = clock::now() + std::chrono::seconds(5);
    char buf[256];
    while (line.size() < 1024) {
      pollfd p{out[0], POLLIN, 0};
      int n = ::poll(&p, 1, ms_left(deadline));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      ssize_t got = ::read(out[0], buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      line.append(buf, static_cast<std::size_t>(got));
    }
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  ::close(out[0]);
  if (auto nl = line.find('\n'); nl != std::string::npos) line.resize(nl);
  return line;
}

pid_t reaper::spawn(std::uint64_t id, const spawn_options& opts, int in_fd, int out_fd, int err_fd,
                    std::chrono::milliseconds timeout, int extra_fd) {
  auto failed = [&](const std::string& why) { return spawn_error("cannot start '" + opts.command + "': " + why); };
  start();
  auto strings = exec_strings_for(opts);
  // Without a cwd of its own a server starts where the runtime is now, as
  // when the runtime spawned it itself (the reaper sits in "/").
  auto cwd = opts.cwd;
  if (!cwd) {
    char here[PATH_MAX];
    if (::getcwd(here, sizeof here)) cwd = std::string(here);
  }
  auto request = wire::encode_spawn(cwd, strings.candidates, strings.argv, strings.envp);
  if (!request.error.empty()) throw failed(request.error);
  auto parts = wire::split_spawn(id, request.payload);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    outgoing o;
    o.bytes = std::move(parts[i]);
    if (i + 1 == parts.size()) {
      for (int fd : {in_fd, out_fd, err_fd, extra_fd}) {
        if (fd < 0 && fd == extra_fd) continue;
        int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (copy < 0) {
          for (int c : o.fds)
            ::close(c);
          throw failed(std::string("dup: ") + std::strerror(errno));
        }
        o.fds.push_back(copy);
      }
    }
    outbox_.push_back(std::move(o));
  }
  awaited_ = id;
  answered_ = false;
  auto deadline = clock::now() + timeout;
  while (!answered_) {
    if (!flush() || broken_) {
      lost();
      throw failed("the reaper process died");
    }
    pollfd p{fd_, static_cast<short>(POLLIN | (outbox_.empty() ? 0 : POLLOUT)), 0};
    int r = ::poll(&p, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      // Wedged (stopped, say): it cannot be trusted with the servers any
      // more. They die with it (parent-death signal); a new one comes next.
      ::kill(pid_, SIGKILL);
      lost();
      throw failed("the reaper process did not answer within " + std::to_string(timeout.count())
                   + " ms; it was killed");
    }
    while (!answered_ && read_one(early_exits_)) {
    }
    if (broken_) {
      lost();
      throw failed("the reaper process died");
    }
  }
  awaited_ = 0;
  auto stage = static_cast<wire::spawn_stage>(answer_stage_);
  switch (stage) {
    case wire::spawn_stage::ok: return answer_pid_;
    case wire::spawn_stage::chdir:
      throw spawn_error("cannot change to directory '" + cwd.value_or("") + "': " + std::strerror(answer_errno_));
    case wire::spawn_stage::exec:
      throw spawn_error("cannot run '" + opts.command + "': " + std::strerror(answer_errno_));
    case wire::spawn_stage::fork: throw failed(std::string("clone: ") + std::strerror(answer_errno_));
    case wire::spawn_stage::too_many: throw failed("too many servers for one runtime");
    case wire::spawn_stage::bad_request: break;
  }
  throw failed("the reaper refused the request (" + wire::describe(static_cast<wire::decode_error>(answer_errno_))
               + ")");
}

void reaper::signal(std::uint64_t id, int sig) {
  if (fd_ < 0) return;
  wire::signal_request req;
  req.h.kind = static_cast<std::uint32_t>(wire::kind::signal);
  req.h.id = id;
  req.signo = sig;
  outbox_.push_back({std::string(reinterpret_cast<const char*>(&req), sizeof req), {}});
  flush(); // a broken socket shows in the next pump()
}

bool reaper::flush() {
  while (!outbox_.empty()) {
    auto& o = outbox_.front();
    iovec iov{o.bytes.data(), o.bytes.size()};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 3)];
    if (!o.fds.empty()) {
      mh.msg_control = control;
      mh.msg_controllen = CMSG_SPACE(sizeof(int) * o.fds.size());
      auto* c = CMSG_FIRSTHDR(&mh);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * o.fds.size());
      std::memcpy(CMSG_DATA(c), o.fds.data(), sizeof(int) * o.fds.size());
    }
    ssize_t n = ::sendmsg(fd_, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0) {
      broken_ = true;
      return false;
    }
    for (int fd : o.fds)
      ::close(fd);
    outbox_.pop_front();
  }
  return true;
}

bool reaper::read_one(std::vector<reaper_exit>& exits) {
  wire::reply r;
  ssize_t n = ::recv(fd_, &r, sizeof r, MSG_DONTWAIT);
  if (n < 0 && errno == EINTR) return true;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  if (n <= 0) {
    broken_ = true; // EOF: the reaper exited (or was killed)
    return false;
  }
  if (n != static_cast<ssize_t>(sizeof r)) return true;
  switch (static_cast<wire::kind>(r.h.kind)) {
    case wire::kind::exited: exits.push_back({r.h.id, r.pid, status_of(r)}); break;
    case wire::kind::spawned:
      if (r.h.id == awaited_) {
        answered_ = true;
        answer_pid_ = r.pid;
        answer_stage_ = r.a;
        answer_errno_ = r.b;
      }
      break;
    default: break;
  }
  return true;
}

bool reaper::pump(std::vector<reaper_exit>& exits) {
  if (!early_exits_.empty()) {
    exits.insert(exits.end(), early_exits_.begin(), early_exits_.end());
    early_exits_.clear();
  }
  if (fd_ < 0) return true;
  if (flush()) {
    while (read_one(exits)) {
    }
  }
  if (!broken_) return true;
  lost();
  return false;
}

void reaper::lost() {
  for (auto& o : outbox_)
    for (int fd : o.fds)
      ::close(fd);
  outbox_.clear();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  broken_ = false;
  if (pid_ > 0) {
    // Its socket is closed, so it is on its way out (or was killed): a
    // short wait on this (the I/O) thread, then it is made sure of and
    // collected later.
    if (!wait_for_exit(std::chrono::milliseconds(200))) {
      ::kill(pid_, SIGKILL);
      unreaped_.push_back(pid_);
    }
  }
  pid_ = -1;
}

void reaper::reap_leftovers(std::chrono::milliseconds timeout) {
  auto deadline = clock::now() + timeout;
  for (auto it = unreaped_.begin(); it != unreaped_.end();) {
    bool done = false;
    for (;;) {
      pid_t r = ::waitpid(*it, nullptr, WNOHANG);
      if (r == *it || (r < 0 && errno != EINTR)) {
        done = true; // reaped, or not ours to reap (ECHILD)
        break;
      }
      if (clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    it = done ? unreaped_.erase(it) : it + 1;
  }
}

bool reaper::wait_for_exit(std::chrono::milliseconds timeout) {
  auto deadline = clock::now() + timeout;
  auto pause = std::chrono::microseconds(100);
  for (;;) {
    pid_t r = ::waitpid(pid_, nullptr, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) return true; // reaped, or not ours to reap (ECHILD)
    if (clock::now() >= deadline) return false;
    // Only after the reaper closed its socket (it is exiting) or was
    // killed: short.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
}

void reaper::shutdown(std::chrono::milliseconds timeout) {
  if (fd_ < 0) {
    reap_leftovers(std::chrono::milliseconds(2000));
    return;
  }
  auto deadline = clock::now() + timeout;
  wire::header h;
  h.kind = static_cast<std::uint32_t>(wire::kind::shutdown);
  outbox_.push_back({std::string(reinterpret_cast<const char*>(&h), sizeof h), {}});
  // Send it, then read (and drop) until the reaper closes its end: it has
  // killed and reaped every descendant by then.
  std::vector<reaper_exit> ignored;
  while (fd_ >= 0 && clock::now() < deadline) {
    if (!flush()) break;
    pollfd p{fd_, static_cast<short>(POLLIN | (outbox_.empty() ? 0 : POLLOUT)), 0};
    int r = ::poll(&p, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    while (read_one(ignored)) {
      ignored.clear();
    }
    if (broken_) break;
  }
  if (!broken_ && fd_ >= 0) ::kill(pid_, SIGKILL); // out of time: its servers die with it
  lost();
  reap_leftovers(std::chrono::milliseconds(2000));
}

} // namespace mcprt::io
