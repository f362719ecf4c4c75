#pragma once

#include <cstddef>

#include <caf/fwd.hpp>

namespace mcprt {

/// Runs `cfg`'s actor system on mcprt's scheduler with `threads` workers
/// (one per core when 0). Call before constructing the system; it replaces
/// whatever `scheduler.policy` names.
///
/// Why not CAF 0.17's own work-stealing scheduler (see docs/performance.md,
/// "The scheduler", for the measurements):
/// - A woken actor goes to the front of its worker's queue, so two actors
///   that keep messaging each other run back to back while everything else
///   on that worker waits: with one worker, one of 1,000 echo clients did
///   100,000 round trips while each of the others did 55.
/// - Stealing takes the victim's last job by walking its whole linked queue
///   while holding both of its locks, which stalls the victim too.
/// - An idle worker polls for 25 ms, then looks for work to steal only
///   every 10 ms, so a second core joins late.
///
/// This one keeps a FIFO queue per worker (fair: a woken actor waits behind
/// those woken before it), steals half of a victim's queue in one short
/// critical section, and wakes a sleeping worker as soon as there is work
/// it could take and no other worker is already looking for some.
void use_mcprt_scheduler(caf::actor_system_config& cfg, std::size_t threads = 0);

/// Lets glibc's lock-free fast bins take blocks of up to 160 bytes (its
/// maximum; the default is 128). A CAF message is allocated by its sender's
/// thread and freed by its receiver's; a block too big for the fast bins is
/// freed under the lock of the sender's malloc arena, and under load the
/// two threads then queue on that lock. A message that carries a string is
/// 144-168 bytes. Measured with acquire_stress: budget round trips +15-20%,
/// futex calls a tenth as many.
///
/// Process-wide, so it is the program's call, not the runtime's: call it
/// from main before any thread starts (the daemon and the benchmarks do).
/// Does nothing without glibc.
void tune_allocator_for_messages();

} // namespace mcprt
