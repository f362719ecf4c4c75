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

} // namespace mcprt
