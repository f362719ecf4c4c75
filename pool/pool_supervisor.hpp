#pragma once

// The pool supervisor: one live connection per connection id, shared by
// every session that acquires the same config, admitted by the workspace
// budget, drained when the last session lets go (closed at once when the
// settings no longer want it), restarted with backoff when it crashes. It
// implements the pool interface of messages/pool.hpp.

#include <chrono>
#include <cstddef>
#include <functional>

#include <caf/fwd.hpp>

#include "messages/workspace.hpp"
#include "pool/shard_router.hpp"

namespace mcprt {

struct pool_options {
  /// How long an unreferenced entry lingers before it is closed; clamped to
  /// [1 s, 10 min].
  std::chrono::milliseconds drain_delay{30000};
  /// An entry that first went idle this long ago is closed if it is idle at
  /// that moment, however often sessions attached and detached meanwhile.
  std::chrono::milliseconds max_idle{300000};
  /// Crash restarts: backoff_delay(attempt, base, cap, jitter 0.1).
  std::chrono::milliseconds backoff_base{1000};
  std::chrono::milliseconds backoff_cap{30000};
  /// At most this many crash restarts within `restart_window`; one more
  /// crash and the entry is given up (`pool_entry_failed`).
  std::size_t max_restarts = 5;
  std::chrono::milliseconds restart_window{60000};
  /// Stderr lines carried by `pool_entry_failed`.
  std::size_t failed_stderr_lines = 20;
  /// The pool runs as this many actors (shards), each owning the servers
  /// whose names hash to it, so that acquires of different servers run in
  /// parallel; 0: one per scheduler worker. With one shard the pool is a
  /// single actor.
  std::size_t shards = 0;
  /// How a connection id appears in the pool's log lines (the runtime's
  /// keyed digest; its events are shown by the bus); empty: unchanged.
  std::function<std::string(const std::string&)> show_id;
};

/// How the sharded pool routes a message: by the request's shard_key, or to
/// every shard for release_session, snapshot and drain.
extern const shard_route pool_route;

/// Spawns the pool. `budget` may be invalid (no budget: every new entry is
/// admitted); `bus` may be invalid (no events).
pool_actor spawn_pool(caf::actor_system& sys, connection_factory make, budget_actor budget,
                      event_bus_actor bus, pool_options opts = {});

} // namespace mcprt
