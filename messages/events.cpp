#include "messages/events.hpp"
#include "messages/event_bus.hpp"

#include <utility>

#include <caf/actor_system_config.hpp>

#include "core/event_payload.hpp"
#include "core/overloaded.hpp"
#include "core/untrusted_text.hpp"

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
  {event_kind::resource_updated, "resource_updated"},
  {event_kind::resource_list_changed, "resource_list_changed"},
  {event_kind::elicitation_requested, "elicitation_requested"},
  {event_kind::sampling_requested, "sampling_requested"},
  {event_kind::host_request_ended, "host_request_ended"},
  {event_kind::call_progress, "call_progress"},
  {event_kind::auth_required, "auth_required"},
  {event_kind::server_log, "server_log"},
  {event_kind::disconnected, "disconnected"},
  {event_kind::definitions_changed, "definitions_changed"},
  {event_kind::sandbox_degraded, "sandbox_degraded"},
  {event_kind::egress_refused, "egress_refused"},
};

/// Walks a payload through its inspect overloads and replaces invalid
/// UTF-8 in every string it holds. The payload types hold only strings,
/// numbers, enums, vectors, optionals and nested payload types.
struct utf8_scrubber {
  static constexpr bool reads_state = true;
  static constexpr bool writes_state = false;
  using result_type = void;

  template <class... Ts>
  void operator()(Ts&&... xs) {
    (scrub(xs), ...);
  }

  void scrub(std::string& s) {
    if (first_invalid_utf8(s)) s = replace_invalid_utf8(s);
  }

  template <class T>
  void scrub(std::vector<T>& xs) {
    for (auto& x : xs)
      scrub(x);
  }

  // A server's JSON (host requests' params).
  void scrub(json_value& v) { make_payload_safe(v.value); }

  // Names shared with a session: rebuilt, never written through.
  void scrub(shared_names& names) {
    for (auto& name : names)
      if (first_invalid_utf8(name)) {
        auto own = names.to_vector();
        scrub(own);
        names = shared_names(std::move(own));
        return;
      }
  }

  template <class T>
  void scrub(events::optional_field<T>& o) {
    if (o.x) scrub(*o.x);
  }

  template <class T>
  void scrub(T& x) {
    if constexpr (std::is_arithmetic<T>::value || std::is_enum<T>::value || caf::meta::is_annotation<T>::value)
      return;
    else
      inspect(*this, x);
  }
};

template <std::size_t... Is>
event_payload empty_payload_of(std::size_t index, std::index_sequence<Is...>) {
  event_payload out;
  (void)((index == Is ? (out.emplace<Is>(), true) : false) || ...);
  return out;
}

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

event_payload empty_payload(event_kind kind) {
  return empty_payload_of(static_cast<std::size_t>(kind),
                          std::make_index_sequence<std::variant_size_v<event_payload>>{});
}

event_payload to_payload(const budget_event& e) {
  return std::visit([](const auto& x) { return event_payload{events::of(x)}; }, e);
}

void make_publishable(event_payload& p, const std::function<std::string(const std::string&)>& show) {
  if (show)
    std::visit(overloaded{
                 [&](events::client_update& u) { u.connection_id = show(u.connection_id); },
                 [&](events::pool_entry_restarted& e) { e.id = show(e.id); },
                 [&](events::pool_entry_failed& e) { e.id = show(e.id); },
                 [](auto&) {},
               },
               p);
  utf8_scrubber scrubber;
  std::visit([&](auto& x) { inspect(scrubber, x); }, p);
}

void to_json(nlohmann::json& j, const shared_names& x) {
  j = nlohmann::json::array();
  auto& names = j.get_ref<nlohmann::json::array_t&>();
  names.reserve(x.size());
  for (auto& name : x)
    names.emplace_back(name);
}

void add_event_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::mcprt_events>();
}

namespace events {

using nlohmann::json;

void to_json(json& j, const settings_file_change& x) {
  j = json{{"path", x.path}, {"scope", x.scope}, {"change", x.change}, {"keys", x.keys}};
  if (x.keys_omitted) j["keys_omitted"] = *x.keys_omitted;
}

void to_json(json& j, const settings_changed& x) {
  j = json{{"batch", x.batch}, {"changes", x.changes}};
}

void to_json(json& j, const settings_error& x) {
  j = json{{"path", x.path}, {"scope", x.scope}, {"line", x.line}, {"column", x.column}, {"message", x.message}};
}

void to_json(json& j, const reconcile_started& x) {
  j = json{{"session", x.session}, {"generation", x.generation}, {"revision", x.revision}};
}

void to_json(json& j, const skipped_server& x) {
  j = json{{"name", x.name}, {"reason", x.reason}};
}

void to_json(json& j, const server_error& x) {
  j = json{{"name", x.name}, {"error", x.error}};
}

void to_json(json& j, const reconcile_finished& x) {
  j = json{{"session", x.session},
           {"generation", x.generation},
           {"added", x.added},
           {"removed", x.removed},
           {"restarted", x.restarted},
           {"refiltered", x.refiltered},
           {"kept", x.kept},
           {"skipped", x.skipped},
           {"errors", x.errors},
           {"plan_ms", x.plan_ms},
           {"apply_ms", x.apply_ms}};
}

void to_json(json& j, const client_update& x) {
  j = json{{"server", x.server}, {"connection_id", x.connection_id}, {"status", to_string(x.status)}};
  if (x.session) j["session"] = *x.session;
  if (x.generation) j["generation"] = *x.generation;
  if (x.tools) j["tools"] = *x.tools;
  if (x.prompts) j["prompts"] = *x.prompts;
  if (x.pid) j["pid"] = *x.pid < 0 ? json(nullptr) : json(*x.pid);
  if (x.error) j["error"] = *x.error;
  if (x.reason) j["reason"] = *x.reason;
  if (x.refiltered) j["refiltered"] = true;
}

void to_json(json& j, const pending_approval_changed& x) {
  j = json{{"session", x.session}, {"promptable", x.promptable}};
}

void to_json(json& j, const budget_warning& x) {
  j = json{{"scope", x.scope},
           {"budget", x.budget},
           {"mode", to_string(x.mode)},
           {"reserved_count", x.reserved_count},
           {"live_count", x.live_count},
           {"threshold_ratio", x.threshold_ratio}};
}

void to_json(json& j, const refusal& x) {
  j = json{{"name", x.name}, {"transport", x.transport}, {"reason", x.reason}};
}

void to_json(json& j, const child_refused_batch& x) {
  j = json{{"scope", x.scope},
           {"budget", x.budget},
           {"mode", to_string(x.mode)},
           {"reserved_count", x.reserved_count},
           {"live_count", x.live_count},
           {"refused", x.refused}};
}

void to_json(json& j, const pool_entry_restarted& x) {
  j = json{{"id", x.id},
           {"name", x.name},
           {"generation", x.generation},
           {"restarts", x.restarts},
           {"last_error", x.last_error},
           {"reason", x.reason}};
}

void to_json(json& j, const resource_updated& x) {
  j = json{{"server", x.server}, {"uri", x.uri}};
}

void to_json(json& j, const resource_list_changed& x) {
  j = json{{"server", x.server}};
}

// -- requests for the host --

void to_json(json& j, const host_call& x) {
  j = json{{"session", x.session}, {"tool", x.tool}, {"call_id", x.call_id}};
}

namespace {

template <class Requested>
void host_request_to_json(json& j, const Requested& x) {
  j = json{{"id", x.id}, {"server", x.server}, {"params", x.params.value}};
  if (x.call) j["call"] = *x.call;
}

} // namespace

void to_json(json& j, const elicitation_requested& x) {
  host_request_to_json(j, x);
}

void to_json(json& j, const sampling_requested& x) {
  host_request_to_json(j, x);
}

void to_json(json& j, const host_request_ended& x) {
  j = json{{"id", x.id}, {"request", x.request}, {"outcome", x.outcome}};
}

void to_json(json& j, const call_progress& x) {
  j = json{{"call_id", x.call_id}, {"session", x.session}, {"server", x.server}, {"tool", x.tool},
           {"progress", x.progress}};
  if (x.total) j["total"] = *x.total;
  if (!x.message.empty()) j["message"] = x.message;
}

void to_json(json& j, const auth_required& x) {
  j = json{{"server", x.server}, {"reason", x.reason}, {"remedy", x.remedy}};
}

void to_json(json& j, const server_log& x) {
  j = json{{"server", x.server}, {"level", x.level}, {"data", x.data.value}};
  if (!x.logger.empty()) j["logger"] = x.logger;
  if (x.dropped > 0) j["dropped"] = x.dropped;
  if (!x.call_ids.empty()) j["call_ids"] = x.call_ids;
}

void to_json(json& j, const disconnected& x) {
  j = json{{"node", x.node}, {"reason", x.reason}};
}

void to_json(json& j, const definitions_changed& x) {
  j = json{{"server", x.server}, {"changes", x.changes}, {"remedy", x.remedy}};
}

void to_json(json& j, const sandbox_degraded& x) {
  j = json{{"server", x.server}, {"in_force", x.in_force}, {"missing", x.missing}};
}

void to_json(json& j, const egress_refused& x) {
  j = json{{"server", x.server}, {"host", x.host}, {"port", x.port}, {"reason", x.reason}};
}

void to_json(json& j, const pool_entry_failed& x) {
  j = json{{"id", x.id}, {"name", x.name}, {"last_error", x.last_error}, {"stderr", x.stderr_tail}};
}

void to_json(json& j, const event_payload& p) {
  std::visit([&](const auto& x) { to_json(j, x); }, p);
}

client_update of(const mcprt::client_update& u) {
  client_update out;
  out.server = u.server;
  out.connection_id = u.connection_id;
  out.status = u.status;
  out.generation = u.generation;
  out.tools = u.tools;
  out.prompts = u.prompts;
  out.pid = u.pid;
  if (!u.error.empty()) out.error = u.error;
  return out;
}

client_update client_update::disconnected(std::string session, std::string server, std::string connection_id,
                                          std::string reason) {
  client_update out;
  out.server = std::move(server);
  out.connection_id = std::move(connection_id);
  out.status = connection_status::disconnected;
  out.session = std::move(session);
  out.reason = std::move(reason);
  return out;
}

client_update client_update::refiltered_tools(std::string session, std::string server, std::string connection_id,
                                              connection_status status, uint32_t tools) {
  client_update out;
  out.server = std::move(server);
  out.connection_id = std::move(connection_id);
  out.status = status;
  out.session = std::move(session);
  out.tools = tools;
  out.refiltered = true;
  return out;
}

std::vector<server_error> server_errors(const std::vector<std::pair<std::string, std::string>>& xs) {
  std::vector<server_error> out;
  out.reserve(xs.size());
  for (auto& [name, error] : xs)
    out.push_back({name, error});
  return out;
}

budget_warning of(const budget_warning_event& e) {
  return {e.scope, e.budget, e.mode, e.reserved_count, e.live_count, e.threshold_ratio};
}

child_refused_batch of(const refused_batch_event& e) {
  child_refused_batch out{e.scope, e.budget, e.mode, e.reserved_count, e.live_count, {}};
  for (auto& r : e.refused)
    out.refused.push_back({r.name, r.transport, r.reason});
  return out;
}

} // namespace events

} // namespace mcprt
