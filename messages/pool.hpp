#pragma once

// The pool's contract: the connection factory it starts connections with,
// the messages it takes and the notifications it sends its holders, and the
// `pool_actor` interface. Two executors implement it: the shared pool
// supervisor (pool/pool_supervisor.hpp) and the kill switch's private pool
// (pool/private_pool.hpp). The reconciler talks to this interface only.
//
// Its type ids are registered in the workspace block (messages/workspace.hpp).

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/client_features.hpp"
#include "core/fingerprint.hpp"
#include "core/sandbox_policy.hpp"
#include "core/server_config.hpp"
#include "messages/connection.hpp"
#include "messages/event_bus.hpp"
#include "messages/messages.hpp"
#include "messages/state.hpp"

// -- atoms ----------------------------------------------------------------------------

CAF_ADD_ATOM(mcprt, mcprt::atom, snapshot, "snapshot")
CAF_ADD_ATOM(mcprt, mcprt::atom, release_session, "rel_sess")
CAF_ADD_ATOM(mcprt, mcprt::atom, drain, "drain")

namespace mcprt {

// -- server configs in messages -------------------------------------------------

/// A server config travels as name, scope and spec; the receiver re-derives
/// the typed fields, so the wire form is exactly what the settings said.
template <class Inspector>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, server_config& x) {
  auto scope = to_string(x.scope);
  json_value spec{x.spec};
  // The sandbox comes from the settings around the entry, not the entry.
  json_value sandbox{x.effective_sandbox.to_json()};
  return f(caf::meta::type_name("mcprt.server_config"), x.name, scope, x.source, spec, sandbox);
}

template <class Inspector>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, server_config& x) {
  std::string scope;
  json_value spec;
  json_value sandbox;
  auto load = [&]() -> caf::error {
    auto s = parse_config_scope(scope).value_or(config_scope::user);
    auto source = x.source;
    auto parsed = parse_server_config(x.name, spec.value, s, {});
    if (!parsed.config) return make_error(errc::protocol_error, "bad server config in message");
    x = std::move(*parsed.config);
    x.source = std::move(source);
    auto setting = sandbox_setting_from_json(sandbox.value);
    if (!setting) return make_error(errc::protocol_error, "bad sandbox setting in message");
    x.effective_sandbox = std::move(*setting);
    if (!x.effective_sandbox.key().empty()) x.connection_id_cache = compute_connection_id(x);
    return caf::none;
  };
  return f(caf::meta::type_name("mcprt.server_config"), x.name, scope, x.source, spec, sandbox,
           caf::meta::load_callback(load));
}

// -- starting connections -----------------------------------------------------------

/// What a connection actor is started with.
struct connection_config {
  server_config server;
  uint64_t generation = 1;
  std::vector<event_sink_actor> subscribers;
  /// Lines of server stderr kept for errors and snapshots.
  std::size_t stderr_lines = 50;
  /// Roots and elicitation offered to the server (core/client_features).
  client_features features;
  /// Where resource notifications go as events (invalid: nowhere).
  event_bus_actor bus;
  /// Where sampling and `ask` elicitations go (the runtime's host bridge);
  /// invalid: nobody answers, so `features` must not offer them.
  host_handler_actor host;
  /// A stdio server's sandbox, paths resolved (core/sandbox_policy); unset:
  /// none.
  std::optional<sandbox_plan> sandbox;
};

/// Starts a connection for a config; the real one is
/// `[io](auto& sys, auto cfg) { return spawn_connection(sys, std::move(cfg), io); }`
/// (actors/connection.hpp). Injectable so tests can use fakes.
using connection_factory = std::function<connection_actor(caf::actor_system&, connection_config)>;

// -- identities -------------------------------------------------------------------------

/// How the pool knows a session: a number, unique per runtime (the runtime
/// numbers its sessions; events name them). Not a string: every attach and
/// detach carries it, and with two strings those messages outgrow the
/// allocator's lock-free size classes (see mcprt/scheduler.hpp).
using session_id = uint64_t;

/// The server name in a connection id (`name::fingerprint`).
inline std::string_view server_of_connection_id(std::string_view id) {
  // Ids the pool issues end in "::" and 16 hex digits: no search needed.
  constexpr std::size_t suffix = 2 + 16;
  if (id.size() >= suffix && id[id.size() - suffix] == ':' && id[id.size() - suffix + 1] == ':')
    return id.substr(0, id.size() - suffix);
  auto pos = id.rfind("::");
  return pos == std::string_view::npos ? id : id.substr(0, pos);
}

// -- requests ---------------------------------------------------------------------------
//
// Every request that concerns one server is a struct with a `shard_key`: the
// server name. A sharded pool routes by it, and a request type without one
// does not compile into the router. Requests that concern every server
// (release_session, snapshot, drain) are atom messages, asked of every shard.

/// The holder interface: a session that holds pool handles learns what
/// happens to their entries (the reconciler implements it).
struct pool_entry_changed;
using pool_holder_actor = caf::typed_actor<caf::reacts_to<pool_entry_changed>>;

/// Acquire a shared live connection for `config` (answered with a
/// pool_handle once it is connected, or budget_exhausted / spawn_failed).
/// `holder` (may be invalid) is told when the entry fails, restarts or
/// closes while the session holds it.
struct pool_acquire {
  session_id session = 0;
  server_config config;
  pool_holder_actor holder;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_acquire& x) {
  return f(caf::meta::type_name("mcprt.pool_acquire"), x.session, x.config, x.holder);
}

inline std::string_view shard_key(const pool_acquire& x) {
  return x.config.name;
}

/// The pool's two hot-path messages, each one struct: attach to a live
/// entry by connection id (answered with a pool_handle), and let go of a
/// handle without an answer. CAF 0.17 keeps type information per message
/// element: as (atom, session, id) these messages were 168 bytes, past
/// glibc's lock-free size classes (see mcprt/scheduler.hpp); as one struct
/// they are 128.
struct pool_attach {
  session_id session = 0;
  std::string connection_id;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_attach& x) {
  return f(caf::meta::type_name("mcprt.pool_attach"), x.session, x.connection_id);
}

inline std::string_view shard_key(const pool_attach& x) {
  return server_of_connection_id(x.connection_id);
}

/// Why a session lets go of a handle. The last holder's reason decides what
/// happens to the entry: a closed session drains it (that session or
/// another may come back for it); a config that no longer wants it closes
/// it at once, so its process stops and its budget slot is free at once.
enum class release_reason : uint8_t {
  session_closed, // drain
  removed,        // deleted, excluded, disabled or rejected in the settings: close now
  changed,        // its config changed (a new fingerprint replaces it): close now
};

std::string to_string(release_reason r);

struct pool_detach {
  session_id session = 0;
  std::string connection_id;
  release_reason reason = release_reason::session_closed;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_detach& x) {
  return f(caf::meta::type_name("mcprt.pool_detach"), x.session, x.connection_id, x.reason);
}

inline std::string_view shard_key(const pool_detach& x) {
  return server_of_connection_id(x.connection_id);
}

/// Restarts every entry of a server name.
struct pool_restart {
  std::string server;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_restart& x) {
  return f(caf::meta::type_name("mcprt.pool_restart"), x.server);
}

inline std::string_view shard_key(const pool_restart& x) {
  return x.server;
}

/// The current connection of an entry (it changes when a crashed
/// connection is restarted); fails with not_connected for an unknown id.
struct pool_lookup {
  std::string connection_id;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_lookup& x) {
  return f(caf::meta::type_name("mcprt.pool_lookup"), x.connection_id);
}

inline std::string_view shard_key(const pool_lookup& x) {
  return server_of_connection_id(x.connection_id);
}

/// Status changes of the pool's own connections arrive as client_update
/// (messages/messages.hpp), keyed by their server.
inline std::string_view shard_key(const client_update& x) {
  return x.server;
}

/// INTERNAL: a pool timer ran out. Acts only if `token` is still the
/// entry's current token for that timer.
enum class pool_timer_kind : uint8_t { drain, idle, restart };

struct pool_timer {
  pool_timer_kind kind = pool_timer_kind::drain;
  std::string connection_id;
  uint64_t token = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_timer& x) {
  return f(caf::meta::type_name("mcprt.pool_timer"), x.kind, x.connection_id, x.token);
}

inline std::string_view shard_key(const pool_timer& x) {
  return server_of_connection_id(x.connection_id);
}

// -- answers ----------------------------------------------------------------------------

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

/// What happened to an entry a session holds.
enum class pool_entry_event : uint8_t {
  restarting, // it crashed; the pool restarts it after a backoff
  restarted,  // connected again (after a crash or a manual restart)
  failed,     // given up after its restart limit: the handle is dead
  closed,     // closed under the holder (the pool drains): the handle is dead
};

std::string to_string(pool_entry_event e);

/// Sent to every holder of an entry when its status changes. A holder of a
/// `failed` or `closed` entry holds nothing any more (no release needed).
struct pool_entry_changed {
  std::string connection_id;
  std::string server;
  pool_entry_event what = pool_entry_event::restarting;
  uint64_t generation = 0;
  std::string error; // why it crashed / failed; empty otherwise
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_entry_changed& x) {
  return f(caf::meta::type_name("mcprt.pool_entry_changed"), x.connection_id, x.server, x.what,
           x.generation, x.error);
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

// -- the interface ------------------------------------------------------------------

/// The POOL interface: what a session's connections are acquired from.
using pool_actor = caf::typed_actor<
  // One server each (routed by shard_key):
  caf::replies_to<pool_acquire>::with<pool_handle>,
  // Attaches to an existing entry by its connection id, without sending
  // its config again; not_connected when there is none.
  caf::replies_to<pool_attach>::with<pool_handle>,
  // Lets go of one handle without an answer: a session letting go needs no
  // confirmation, and messages from one sender arrive in order.
  caf::reacts_to<pool_detach>,
  caf::replies_to<pool_restart>::with<std::vector<restart_result>>,
  caf::replies_to<pool_lookup>::with<pool_handle>,
  caf::reacts_to<client_update>,
  caf::reacts_to<pool_timer>,
  // Every server (asked of every shard):
  // Releases everything a session holds (as session_closed) and forgets its
  // holder; answers how many handles it held.
  caf::replies_to<atom::release_session, session_id>::with<uint64_t>,
  caf::replies_to<atom::snapshot>::with<pool_snapshot>,
  // drain_all(force, timeout): closes everything, leaves no child.
  caf::replies_to<atom::drain, bool, caf::timespan>::with<drain_result>>;

} // namespace mcprt
