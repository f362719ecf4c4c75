// A data race planted on purpose, to show that the TSan build sees inside
// actor handlers: two actors on mcprt's scheduler write one unguarded int at
// the same time. Built only in TSan builds; its ctest passes only when TSan
// reports the race with the handler on the stack (tests/tsan/CMakeLists.txt).
// Against Debian's uninstrumented CAF, with the old suppressions (every stack
// through CAF), this race went unreported.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include <caf/all.hpp>

#include "mcprt/scheduler.hpp"

// Outside the anonymous namespace and read in main: a store the compiler
// cannot prove dead stays in, instrumented.
int unguarded_value = 0;

namespace {

using write_atom = caf::atom_constant<caf::atom("write")>;

/// Counts handlers that have started; relaxed on purpose, so that the
/// rendezvous orders nothing in TSan's eyes and the two writes stay racy.
std::atomic<int> writers_arrived{0};

// Not inlined, so that the report's top frame has this name.
__attribute__((noinline)) void planted_race_write(int value) {
  unguarded_value = value;
}

caf::behavior racing_writer(caf::event_based_actor*) {
  return {
    [](write_atom, int value) {
      // Meet the other writer first, so that the two handlers overlap on two
      // workers instead of running one after the other on one (which would
      // order them). The writes come right after the meeting, not before
      // it: TSan reports a race only while the earlier write's stack is
      // still in its thread's trace, and every load of a spin adds to that
      // trace. Writing first and spinning after lost the race in 3 of 20
      // runs when the second worker was slow to start.
      writers_arrived.fetch_add(1, std::memory_order_relaxed);
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (writers_arrived.load(std::memory_order_relaxed) < 2 &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();
      planted_race_write(value);
      return writers_arrived.load(std::memory_order_relaxed) >= 2;
    },
  };
}

} // namespace

int main() {
  caf::actor_system_config cfg;
  mcprt::use_mcprt_scheduler(cfg, 2);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  // TSan halts the program at its first report. One round can go
  // unreported when the machine is loaded (the earlier write's stack has
  // left its thread's trace by the time the second write comes), so the
  // race is planted again, in fresh actors, up to ten times.
  int rounds = 0, overlapped_rounds = 0;
  for (; rounds < 10; ++rounds) {
    writers_arrived.store(0, std::memory_order_relaxed);
    auto first = sys.spawn(racing_writer);
    auto second = sys.spawn(racing_writer);
    // Both requests go out before either reply is awaited: each handler
    // waits for the other writer.
    auto first_reply = self->request(first, caf::infinite, write_atom::value, 1);
    auto second_reply = self->request(second, caf::infinite, write_atom::value, 2);
    int overlapped = 0;
    for (auto* reply : {&first_reply, &second_reply})
      std::move(*reply).receive(
        [&](bool both) { overlapped += both ? 1 : 0; },
        [&](caf::error& e) { std::fprintf(stderr, "error: %s\n", sys.render(e).c_str()); });
    self->send_exit(first, caf::exit_reason::user_shutdown);
    self->send_exit(second, caf::exit_reason::user_shutdown);
    overlapped_rounds += overlapped == 2 ? 1 : 0;
  }
  // Reached only when TSan did not halt on the race.
  std::printf("no race reported in %d rounds; the handlers overlapped in %d; value %d\n", rounds,
              overlapped_rounds, unguarded_value);
  return 0;
}
