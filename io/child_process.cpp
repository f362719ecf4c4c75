#include "io/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

// Everything the child needs is prepared before fork: after fork in a
// multi-threaded process only async-signal-safe calls are allowed.
struct exec_plan {
  std::vector<std::string> storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string path_value;
};

exec_plan make_plan(const spawn_options& o) {
  exec_plan p;
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (auto& [k, v] : o.env)
    env[k] = v;
  p.path_value = env.count("PATH") ? env["PATH"] : "/usr/local/bin:/usr/bin:/bin";
  p.storage.reserve(1 + o.args.size() + env.size());
  p.storage.push_back(o.command);
  for (auto& a : o.args)
    p.storage.push_back(a);
  std::size_t env_start = p.storage.size();
  for (auto& [k, v] : env)
    p.storage.push_back(k + "=" + v);
  for (std::size_t i = 0; i < env_start; ++i)
    p.argv.push_back(p.storage[i].data());
  p.argv.push_back(nullptr);
  for (std::size_t i = env_start; i < p.storage.size(); ++i)
    p.envp.push_back(p.storage[i].data());
  p.envp.push_back(nullptr);
  return p;
}

// Candidates for execve, in PATH order (a command with a slash is used as is).
std::vector<std::string> resolve(const std::string& command, const std::string& path) {
  if (command.find('/') != std::string::npos) return {command};
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= path.size()) {
    auto end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    out.push_back((dir.empty() ? "." : dir) + "/" + command);
    start = end + 1;
  }
  return out;
}

} // namespace

std::string exit_status::describe() const {
  if (exited) return "exit code " + std::to_string(code);
  return "killed by " + signal_name(signal);
}

child_process child_process::spawn(const spawn_options& o) {
  if (o.command.empty()) throw spawn_error("cannot start server: no command given");
  auto plan = make_plan(o);
  auto candidates = resolve(o.command, plan.path_value);
  int in[2], out[2], err[2], report[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0
      || ::pipe2(report, O_CLOEXEC) != 0)
    throw spawn_error("cannot start '" + o.command + "': pipe: " + std::strerror(errno));
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1], report[0], report[1]})
      ::close(fd);
    throw spawn_error("cannot start '" + o.command + "': fork: " + std::strerror(e));
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127); // parent died before prctl took effect
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    int stage = 0; // 0: chdir, 1: exec
    if (o.cwd && ::chdir(o.cwd->c_str()) != 0) {
      int e = errno;
      (void) !::write(report[1], &stage, sizeof stage);
      (void) !::write(report[1], &e, sizeof e);
      ::_exit(127);
    }
    stage = 1;
    int last = ENOENT;
    for (auto& c : candidates) {
      ::execve(c.c_str(), plan.argv.data(), plan.envp.data());
      // Keep the most telling error: "permission denied" beats "not found".
      if (errno != ENOENT || last == ENOENT) last = errno;
    }
    (void) !::write(report[1], &stage, sizeof stage);
    (void) !::write(report[1], &last, sizeof last);
    ::_exit(127);
  }
  // Parent.
  ::setpgid(pid, pid); // both sides set it: no race with an early killpg
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  ::close(report[1]);
  int stage = -1, code = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &stage, sizeof stage);
  } while (n < 0 && errno == EINTR);
  if (n == sizeof stage) {
    while (::read(report[0], &code, sizeof code) < 0 && errno == EINTR) {
    }
  }
  ::close(report[0]);
  child_process c;
  c.pid_ = pid;
  c.in_ = in[1];
  c.out_ = out[0];
  c.err_ = err[0];
  if (n == sizeof stage) {
    c.wait_for(std::chrono::milliseconds(1000));
    std::string what = stage == 0 ? "cannot change to directory '" + *o.cwd + "'" : "cannot run '" + o.command + "'";
    throw spawn_error(what + ": " + std::strerror(code));
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

exit_status child_process::shutdown(std::chrono::milliseconds stdin_grace,
                                    std::chrono::milliseconds term_grace) {
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
