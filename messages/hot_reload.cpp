#include "messages/hot_reload.hpp"

#include <caf/actor_system_config.hpp>

namespace mcprt {

std::string to_string(file_change c) {
  switch (c) {
    case file_change::created: return "created";
    case file_change::modified: return "modified";
    case file_change::deleted: return "deleted";
  }
  return "unknown";
}

void add_hot_reload_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::mcprt_hot_reload>();
}

} // namespace mcprt
