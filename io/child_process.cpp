#include "io/child_process.hpp"

#include "io/exec_child.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

extern char** environ;

namespace mcprt::io {

namespace {

std::string signal_name(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGINT: return "SIGINT";
    case SIGPIPE: return "SIGPIPE";
    default: return "signal " + std::to_string(sig);
  }
}

exit_status decode(int wstatus) {
  exit_status s;
  if (WIFEXITED(wstatus)) {
    s.exited = true;
    s.code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    s.signal = WTERMSIG(wstatus);
  }
  return s;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Pointers into `strings` for execve, prepared before the child exists:
// after fork in a multi-threaded process no allocation is allowed.
struct exec_pointers {
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::vector<char*> candidates;
};

exec_pointers pointers_into(exec_strings& strings) {
  exec_pointers p;
  for (auto* list : {&strings.argv, &strings.envp, &strings.candidates}) {
    auto& out = list == &strings.argv ? p.argv : list == &strings.envp ? p.envp : p.candidates;
    for (auto& s : *list)
      out.push_back(s.data());
    out.push_back(nullptr);
  }
  return p;
}

} // namespace

exec_strings exec_strings_for(const spawn_options& o) {
  exec_strings x;
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  env = server_environment(env, o.env, o.inherit_all_env, o.inherit_env);
  std::string path = env.count("PATH") ? env["PATH"] : "/usr/local/bin:/usr/bin:/bin";
  x.argv.reserve(1 + o.args.size());
  x.argv.push_back(o.command);
  for (auto& a : o.args)
    x.argv.push_back(a);
  x.envp.reserve(env.size());
  for (auto& [k, v] : env)
    x.envp.push_back(k + "=" + v);
  // A command with a slash is used as is; otherwise every PATH entry.
  if (o.command.find('/') != std::string::npos) {
    x.candidates.push_back(o.command);
    return x;
  }
  std::size_t start = 0;
  while (start <= path.size()) {
    auto end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    x.candidates.push_back((dir.empty() ? "." : dir) + "/" + o.command);
    start = end + 1;
  }
  return x;
}

std::string resolve_command(const spawn_options& o) {
  auto x = exec_strings_for(o);
  int last = ENOENT;
  for (auto& c : x.candidates) {
    std::string path = c;
    if (path.empty() || path[0] != '/') path = o.cwd.value_or(".") + "/" + path;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno != ENOENT || last == ENOENT) last = errno == ENOTDIR ? ENOENT : errno;
      continue;
    }
    if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) {
      last = EACCES;
      continue;
    }
    return path;
  }
  throw spawn_error("cannot run '" + o.command + "': " + std::strerror(last));
}

std::string exit_status::describe() const {
  if (exited) return "exit code " + std::to_string(code);
  return "killed by " + signal_name(signal);
}

child_process child_process::spawn(const spawn_options& o) {
  if (o.command.empty()) throw spawn_error("cannot start server: no command given");
  auto strings = exec_strings_for(o);
  auto plan = pointers_into(strings);
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    throw spawn_error("cannot start '" + o.command + "': pipe: " + std::strerror(errno));
  detail::exec_setup setup;
  setup.argv = plan.argv.data();
  setup.envp = plan.envp.data();
  setup.candidates = plan.candidates.data();
  setup.cwd = o.cwd ? o.cwd->c_str() : nullptr;
  setup.in_fd = in[0];
  setup.out_fd = out[1];
  setup.err_fd = err[1];
  setup.parent = ::getpid();
  // Signals stay blocked until the child has set up its own dispositions,
  // so no runtime handler runs in it.
  sigset_t all;
  ::sigfillset(&all);
  ::sigemptyset(&setup.child_mask);
  sigset_t old_mask;
  ::pthread_sigmask(SIG_BLOCK, &all, &old_mask);
  pid_t pid;
  int clone_errno = 0;
  volatile int stage = -1, error = 0;
#if defined(__SANITIZE_THREAD__)
  // TSan's runtime takes clone(CLONE_VM) for a fork and corrupts its own
  // state, so TSan builds use fork: the child reports through a shared
  // page, and the parent waits for exec by the close-on-exec pipe.
  auto* shared =
    static_cast<int*>(::mmap(nullptr, 2 * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  shared[0] = -1;
  shared[1] = 0;
  setup.stage = &shared[0];
  setup.error = &shared[1];
  int sync[2];
  if (::pipe2(sync, O_CLOEXEC) != 0) sync[0] = sync[1] = -1;
  pid = ::fork();
  clone_errno = errno;
  if (pid == 0) {
    if (sync[0] >= 0) ::close(sync[0]);
    detail::exec_child_main(&setup);
  }
  if (sync[1] >= 0) ::close(sync[1]);
  if (pid > 0 && sync[0] >= 0) {
    char byte;
    while (::read(sync[0], &byte, 1) < 0 && errno == EINTR) {
    }
  }
  if (sync[0] >= 0) ::close(sync[0]);
  stage = shared[0];
  error = shared[1];
  ::munmap(shared, 2 * sizeof(int));
#else
  // clone(CLONE_VM | CLONE_VFORK), as posix_spawn does, instead of fork:
  // fork copies the page tables of the whole runtime for every server,
  // which made spawning the largest CPU cost of a connection. The parent
  // thread resumes once the child has exec'd or failed.
  setup.stage = &stage;
  setup.error = &error;
  constexpr std::size_t stack_size = 64 * 1024;
  std::unique_ptr<char[]> stack(new char[stack_size]);
  pid = ::clone(detail::exec_child_main, stack.get() + stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, &setup);
  clone_errno = errno;
#endif
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    for (int fd : {in[1], out[0], err[0]})
      ::close(fd);
    throw spawn_error("cannot start '" + o.command + "': clone: " + std::strerror(clone_errno));
  }
  ::setpgid(pid, pid); // both sides set it: no race with an early killpg
  child_process c;
  c.pid_ = pid;
  c.in_ = in[1];
  c.out_ = out[0];
  c.err_ = err[0];
  if (stage >= 0) {
    c.wait_for(std::chrono::milliseconds(1000));
    std::string what =
      stage == 0 ? "cannot change to directory '" + *o.cwd + "'" : "cannot run '" + o.command + "'";
    throw spawn_error(what + ": " + std::strerror(error));
  }
  return c;
}

child_process::child_process(child_process&& other) noexcept
    : pid_(other.pid_), in_(other.in_), out_(other.out_), err_(other.err_), status_(other.status_) {
  other.pid_ = -1;
  other.in_ = other.out_ = other.err_ = -1;
}

child_process& child_process::operator=(child_process&& other) noexcept {
  if (this != &other) {
    this->~child_process();
    new (this) child_process(std::move(other));
  }
  return *this;
}

child_process::~child_process() {
  if (pid_ > 0 && !status_) {
    ::killpg(pid_, SIGKILL);
    wait_for(std::chrono::milliseconds(5000));
  }
  close_fds();
}

void child_process::close_fds() {
  close_fd(in_);
  close_fd(out_);
  close_fd(err_);
}

void child_process::close_stdin() {
  close_fd(in_);
}

std::optional<exit_status> child_process::try_wait() {
  if (status_ || pid_ <= 0) return status_;
  int ws = 0;
  pid_t r = ::waitpid(pid_, &ws, WNOHANG);
  if (r == pid_) status_ = decode(ws);
  return status_;
}

std::optional<exit_status> child_process::wait_for(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  // waitpid has no timeout; poll with a short, growing pause. Only shutdown
  // paths block here, never a hot path.
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    if (try_wait()) return status_;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
}

exit_status child_process::shutdown(std::chrono::milliseconds stdin_grace, std::chrono::milliseconds term_grace) {
  if (pid_ <= 0) return {};
  close_stdin();
  if (!wait_for(stdin_grace)) {
    ::killpg(pid_, SIGTERM);
    if (!wait_for(term_grace)) {
      ::killpg(pid_, SIGKILL);
      wait_for(std::chrono::milliseconds(10000));
    }
  }
  // The leader is gone; whatever it left in its group goes too.
  ::killpg(pid_, SIGKILL);
  close_fds();
  return status_.value_or(exit_status{});
}

} // namespace mcprt::io
