#pragma once

// The pool supervisor: one live connection per connection id, shared by
// every session that acquires the same config, admitted by the workspace
// budget, drained when the last session lets go (closed at once when the
// settings no longer want it), restarted with backoff when it crashes. It
// implements the pool interface of messages/pool.hpp.

#include <cstddef>

#include <caf/fwd.hpp>

#include "core/pool_table.hpp"
#include "messages/workspace.hpp"
#include "pool/shard_router.hpp"

namespace mcprt {

struct pool_options {
  /// The rules' settings (drain, idle, restarts, ...), documented there.
  pool_table_options table;
  /// The pool runs as this many actors (shards), each owning the servers
  /// whose names hash to it, so that acquires of different servers run in
  /// parallel; 0: one per scheduler worker. With one shard the pool is a
  /// single actor.
  std::size_t shards = 0;
};

/// How the sharded pool routes a message: by the request's shard_key, or to
/// every shard for release_session, snapshot and drain.
extern const shard_route pool_route;

/// Spawns the pool. `budget` may be invalid (no budget: every new entry is
/// admitted); `bus` may be invalid (no events).
pool_actor spawn_pool(caf::actor_system& sys, connection_factory make, budget_actor budget,
                      event_bus_actor bus, pool_options opts = {});

} // namespace mcprt
