#pragma once

// The sharded pool's answer to the requests that concern every shard
// (release_session, snapshot, drain): a one-shot actor asks each shard,
// merges the answers and answers the sender once.
//
// A server's entries all live in one shard, chosen by the server's name (the
// shard_key of every request that concerns one server): the slot of a name,
// its sibling entries and its restarts are then shard-local, so every shard
// is a whole pool for the names it owns, and acquires of different servers
// run in parallel. Only these three requests need more than one shard.
//
// Kept apart from pool/shard_router: the router is generic over any
// interface, while the merging here knows the pool's replies.

#include <vector>

#include <caf/fwd.hpp>

namespace mcprt {

/// A shard_fan_out (pool/shard_router.hpp) for the pool interface: spawns
/// the actor that takes one every-shard request of the pool and quits once
/// it has answered.
caf::actor pool_fan_out(caf::actor_system& sys, const std::vector<caf::actor>& shards);

} // namespace mcprt
