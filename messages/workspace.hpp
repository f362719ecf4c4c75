#pragma once

// Messages and interfaces of the workspace actors: the budget actor and the
// pool supervisor (the event bus is in messages/events.hpp). A type-id
// block chained after the event types.

#include <cstdint>
#include <string>
#include <vector>

#include "core/server_config.hpp"
#include "messages/events.hpp"
#include "messages/messages.hpp"

namespace mcprt {

// -- server configs in messages -------------------------------------------------

/// A server config travels as name, scope and spec; the receiver re-derives
/// the typed fields, so the wire form is exactly what the settings said.
template <class Inspector>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, server_config& x) {
  auto scope = to_string(x.scope);
  json_value spec{x.spec};
  return f(caf::meta::type_name("mcprt.server_config"), x.name, scope, x.source, spec);
}

template <class Inspector>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, server_config& x) {
  std::string scope;
  json_value spec;
  auto load = [&]() -> caf::error {
    auto s = parse_config_scope(scope).value_or(config_scope::user);
    auto source = x.source;
    auto parsed = parse_server_config(x.name, spec.value, s, {});
    if (!parsed.config) return make_error(errc::protocol_error, "bad server config in message");
    x = std::move(*parsed.config);
    x.source = std::move(source);
    return caf::none;
  };
  return f(caf::meta::type_name("mcprt.server_config"), x.name, scope, x.source, spec,
           caf::meta::load_callback(load));
}

// -- budget ------------------------------------------------------------------------

/// What the budget actor answers a reserve with (mirrors core's
/// reserve_result; kept apart so core stays free of CAF).
enum class reserve_reply : uint8_t { reserved, already_held, refused };

std::string to_string(reserve_reply r);

/// One budget cell of the snapshot (SPEC section 8).
struct budget_snapshot {
  std::string scope;       // "workspace" | "session"
  bool limited = false;    // false: no budget (unlimited)
  uint64_t budget = 0;
  std::string mode;        // off | warn | enforce
  std::vector<std::string> reserved;
  uint64_t reserved_count = 0;
  uint64_t live_count = 0;
  std::vector<std::string> refused;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, budget_snapshot& x) {
  return f(caf::meta::type_name("mcprt.budget_snapshot"), x.scope, x.limited, x.budget, x.mode,
           x.reserved, x.reserved_count, x.live_count, x.refused);
}

// -- pool ---------------------------------------------------------------------------

/// How the pool knows a session: a number, unique per runtime (the runtime
/// numbers its sessions; events name them). Not a string: every acquire and
/// detach carries it, and with two strings those messages outgrow the
/// allocator's lock-free size classes (see actors/scheduler.hpp).
using session_id = uint64_t;

/// The pool's two hot-path messages, each one struct: attach to a live
/// entry by connection id (answered with a pool_handle), and let go of a
/// handle without an answer. CAF 0.17 keeps type information per message
/// element: as (atom, session, id) these messages were 168 bytes, past
/// glibc's lock-free size classes (see actors/scheduler.hpp); as one struct
/// they are 128.
struct pool_attach {
  session_id session = 0;
  std::string connection_id;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_attach& x) {
  return f(caf::meta::type_name("mcprt.pool_attach"), x.session, x.connection_id);
}

struct pool_detach {
  session_id session = 0;
  std::string connection_id;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_detach& x) {
  return f(caf::meta::type_name("mcprt.pool_detach"), x.session, x.connection_id);
}

/// What an acquire hands a session: the live connection it shares.
struct pool_handle {
  std::string connection_id;
  connection_actor connection;
  uint64_t generation = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_handle& x) {
  return f(caf::meta::type_name("mcprt.pool_handle"), x.connection_id, x.connection, x.generation);
}

enum class pool_entry_status : uint8_t { spawning, active, draining, restarting, closed, failed };

std::string to_string(pool_entry_status s);

struct pool_entry_info {
  std::string id;
  std::string name;
  uint64_t refs = 0;
  pool_entry_status status = pool_entry_status::spawning;
  connection_status connection = connection_status::connecting;
  int32_t pid = -1;
  uint64_t restarts = 0;
  uint64_t generation = 0;
  std::string transport;
  std::string last_error;
  std::vector<std::string> stderr_tail;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_entry_info& x) {
  return f(caf::meta::type_name("mcprt.pool_entry_info"), x.id, x.name, x.refs, x.status, x.connection,
           x.pid, x.restarts, x.generation, x.transport, x.last_error, x.stderr_tail);
}

struct pool_snapshot {
  std::vector<pool_entry_info> entries;
  uint64_t subprocess_count = 0; // live stdio entries
  bool draining = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_snapshot& x) {
  return f(caf::meta::type_name("mcprt.pool_snapshot"), x.entries, x.subprocess_count, x.draining);
}

struct restart_result {
  std::string id;
  bool restarted = false;
  int64_t duration_ms = 0;
  std::string reason; // why not, when restarted is false
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, restart_result& x) {
  return f(caf::meta::type_name("mcprt.restart_result"), x.id, x.restarted, x.duration_ms, x.reason);
}

struct drain_result {
  uint64_t drained = 0;
  uint64_t forced = 0;
  std::vector<std::string> errors;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, drain_result& x) {
  return f(caf::meta::type_name("mcprt.drain_result"), x.drained, x.forced, x.errors);
}

} // namespace mcprt

// -- atoms ----------------------------------------------------------------------------

CAF_ADD_ATOM(mcprt, mcprt::atom, reserve, "reserve")
CAF_ADD_ATOM(mcprt, mcprt::atom, release, "release")
CAF_ADD_ATOM(mcprt, mcprt::atom, release_session, "rel_sess")
CAF_ADD_ATOM(mcprt, mcprt::atom, begin_pass, "begin_pass")
CAF_ADD_ATOM(mcprt, mcprt::atom, end_pass, "end_pass")
CAF_ADD_ATOM(mcprt, mcprt::atom, refused, "refused")
CAF_ADD_ATOM(mcprt, mcprt::atom, clear_refusal, "clear_ref")
CAF_ADD_ATOM(mcprt, mcprt::atom, snapshot, "snapshot")
CAF_ADD_ATOM(mcprt, mcprt::atom, acquire, "acquire")
CAF_ADD_ATOM(mcprt, mcprt::atom, restart, "restart")
CAF_ADD_ATOM(mcprt, mcprt::atom, drain, "drain")
CAF_ADD_ATOM(mcprt, mcprt::atom, live_count, "live_count")
CAF_ADD_ATOM(mcprt, mcprt::atom, get, "get")
CAF_ADD_ATOM(mcprt, mcprt::atom, detach, "detach")
// INTERNAL: pool timers.
CAF_ADD_ATOM(mcprt, mcprt::atom, drain_timer, "drain_tmr")
CAF_ADD_ATOM(mcprt, mcprt::atom, idle_timer, "idle_tmr")
CAF_ADD_ATOM(mcprt, mcprt::atom, restart_timer, "restart_tm")

namespace mcprt {

/// The BUDGET actor interface: the workspace budget (SPEC section 6). Every
/// answer is computed in one handler, so concurrent reserves cannot
/// overshoot.
using budget_actor = caf::typed_actor<
  caf::replies_to<atom::reserve, std::string>::with<reserve_reply>,
  // reserve(name, transport): a reserve whose outcome also settles the
  // name's refusal record in the same handler: a refusal is recorded (with
  // the transport), a reservation clears an earlier refusal. What a pool or
  // session does after every reserve, without two more messages.
  caf::replies_to<atom::reserve, std::string, std::string>::with<reserve_reply>,
  caf::replies_to<atom::release, std::string>::with<bool>,
  // begin_bulk_pass(preserve_refusals)
  caf::reacts_to<atom::begin_pass, bool>,
  caf::reacts_to<atom::end_pass>,
  // record_refusal(name, transport)
  caf::reacts_to<atom::refused, std::string, std::string>,
  caf::reacts_to<atom::clear_refusal, std::string>,
  // The connected count reported as live_count (session budgets only).
  caf::reacts_to<atom::live_count, uint64_t>,
  caf::replies_to<atom::snapshot>::with<budget_snapshot>>;

/// The POOL SUPERVISOR interface (SPEC section 7).
using pool_actor = caf::typed_actor<
  // acquire(session, config): a shared live connection, or budget_exhausted.
  caf::replies_to<atom::acquire, session_id, server_config>::with<pool_handle>,
  // Attaches to an existing entry by its connection id, without sending
  // its config again; not_connected when there is none.
  caf::replies_to<pool_attach>::with<pool_handle>,
  // release(session, connection id)
  caf::replies_to<atom::release, session_id, std::string>::with<bool>,
  // release without an answer: a session letting go needs no confirmation,
  // and messages from one sender arrive in order.
  caf::reacts_to<pool_detach>,
  // Releases everything a session holds; answers how many handles.
  caf::replies_to<atom::release_session, session_id>::with<uint64_t>,
  // Restarts every entry of a server name.
  caf::replies_to<atom::restart, std::string>::with<std::vector<restart_result>>,
  caf::replies_to<atom::snapshot>::with<pool_snapshot>,
  // The current connection of an entry (it changes when a crashed
  // connection is restarted); fails with not_connected for an unknown id.
  caf::replies_to<atom::get, std::string>::with<pool_handle>,
  // drain_all(force, timeout): closes everything, leaves no child.
  caf::replies_to<atom::drain, bool, caf::timespan>::with<drain_result>,
  // Status changes of the pool's own connections.
  caf::reacts_to<client_update>,
  // INTERNAL: timers (connection id, timer generation).
  caf::reacts_to<atom::drain_timer, std::string, uint64_t>,
  caf::reacts_to<atom::idle_timer, std::string, uint64_t>,
  caf::reacts_to<atom::restart_timer, std::string, uint64_t>>;

/// Registers the workspace type ids (call after add_mcprt_types).
void add_workspace_types(caf::actor_system_config& cfg);

} // namespace mcprt

CAF_BEGIN_TYPE_ID_BLOCK(mcprt_workspace, caf::id_block::mcprt_events::end)
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::server_config))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::reserve_reply))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::budget_snapshot))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_attach))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_detach))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_handle))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_entry_status))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_entry_info))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_snapshot))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::restart_result))
  CAF_ADD_TYPE_ID(mcprt_workspace, (std::vector<mcprt::restart_result>))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::drain_result))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::budget_actor))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_actor))
CAF_END_TYPE_ID_BLOCK(mcprt_workspace)
