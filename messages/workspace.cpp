#include "messages/workspace.hpp"

#include <caf/actor_system_config.hpp>

namespace mcprt {

std::string to_string(reserve_reply r) {
  switch (r) {
    case reserve_reply::reserved: return "reserved";
    case reserve_reply::already_held: return "already_held";
    case reserve_reply::refused: return "refused";
  }
  return "unknown";
}

std::string to_string(pool_entry_status s) {
  switch (s) {
    case pool_entry_status::spawning: return "spawning";
    case pool_entry_status::active: return "active";
    case pool_entry_status::draining: return "draining";
    case pool_entry_status::restarting: return "restarting";
    case pool_entry_status::closed: return "closed";
    case pool_entry_status::failed: return "failed";
  }
  return "unknown";
}

std::string to_string(release_reason r) {
  switch (r) {
    case release_reason::session_closed: return "session_closed";
    case release_reason::removed: return "removed";
    case release_reason::changed: return "changed";
  }
  return "unknown";
}

std::string to_string(pool_entry_event e) {
  switch (e) {
    case pool_entry_event::restarting: return "restarting";
    case pool_entry_event::restarted: return "restarted";
    case pool_entry_event::failed: return "failed";
    case pool_entry_event::closed: return "closed";
  }
  return "unknown";
}

void add_workspace_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::mcprt_workspace>();
}

} // namespace mcprt
