#include "messages/fleet.hpp"

#include <caf/actor_system_config.hpp>

namespace mcprt {

std::string to_string(fleet_grant g) {
  switch (g) {
    case fleet_grant::reserved: return "reserved";
    case fleet_grant::already_held: return "already_held";
    case fleet_grant::refused: return "refused";
    case fleet_grant::recovering: return "recovering";
    case fleet_grant::unreachable: return "unreachable";
  }
  return "unknown";
}

void add_fleet_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::mcprt_fleet>();
}

} // namespace mcprt
