#include "messages/workspace.hpp"

#include <caf/actor_system_config.hpp>

namespace mcprt {

namespace {

constexpr std::pair<event_kind, const char*> event_names[] = {
  {event_kind::settings_changed, "settings_changed"},
  {event_kind::settings_error, "settings_error"},
  {event_kind::reconcile_started, "reconcile_started"},
  {event_kind::reconcile_finished, "reconcile_finished"},
  {event_kind::client_update, "client_update"},
  {event_kind::pending_approval_changed, "pending_approval_changed"},
  {event_kind::budget_warning, "mcp_budget_warning"},
  {event_kind::child_refused_batch, "mcp_child_refused_batch"},
  {event_kind::pool_entry_restarted, "pool_entry_restarted"},
  {event_kind::pool_entry_failed, "pool_entry_failed"},
};

} // namespace

std::string to_string(event_kind k) {
  for (auto& [kind, name] : event_names)
    if (kind == k) return name;
  return "unknown";
}

std::optional<event_kind> parse_event_kind(std::string_view s) {
  for (auto& [kind, name] : event_names)
    if (s == name) return kind;
  // Also accept the budget events without the SSE prefix.
  if (s == "budget_warning") return event_kind::budget_warning;
  if (s == "child_refused_batch") return event_kind::child_refused_batch;
  return std::nullopt;
}

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
