// mcprt-stack-floor: the idle footprint's floor. It is linked against the
// shared libraries `mcprt` needs (CMake keeps every one, used or not), so
// the loader maps them and runs their constructors as it does for the
// daemon; then it starts a CAF actor system with one scheduler worker per
// core, as `mcprt serve` does, and waits. None of mcprt's own code runs.
// `mcprt-bench idle_footprint` reads its resident memory beside the
// daemon's: what the daemon costs above it is what mcprt can change.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include <caf/all.hpp>

int main() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", std::max(1u, std::thread::hardware_concurrency()));
  caf::actor_system sys{cfg};
  // One actor and one request through it, so the scheduler and the
  // mailboxes have done what an idle daemon's have.
  auto echo = sys.spawn([](int) -> caf::behavior { return {[](int x) { return x; }}; }, 0);
  caf::scoped_actor self{sys};
  self->request(echo, caf::infinite, 1).receive([](int) {}, [](caf::error&) {});
  std::printf("ready %d\n", static_cast<int>(::getpid()));
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  return 0;
}
