#pragma once

// A host's side of a remote workspace (runtime::connect): the
// actor the node knows the host by and watches, and that watches the node
// in turn. When the node goes away (its process ends, the connection
// breaks), `on_gone` runs once, on the link's thread, with the reason.

#include <functional>
#include <string>

#include "messages/remote.hpp"

namespace mcprt {

remote_host_actor spawn_remote_link(caf::actor_system& sys, workspace_node_actor node,
                                    std::function<void(const std::string& reason)> on_gone);

// The node's facade seen through the runtime's own interfaces, on the host:
// the runtime asks these as it asks its actors when embedded, and each
// passes on to the facade what a host may ask, the session's id with it.
// What only the node's own actors do (settings updates, attaching
// sessions, publishing events) goes nowhere. Local actors: they end with
// the runtime.

reconciler_actor spawn_remote_session(caf::actor_system& sys, workspace_node_actor node, std::string session);
gating_actor spawn_remote_gating(caf::actor_system& sys, workspace_node_actor node);
watcher_actor spawn_remote_watcher(caf::actor_system& sys, workspace_node_actor node);
event_bus_actor spawn_remote_bus(caf::actor_system& sys, workspace_node_actor node);

} // namespace mcprt
