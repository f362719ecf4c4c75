#pragma once

// One actor handle in front of a fixed set of shard actors. A message goes
// straight from its sender's thread into the mailbox of the shard that owns
// it: no hop through a router's mailbox, no lock, no allocation.
//
// Unlike caf::actor_pool, the set never changes: a shard that dies takes the
// router and every other shard down with it (its exit reason), so no message
// is ever routed to a shard that does not own it.

#include <cstddef>
#include <optional>
#include <vector>

#include <caf/fwd.hpp>

namespace mcprt {

/// The shard that owns `msg`, or nullopt for a message that concerns every
/// shard. Called on the sender's thread for every message: keep it cheap.
using shard_route = std::optional<std::size_t> (*)(const caf::type_erased_tuple& msg, std::size_t shards);

/// Spawns the actor that takes a message concerning every shard (it asks
/// them all and answers the sender once).
using shard_fan_out = caf::actor (*)(caf::actor_system& sys, const std::vector<caf::actor>& shards);

/// The router over `shards` (at least one). An exit message sent to the
/// router is passed on to every shard.
caf::actor spawn_shard_router(caf::actor_system& sys, std::vector<caf::actor> shards, shard_route route,
                              shard_fan_out fan_out);

} // namespace mcprt
