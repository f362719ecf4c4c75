#pragma once

// The event contract: one struct per event kind, the bus's event and the
// subscriber interface. Every payload a subscriber sees is one of the
// structs below rendered by its one `to_json`; nothing else builds event
// JSON. Each struct is inspectable and has a type id, so events can travel
// between CAF nodes. Part of the installed API; the bus itself is internal
// (messages/event_bus.hpp: `publish(self, bus, events::pool_entry_failed{...})`,
// the kind follows from the struct).

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "core/budget_mode.hpp"
#include "core/shared_names.hpp"
#include "messages/messages.hpp"

namespace mcprt {

/// Every observable change, as the event bus delivers it. The order is the
/// order of the alternatives of `event_payload`.
enum class event_kind : uint8_t {
  settings_changed,
  settings_error,
  reconcile_started,
  reconcile_finished,
  client_update,
  pending_approval_changed,
  budget_warning,
  child_refused_batch,
  pool_entry_restarted,
  pool_entry_failed,
  // -- resources --
  resource_updated,
  resource_list_changed,
  // -- requests for the host, answered over the daemon's HTTP API --
  elicitation_requested,
  sampling_requested,
  host_request_ended,
  // -- progress of tool calls --
  call_progress,
  // -- OAuth --
  auth_required,
  // -- the gateway --
  server_log,
  // -- remote hosts --
  disconnected,
  // -- definitions pinned at approval --
  definitions_changed,
  // -- the sandbox --
  sandbox_degraded,
  egress_refused,
};

/// Wire names: the SSE `event:` field (budget events carry the `mcp_`
/// prefix, as in the reference's SSE bridge).
std::string to_string(event_kind k);
std::optional<event_kind> parse_event_kind(std::string_view s);

namespace events {

/// An optional member as the inspectors see it: a flag and a value (CAF
/// 0.17 cannot inspect std::optional).
template <class T>
struct optional_field {
  std::optional<T>& x;
};

template <class Inspector, class T>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, optional_field<T>& o) {
  bool has = o.x.has_value();
  T value = has ? *o.x : T{};
  return f(has, value);
}

template <class Inspector, class T>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, optional_field<T>& o) {
  bool has = false;
  T value{};
  auto load = [&]() -> caf::error {
    if (has)
      o.x = std::move(value);
    else
      o.x.reset();
    return caf::none;
  };
  return f(has, value, caf::meta::load_callback(load));
}

/// A budget_mode as the inspectors see it: one byte, checked when read
/// (the enum has no fixed underlying type: an unchecked value from another
/// node would be undefined behaviour).
struct budget_mode_field {
  budget_mode& x;
};

template <class Inspector>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, budget_mode_field& m) {
  auto value = static_cast<uint8_t>(m.x);
  return f(value);
}

template <class Inspector>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, budget_mode_field& m) {
  uint8_t value = 0;
  auto load = [&]() -> caf::error {
    if (value > static_cast<uint8_t>(budget_mode::enforce))
      return make_error(errc::protocol_error, "unknown budget mode in an event");
    m.x = static_cast<budget_mode>(value);
    return caf::none;
  };
  return f(value, caf::meta::load_callback(load));
}

/// A double as the inspectors see it: finite only. CAF 0.17's pack754
/// never returns on an infinity (it halves it until it is below 2), so a
/// non-finite value is written as 0 and refused when read. Its unpack754
/// knows no subnormals either (it always adds the implicit 1, and packing
/// one again gives another number: found by fuzzing), so a subnormal is
/// written as 0 and read as 0.
struct finite_double_field {
  double& x;
};

inline double wire_double(double x) {
  return std::isnormal(x) ? x : 0.0;
}

template <class Inspector>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, finite_double_field& d) {
  double value = wire_double(d.x);
  return f(value);
}

template <class Inspector>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, finite_double_field& d) {
  double value = 0;
  auto load = [&]() -> caf::error {
    if (!std::isfinite(value)) return make_error(errc::protocol_error, "a number in an event is not finite");
    d.x = wire_double(value);
    return caf::none;
  };
  return f(value, caf::meta::load_callback(load));
}

} // namespace events

/// In JSON, and on the wire, a shared_names is a plain list of names.
void to_json(nlohmann::json& j, const shared_names& x);

template <class Inspector>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, shared_names& x) {
  auto names = x.to_vector();
  return f(names);
}

template <class Inspector>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, shared_names& x) {
  std::vector<std::string> names;
  auto load = [&]() -> caf::error {
    x = shared_names(std::move(names));
    return caf::none;
  };
  return f(names, caf::meta::load_callback(load));
}

namespace events {

// -- settings ---------------------------------------------------------------------

/// One file of a settings_changed batch. `keys` holds at most 100 keys of
/// at most 256 bytes each (the watcher cuts them); `keys_omitted` counts the
/// keys left out and is rendered only when set.
struct settings_file_change {
  std::string path;
  std::string scope;  // config scope: user | project | workspace | top
  std::string change; // created | modified | deleted
  std::vector<std::string> keys;
  std::optional<uint64_t> keys_omitted;
};

/// {"batch", "changes": [{"path", "scope", "change", "keys"[, "keys_omitted"]}]}
struct settings_changed {
  uint64_t batch = 0;
  std::vector<settings_file_change> changes;
};

/// {"path", "scope", "line", "column", "message"}. A watch error has an
/// empty path and scope and line and column 0.
struct settings_error {
  std::string path;
  std::string scope;
  int32_t line = 0;
  int32_t column = 0;
  std::string message;
};

// -- reconcile --------------------------------------------------------------------

/// {"session", "generation", "revision"}
struct reconcile_started {
  std::string session;
  uint64_t generation = 0;
  uint64_t revision = 0;
};

/// A server the pass did not start (budget), and why.
struct skipped_server {
  std::string name;
  std::string reason;
};

/// A server the pass could not connect, and the error.
struct server_error {
  std::string name;
  std::string error;
};

/// Skipped servers from anything with `server` and `reason` members (a
/// session's unavailability).
template <class Unavailability>
std::vector<skipped_server> skipped_servers(const std::vector<Unavailability>& xs) {
  std::vector<skipped_server> out;
  out.reserve(xs.size());
  for (auto& x : xs)
    out.push_back({x.server, x.reason});
  return out;
}

/// Connect errors from (server, error) pairs.
std::vector<server_error> server_errors(const std::vector<std::pair<std::string, std::string>>& xs);

/// {"session", "generation", "added", "removed", "restarted", "refiltered",
///  "kept", "skipped": [{"name", "reason"}], "errors": [{"name", "error"}],
///  "plan_ms", "apply_ms"}
struct reconcile_finished {
  std::string session;
  uint64_t generation = 0;
  std::vector<std::string> added;
  std::vector<std::string> removed;
  std::vector<std::string> restarted;
  std::vector<std::string> refiltered;
  /// Shared with the session's array of live names: a list of 9,999 costs
  /// the pass, the bus and each subscriber a pointer.
  shared_names kept;
  std::vector<skipped_server> skipped;
  std::vector<server_error> errors;
  double plan_ms = 0;
  double apply_ms = 0;
};

/// A connection's status as subscribers see it. Always {"server",
/// "connection_id", "status"}; every other member is rendered only when set:
/// - a connection's own update (`of`) sets generation, tools, prompts and
///   pid (an unset pid of -1, no process, renders as null), and error when
///   there is one;
/// - a session letting go of a server (`disconnected`) sets session and
///   reason ("removed", "restarting", ...);
/// - a session re-filtering a server's tools without reconnecting
///   (`refiltered_tools`) sets session, tools (the count shown) and
///   refiltered (rendered as `"refiltered": true`).
struct client_update {
  std::string server;
  std::string connection_id;
  connection_status status = connection_status::connecting;
  std::optional<std::string> session;
  std::optional<uint64_t> generation;
  std::optional<uint32_t> tools;
  std::optional<uint32_t> prompts;
  std::optional<int32_t> pid;
  std::optional<std::string> error;
  std::optional<std::string> reason;
  bool refiltered = false;

  /// A session let go of `server` (its connection `connection_id`).
  static client_update disconnected(std::string session, std::string server, std::string connection_id,
                                    std::string reason);
  /// A session re-filtered the tools of `server`: `tools` are shown now.
  static client_update refiltered_tools(std::string session, std::string server, std::string connection_id,
                                        connection_status status, uint32_t tools);
};

/// {"session", "promptable": [names]}
struct pending_approval_changed {
  std::string session;
  std::vector<std::string> promptable;
};

// -- budget -----------------------------------------------------------------------

/// {"scope", "budget", "mode", "reserved_count", "live_count", "threshold_ratio"}
struct budget_warning {
  std::string scope; // workspace | session
  uint64_t budget = 0;
  budget_mode mode = budget_mode::warn;
  uint64_t reserved_count = 0;
  uint64_t live_count = 0;
  double threshold_ratio = budget_warn_fraction;
};

/// One refused server of a batch.
struct refusal {
  std::string name;
  std::string transport;
  std::string reason; // budget_exhausted
};

/// {"scope", "budget", "mode", "reserved_count", "live_count",
///  "refused": [{"name", "transport", "reason"}]}
struct child_refused_batch {
  std::string scope;
  uint64_t budget = 0;
  budget_mode mode = budget_mode::enforce;
  uint64_t reserved_count = 0;
  uint64_t live_count = 0;
  std::vector<refusal> refused;
};

// -- pool -------------------------------------------------------------------------

/// {"id", "name", "generation", "restarts", "last_error", "reason"}; `id` is
/// the entry's connection id, `reason` "crash" or "manual".
struct pool_entry_restarted {
  std::string id;
  std::string name;
  uint64_t generation = 0;
  uint64_t restarts = 0;
  std::string last_error;
  std::string reason;
};

/// {"id", "name", "last_error", "stderr": [lines]}: the entry gave up after
/// its restart limit.
struct pool_entry_failed {
  std::string id;
  std::string name;
  std::string last_error;
  std::vector<std::string> stderr_tail; // rendered as "stderr"
};

// -- resources ------------------------------------------------------------

/// {"server", "uri"}: a resource some session subscribed to changed
/// (notifications/resources/updated); read it again to see how. `server` is
/// the configured name; a pool connection shared by sessions reports once.
struct resource_updated {
  std::string server;
  std::string uri;
};

/// {"server"}: the server's list of resources changed
/// (notifications/resources/list_changed).
struct resource_list_changed {
  std::string server;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, resource_updated& x) {
  return f(caf::meta::type_name("mcprt.events.resource_updated"), x.server, x.uri);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, resource_list_changed& x) {
  return f(caf::meta::type_name("mcprt.events.resource_list_changed"), x.server);
}

void to_json(nlohmann::json& j, const resource_updated& x);
void to_json(nlohmann::json& j, const resource_list_changed& x);

// -- requests for the host -------------------------------------------------

/// The runtime's tool call a host request belongs to (mcprt::host_call_ref
/// without the server, which the request names already).
struct host_call {
  std::string session;
  std::string tool;
  std::string call_id;
};

/// {"id", "server", "params"[, "call": {"session", "tool", "call_id"}]}: a
/// server asked `elicitation/create` and the daemon waits for
/// `POST /workspace/mcp/elicitations/{id}`. `params` is the server's (a
/// JSON object: message, requestedSchema, ...), UNTRUSTED and bounded by
/// the publisher (core/host_answer bounded_host_params).
struct elicitation_requested {
  std::string id;
  std::string server;
  json_value params;
  std::optional<host_call> call;
};

/// The same for `sampling/createMessage`, answered by
/// `POST /workspace/mcp/sampling/{id}`.
struct sampling_requested {
  std::string id;
  std::string server;
  json_value params;
  std::optional<host_call> call;
};

/// {"id", "request", "outcome"}: a request above no longer waits.
/// `request` is "elicitation" or "sampling"; `outcome` is "answered" (over
/// HTTP), "timed_out" (the daemon declined / refused it), "withdrawn" (the
/// server cancelled it or its connection ended) or "stopped" (the daemon
/// stopped and declined / refused it).
struct host_request_ended {
  std::string id;
  std::string request;
  std::string outcome;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, host_call& x) {
  return f(caf::meta::type_name("mcprt.events.host_call"), x.session, x.tool, x.call_id);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, elicitation_requested& x) {
  optional_field<host_call> call{x.call};
  return f(caf::meta::type_name("mcprt.events.elicitation_requested"), x.id, x.server, x.params, call);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sampling_requested& x) {
  optional_field<host_call> call{x.call};
  return f(caf::meta::type_name("mcprt.events.sampling_requested"), x.id, x.server, x.params, call);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, host_request_ended& x) {
  return f(caf::meta::type_name("mcprt.events.host_request_ended"), x.id, x.request, x.outcome);
}

void to_json(nlohmann::json& j, const host_call& x);
void to_json(nlohmann::json& j, const elicitation_requested& x);
void to_json(nlohmann::json& j, const sampling_requested& x);
void to_json(nlohmann::json& j, const host_request_ended& x);
// -- progress of tool calls ---------------------------------------------

/// {"call_id", "session", "server", "tool", "progress", "total"?, "message"?}:
/// a step of a runtime tool call that asked for progress events
/// (call_options::progress_events). `call_id` is the runtime's (the
/// caller's own when it chose one); `message` is the server's text, cut by
/// the session (mcp_session_options::max_progress_message) and rendered
/// only when not empty; `total` only when the server sent one.
struct call_progress {
  std::string call_id;
  std::string session;
  std::string server;
  std::string tool;
  double progress = 0;
  std::optional<double> total;
  std::string message;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, call_progress& x) {
  finite_double_field progress{x.progress};
  bool has_total = x.total.has_value();
  double total = has_total ? *x.total : 0.0;
  finite_double_field total_field{total};
  // The optional travels as a flag and a finite double; read back, it is
  // set from them.
  auto load = [&]() -> caf::error {
    if (has_total) x.total = total;
    else x.total.reset();
    return caf::none;
  };
  return f(caf::meta::type_name("mcprt.events.call_progress"), x.call_id, x.session, x.server, x.tool, progress,
           has_total, total_field, x.message, caf::meta::load_callback(load));
}

void to_json(nlohmann::json& j, const call_progress& x);

// -- OAuth ----------------------------------------------------------------

/// {"server", "reason", "remedy"}: a server refused mcprt and only a person
/// can authorize it; it stays out (status `disconnected`, reason
/// `needs_auth`) until `mcprt auth SERVER`. `reason` never holds a token.
struct auth_required {
  std::string server;
  std::string reason;
  std::string remedy;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, auth_required& x) {
  return f(caf::meta::type_name("mcprt.events.auth_required"), x.server, x.reason, x.remedy);
}

void to_json(nlohmann::json& j, const auth_required& x);

// -- the gateway ----------------------------------------------------------

/// {"server", "level", "logger"?, "data"}: a server's log message
/// (notifications/message). UNTRUSTED: `data` is the server's JSON, cut to
/// a marked stub past 16 KiB; `logger` at most 256 bytes. A connection
/// publishes at most 100 a second; the rest are counted in the next one's
/// `dropped`. `call_ids` are the runtime's tool calls then in flight on the
/// connection (whom the message most likely concerns).
struct server_log {
  std::string server;
  std::string level;
  std::string logger;
  json_value data;
  uint32_t dropped = 0;
  std::vector<std::string> call_ids;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, server_log& x) {
  return f(caf::meta::type_name("mcprt.events.server_log"), x.server, x.level, x.logger, x.data, x.dropped,
           x.call_ids);
}

void to_json(nlohmann::json& j, const server_log& x);

/// {"node", "reason"}: a host's remote workspace node (runtime::connect)
/// went away. The host's runtime sends it to its own subscribers, last:
/// their subscription at the node has ended with the connection. `node` is
/// HOST:PORT as the host gave it.
struct disconnected {
  std::string node;
  std::string reason;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, disconnected& x) {
  return f(caf::meta::type_name("mcprt.events.disconnected"), x.node, x.reason);
}

void to_json(nlohmann::json& j, const disconnected& x);

// -- definitions pinned at approval -----------------------------------------

/// {"server", "changes", "remedy"}: a server now offers tools (prompts,
/// resources) other than those pinned at its approval; what differs is held
/// back from every caller until `remedy` (`mcprt approve SERVER`). UNTRUSTED:
/// `changes` quotes the server's new text, escaped and bounded
/// (core/definition_pins describe_changes). Published once per listing.
struct definitions_changed {
  std::string server;
  std::string changes;
  std::string remedy;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, definitions_changed& x) {
  return f(caf::meta::type_name("mcprt.events.definitions_changed"), x.server, x.changes, x.remedy);
}

void to_json(nlohmann::json& j, const definitions_changed& x);

// -- the sandbox ----------------------------------------------------------------

/// {"server", "in_force", "missing"}: a sandboxed server started without
/// some of its protections (this machine lacks a mechanism). `missing`
/// entries are "protection: why" (core/sandbox_policy).
struct sandbox_degraded {
  std::string server;
  std::vector<std::string> in_force;
  std::vector<std::string> missing;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_degraded& x) {
  return f(caf::meta::type_name("mcprt.events.sandbox_degraded"), x.server, x.in_force, x.missing);
}

void to_json(nlohmann::json& j, const sandbox_degraded& x);

/// {"server", "host", "port", "reason"}: the egress proxy refused a
/// sandboxed server's connection. UNTRUSTED: `host` is what the server
/// asked for (escaped and bounded by the proxy).
struct egress_refused {
  std::string server;
  std::string host;
  int32_t port = 0;
  std::string reason;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, egress_refused& x) {
  return f(caf::meta::type_name("mcprt.events.egress_refused"), x.server, x.host, x.port, x.reason);
}

void to_json(nlohmann::json& j, const egress_refused& x);

// -- inspect ----------------------------------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, settings_file_change& x) {
  optional_field<uint64_t> keys_omitted{x.keys_omitted};
  return f(caf::meta::type_name("mcprt.events.settings_file_change"), x.path, x.scope, x.change, x.keys,
           keys_omitted);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, settings_changed& x) {
  return f(caf::meta::type_name("mcprt.events.settings_changed"), x.batch, x.changes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, settings_error& x) {
  return f(caf::meta::type_name("mcprt.events.settings_error"), x.path, x.scope, x.line, x.column, x.message);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reconcile_started& x) {
  return f(caf::meta::type_name("mcprt.events.reconcile_started"), x.session, x.generation, x.revision);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, skipped_server& x) {
  return f(caf::meta::type_name("mcprt.events.skipped_server"), x.name, x.reason);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, server_error& x) {
  return f(caf::meta::type_name("mcprt.events.server_error"), x.name, x.error);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reconcile_finished& x) {
  finite_double_field plan_ms{x.plan_ms};
  finite_double_field apply_ms{x.apply_ms};
  return f(caf::meta::type_name("mcprt.events.reconcile_finished"), x.session, x.generation, x.added, x.removed,
           x.restarted, x.refiltered, x.kept, x.skipped, x.errors, plan_ms, apply_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, client_update& x) {
  optional_field<std::string> session{x.session};
  optional_field<uint64_t> generation{x.generation};
  optional_field<uint32_t> tools{x.tools};
  optional_field<uint32_t> prompts{x.prompts};
  optional_field<int32_t> pid{x.pid};
  optional_field<std::string> error{x.error};
  optional_field<std::string> reason{x.reason};
  return f(caf::meta::type_name("mcprt.events.client_update"), x.server, x.connection_id, x.status, session,
           generation, tools, prompts, pid, error, reason, x.refiltered);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pending_approval_changed& x) {
  return f(caf::meta::type_name("mcprt.events.pending_approval_changed"), x.session, x.promptable);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, budget_warning& x) {
  budget_mode_field mode{x.mode};
  finite_double_field threshold_ratio{x.threshold_ratio};
  return f(caf::meta::type_name("mcprt.events.budget_warning"), x.scope, x.budget, mode, x.reserved_count,
           x.live_count, threshold_ratio);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, refusal& x) {
  return f(caf::meta::type_name("mcprt.events.refusal"), x.name, x.transport, x.reason);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, child_refused_batch& x) {
  budget_mode_field mode{x.mode};
  return f(caf::meta::type_name("mcprt.events.child_refused_batch"), x.scope, x.budget, mode,
           x.reserved_count, x.live_count, x.refused);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_entry_restarted& x) {
  return f(caf::meta::type_name("mcprt.events.pool_entry_restarted"), x.id, x.name, x.generation, x.restarts,
           x.last_error, x.reason);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_entry_failed& x) {
  return f(caf::meta::type_name("mcprt.events.pool_entry_failed"), x.id, x.name, x.last_error, x.stderr_tail);
}

// -- rendering ----------------------------------------------------------------------

void to_json(nlohmann::json& j, const settings_file_change& x);
void to_json(nlohmann::json& j, const settings_changed& x);
void to_json(nlohmann::json& j, const settings_error& x);
void to_json(nlohmann::json& j, const reconcile_started& x);
void to_json(nlohmann::json& j, const skipped_server& x);
void to_json(nlohmann::json& j, const server_error& x);
void to_json(nlohmann::json& j, const reconcile_finished& x);
void to_json(nlohmann::json& j, const client_update& x);
void to_json(nlohmann::json& j, const pending_approval_changed& x);
void to_json(nlohmann::json& j, const budget_warning& x);
void to_json(nlohmann::json& j, const refusal& x);
void to_json(nlohmann::json& j, const child_refused_batch& x);
void to_json(nlohmann::json& j, const pool_entry_restarted& x);
void to_json(nlohmann::json& j, const pool_entry_failed& x);

} // namespace events

/// One payload of every kind, in the order of event_kind. std::variant, not
/// caf::variant: the code around it visits with std::visit, and CAF 0.17's
/// variant raises (throws or aborts) on an unknown alternative from the
/// wire, where ours answers an error.
using event_payload =
  std::variant<events::settings_changed, events::settings_error, events::reconcile_started,
               events::reconcile_finished, events::client_update, events::pending_approval_changed,
               events::budget_warning, events::child_refused_batch, events::pool_entry_restarted,
               events::pool_entry_failed, events::resource_updated, events::resource_list_changed,
               events::elicitation_requested, events::sampling_requested, events::host_request_ended,
               events::call_progress, events::auth_required, events::server_log, events::disconnected,
               events::definitions_changed, events::sandbox_degraded, events::egress_refused>;

static_assert(std::variant_size_v<event_payload> == static_cast<std::size_t>(event_kind::egress_refused) + 1,
              "one payload per event kind, in the same order");

/// The kind of a payload.
inline event_kind kind_of(const event_payload& p) {
  return static_cast<event_kind>(p.index());
}

/// A default payload of `kind` (every member empty).
event_payload empty_payload(event_kind kind);

namespace events {

void to_json(nlohmann::json& j, const event_payload& p);

/// Selects the alternative by a tag read first (see inspect below).
struct payload_loader {
  uint8_t& tag;
  event_payload& x;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, payload_loader& l) {
  if (l.tag >= std::variant_size_v<event_payload>) {
    if constexpr (std::is_same<typename Inspector::result_type, void>::value)
      return;
    else
      return make_error(errc::protocol_error, "unknown event payload kind");
  }
  l.x = empty_payload(static_cast<event_kind>(l.tag));
  return std::visit([&](auto& alt) { return f(alt); }, l.x);
}

// The variant travels as a one-byte tag (its event_kind) and the
// alternative.
template <class Inspector>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, event_payload& x) {
  auto tag = static_cast<uint8_t>(x.index());
  return std::visit([&](auto& alt) { return f(caf::meta::type_name("mcprt.event_payload"), tag, alt); }, x);
}

template <class Inspector>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, event_payload& x) {
  uint8_t tag = 0;
  payload_loader loader{tag, x};
  return f(caf::meta::type_name("mcprt.event_payload"), tag, loader);
}

} // namespace events

/// An event: a kind, its typed payload, the payload as subscribers see it
/// (rendered once by the bus from `payload` with to_json), a bus-assigned
/// sequence number (monotonic, from 1) and the wall-clock time of
/// publication in milliseconds since the epoch.
struct event {
  uint64_t seq = 0;
  int64_t timestamp_ms = 0;
  event_kind kind = event_kind::client_update;
  event_payload payload{events::client_update{}};
  json_value data;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, event& x) {
  return f(caf::meta::type_name("mcprt.event"), x.seq, x.timestamp_ms, x.kind, x.payload, x.data);
}

} // namespace mcprt

// -- the subscriber interface -------------------------------------------------------------

namespace mcprt {

/// The EVENT SUBSCRIBER interface: receives bus events.
using event_subscriber_actor = caf::typed_actor<caf::reacts_to<event>>;

/// Registers the event type ids (add_mcprt_types calls it).
void add_event_types(caf::actor_system_config& cfg);

} // namespace mcprt

CAF_BEGIN_TYPE_ID_BLOCK(mcprt_events, caf::id_block::mcprt::end)
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::event_kind))
  CAF_ADD_TYPE_ID(mcprt_events, (std::vector<mcprt::event_kind>))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::settings_file_change))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::settings_changed))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::settings_error))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::reconcile_started))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::skipped_server))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::server_error))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::reconcile_finished))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::client_update))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::pending_approval_changed))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::budget_warning))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::refusal))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::child_refused_batch))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::pool_entry_restarted))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::pool_entry_failed))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::event_payload))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::event))
  CAF_ADD_TYPE_ID(mcprt_events, (std::vector<mcprt::event>))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::event_subscriber_actor))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::resource_updated))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::resource_list_changed))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::host_call))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::elicitation_requested))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::sampling_requested))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::host_request_ended))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::call_progress))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::auth_required))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::server_log))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::disconnected))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::definitions_changed))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::sandbox_degraded))
  CAF_ADD_TYPE_ID(mcprt_events, (mcprt::events::egress_refused))
CAF_END_TYPE_ID_BLOCK(mcprt_events)
