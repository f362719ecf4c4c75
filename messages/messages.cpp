#include "messages/messages.hpp"

#include "messages/calls.hpp"
#include "messages/connection.hpp"
#include "messages/event_bus.hpp"
#include "messages/events.hpp"
#include "messages/state.hpp"
#include "messages/workspace.hpp"
#include "messages/hot_reload.hpp"
#include "messages/fleet.hpp"
#include "messages/remote.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/message.hpp>

namespace mcprt {

std::string to_string(errc x) {
  switch (x) {
    case errc::none: return "none";
    case errc::budget_exhausted: return "budget_exhausted";
    case errc::pool_draining: return "pool_draining";
    case errc::spawn_failed: return "spawn_failed";
    case errc::timeout: return "timeout";
    case errc::not_connected: return "not_connected";
    case errc::unknown_tool: return "unknown_tool";
    case errc::tool_error: return "tool_error";
    case errc::protocol_error: return "protocol_error";
    case errc::transport_not_supported: return "transport_not_supported";
    case errc::unavailable: return "unavailable";
    case errc::unknown_server: return "unknown_server";
    case errc::not_gated: return "not_gated";
    case errc::io_error: return "io_error";
    case errc::too_many_calls: return "too_many_calls";
    case errc::unknown_session: return "unknown_session";
    case errc::not_advertised: return "not_advertised";
    case errc::bad_request: return "bad_request";
    case errc::cancelled: return "cancelled";
    case errc::needs_auth: return "needs_auth";
    case errc::disconnected: return "disconnected";
    case errc::definitions_changed: return "definitions_changed";
  }
  return "unknown";
}

std::string to_string(connection_status x) {
  switch (x) {
    case connection_status::connecting: return "connecting";
    case connection_status::connected: return "connected";
    case connection_status::disconnected: return "disconnected";
    case connection_status::error: return "error";
    case connection_status::needs_auth: return "needs_auth";
  }
  return "unknown";
}

caf::error make_error(errc x, std::string message) {
  if (message.empty()) return caf::error{static_cast<uint8_t>(x), caf::atom("mcprt")};
  return caf::error{static_cast<uint8_t>(x), caf::atom("mcprt"), caf::make_message(std::move(message))};
}

std::string render_error(uint8_t code, caf::atom_value, const caf::message& context) {
  std::string out = to_string(static_cast<errc>(code));
  // The text comes first; a context may carry the same fact as a value
  // after it (see messages/unavailable_error.hpp).
  if (!context.empty() && context.match_element<std::string>(0)) out += ": " + context.get_as<std::string>(0);
  return out;
}

void add_mcprt_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::mcprt>();
  add_event_types(cfg);
  cfg.add_message_types<caf::id_block::mcprt_state>();
  cfg.add_message_types<caf::id_block::mcprt_connection>();
  cfg.add_message_types<caf::id_block::mcprt_event_bus>();
  add_workspace_types(cfg);
  add_hot_reload_types(cfg);
  add_fleet_types(cfg);
  add_remote_types(cfg);
  add_call_types(cfg);
  cfg.add_error_category(caf::atom("mcprt"), render_error);
}

} // namespace mcprt
