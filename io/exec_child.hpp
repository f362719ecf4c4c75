#pragma once

// The code a server's process runs between its creation and execve: the
// same for child_process::spawn (a direct child of the caller) and for the
// reaper process (io/reaper), which makes every server of the runtime.
//
// It runs in a child that shares its parent's memory (clone(CLONE_VM)) or
// was forked from a multi-threaded process, so: system calls only, no
// allocation, no locks, nothing a sanitizer instruments.

#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace mcprt::io::detail {

/// What the child needs, prepared by the parent.
struct exec_setup {
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  char* const* candidates = nullptr; // execve paths in order, null-terminated
  const char* cwd = nullptr;         // may be null
  int in_fd = -1, out_fd = -1, err_fd = -1;
  int extra_fd = -1;   // becomes fd 3 when set (received fds are >= 4)
  pid_t parent = -1;   // the parent's pid: PR_SET_PDEATHSIG is tied to it
  sigset_t child_mask; // the signal mask the server starts with (empty)
  // Where the child reports a failure: in the parent's memory (clone) or in
  // a shared mapping (fork).
  volatile int* stage = nullptr; // -1: exec'd; 0: chdir failed; 1: exec failed
  volatile int* error = nullptr;
};

/// The child's side, as a clone() entry point. Dispositions back to
/// default, the given mask, its own process group, SIGKILL when the parent
/// dies, the pipes on 0/1/2, then the first candidate that execs.
__attribute__((no_sanitize("address", "thread", "undefined"))) inline int exec_child_main(void* arg) {
  auto* s = static_cast<exec_setup*>(arg);
  // The child has its own copy of the signal dispositions (no CLONE_SIGHAND):
  // nothing its parent handles or ignores may leak into the server.
  struct sigaction dfl;
  for (unsigned i = 0; i < sizeof dfl; ++i)
    reinterpret_cast<volatile char*>(&dfl)[i] = 0;
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction cur;
    if (sig != SIGKILL && sig != SIGSTOP && ::sigaction(sig, nullptr, &cur) == 0 && cur.sa_handler != SIG_DFL)
      ::sigaction(sig, &dfl, nullptr);
  }
  // Not the parent's mask: a daemon blocks SIGTERM in every thread to take
  // it with sigwait, and its servers must still stop on SIGTERM.
  ::sigprocmask(SIG_SETMASK, &s->child_mask, nullptr);
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != s->parent) ::_exit(127); // parent died before prctl took effect
  ::dup2(s->in_fd, 0);
  ::dup2(s->out_fd, 1);
  ::dup2(s->err_fd, 2);
  if (s->extra_fd >= 0) ::dup2(s->extra_fd, 3);
  if (s->cwd && ::chdir(s->cwd) != 0) {
    *s->error = errno;
    *s->stage = 0;
    ::_exit(127);
  }
  int last = ENOENT;
  for (auto c = s->candidates; *c; ++c) {
    ::execve(*c, s->argv, s->envp);
    // Keep the most telling error: "permission denied" beats "not found".
    if (errno != ENOENT || last == ENOENT) last = errno;
  }
  *s->error = last;
  *s->stage = 1;
  ::_exit(127);
}

} // namespace mcprt::io::detail
