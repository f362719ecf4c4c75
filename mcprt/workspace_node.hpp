#pragma once

// The workspace node (issue 19): the actor `mcprt serve --caf-port`
// publishes, so that C++ hosts elsewhere get the `runtime` interface through
// `runtime::connect` (messages/remote.hpp has the interface and says what
// travels where). It tracks which host opened which session and closes a
// host's sessions when the host goes away, so the pool drains as usual.

#include "messages/remote.hpp"

namespace mcprt {

class runtime;

/// Spawns the node actor over `rt`, which must outlive it: end the actor
/// (anon_send_exit) before the runtime shuts down. The runtime's blocking
/// calls (closing a session, the snapshot, restart, OAuth) run on a thread
/// of their own per request, never on a scheduler worker.
workspace_node_actor spawn_workspace_node(caf::actor_system& sys, runtime& rt);

} // namespace mcprt
