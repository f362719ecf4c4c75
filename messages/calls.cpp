#include "messages/calls.hpp"

#include <caf/actor_system_config.hpp>

namespace mcprt {

void add_call_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::mcprt_calls>();
}

} // namespace mcprt
