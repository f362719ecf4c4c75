#pragma once

#include <cstddef>

#include <caf/fwd.hpp>

namespace mcprt {

/// Runs `cfg`'s actor system on mcprt's scheduler with `threads` workers
/// (one per core when 0). Call before constructing the system; it replaces
/// whatever `scheduler.policy` names.
///
/// Why not CAF 0.17's own work-stealing scheduler (see docs/architecture.md,
/// "Scheduler", for the measurements):
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

} // namespace mcprt
