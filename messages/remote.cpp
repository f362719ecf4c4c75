#include "messages/remote.hpp"

#include <caf/actor_system_config.hpp>

namespace mcprt {

void add_remote_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::mcprt_remote>();
}

} // namespace mcprt
