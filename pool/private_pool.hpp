#pragma once

// The kill switch's pool (MCPRT_NO_POOL=1): the pool interface of
// messages/pool.hpp for one session, sharing nothing. Each acquire starts a
// connection of its own, admitted by the session's budget; a release stops
// it at once and gives its slot back (no drain delay); a crash is not
// restarted here: the holder is told `failed` and acquires it again after
// its backoff. `restart` answers an empty list (restart needs the pool).
//
// It keeps the session budget's live count (connected servers) current.

#include <caf/fwd.hpp>

#include "messages/pool.hpp"
#include "messages/workspace.hpp"

namespace mcprt {

/// Spawns a private pool. `budget` may be invalid (no budget: every acquire
/// is admitted). Its connections go with it when it exits.
pool_actor spawn_private_pool(caf::actor_system& sys, connection_factory make, budget_actor budget);

} // namespace mcprt
