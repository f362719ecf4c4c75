#pragma once

// Messages and interfaces of the hot-reload actors: the settings watcher, the
// gating actor and the per-session reconciler. A type-id block of its own, chained
// after the workspace block.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/definition_pins.hpp"
#include "messages/state.hpp"
#include "messages/workspace.hpp"

namespace mcprt {

// -- watcher → gating -------------------------------------------------------------

enum class file_change : uint8_t { created, modified, deleted };

std::string to_string(file_change c);

/// The last good content of one settings file. The content travels as JSON;
/// the receiver re-derives servers and lists from it.
struct settings_file {
  std::string path;
  std::string scope; // user | project | workspace | session (top tier)
  bool exists = false;
  json_value content;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, settings_file& x) {
  return f(caf::meta::type_name("mcprt.settings_file"), x.path, x.scope, x.exists, x.content);
}

/// One file's change within a drained batch: the changed leaf key paths, and
/// whether it appeared, changed or went away.
struct settings_change {
  std::string path;
  std::string scope;
  file_change change = file_change::modified;
  std::vector<std::string> keys;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, settings_change& x) {
  return f(caf::meta::type_name("mcprt.settings_change"), x.path, x.scope, x.change, x.keys);
}

/// What the watcher hands the gating actor: the changes of one batch and the
/// last good content of every settings file. `forced` marks an explicit
/// reload, which reconciles even when nothing changed.
struct settings_update {
  uint64_t batch = 0;
  std::vector<settings_change> changes;
  std::vector<settings_file> files;
  bool forced = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, settings_update& x) {
  return f(caf::meta::type_name("mcprt.settings_update"), x.batch, x.changes, x.files, x.forced);
}

// -- gating → reconciler -----------------------------------------------------------

/// What one session should run, as the gating actor computed it: the
/// admitted servers (settings layers, workspace top tier and the session's
/// own servers), why every other configured server is out, the gating lists
/// (pushed before any reconcile reads them) and the strictly pending servers.
///
/// With `delta` set, `admitted` holds only the servers added or changed since
/// the session's previous state and `withdrawn` names those no longer
/// admitted: an edit of one server among 10,000 sends one config, not
/// 10,000, and the session plans only what the edit touched. A session's
/// first state, and every state of a session with servers of its own, is
/// whole (`delta` false). The other fields are always whole.
struct desired_state {
  uint64_t revision = 0;
  bool trusted = true;
  bool delta = false;
  std::vector<server_config> admitted;
  std::vector<std::string> withdrawn;
  std::vector<unavailability> unavailable;
  std::vector<std::string> promptable;
  // gating lists: `has_allowed` false means allow all.
  bool has_allowed = false;
  std::vector<std::string> allowed;
  std::vector<std::string> excluded;
  std::vector<std::string> pending;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, desired_state& x) {
  return f(caf::meta::type_name("mcprt.desired_state"), x.revision, x.trusted, x.delta, x.admitted, x.withdrawn,
           x.unavailable, x.promptable, x.has_allowed, x.allowed, x.excluded, x.pending);
}

// -- definitions pinned at approval (core/definition_pins) -------------------------

/// gating → reconciler: whether `server`'s definitions are pinned, and
/// what was pinned under its approval (config) hash so far. Sent to every
/// session when it changes, and whole when a session attaches.
struct definition_pin_state {
  std::string server;
  std::string hash;
  bool on = false;
  definition_pins pins;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, definition_pin_state& x) {
  return f(caf::meta::type_name("mcprt.definition_pin_state"), x.server, x.hash, x.on, x.pins);
}

/// reconciler → gating: a listing of `server` as its connection offers it
/// (one kind, `kind` a pins_key), compared with the pins under `hash`
/// (`changes`: describe_changes, empty when it is what was pinned). Sent
/// when a session sees a listing of that server it did not report yet.
struct definitions_offered {
  std::string server;
  std::string hash;
  std::string kind;
  kind_pins listing;
  std::string digest;
  std::string changes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, definitions_offered& x) {
  return f(caf::meta::type_name("mcprt.definitions_offered"), x.server, x.hash, x.kind, x.listing, x.digest,
           x.changes);
}

} // namespace mcprt

// -- atoms ---------------------------------------------------------------------------------

CAF_ADD_ATOM(mcprt, mcprt::atom, fs_event, "fs_event")
CAF_ADD_ATOM(mcprt, mcprt::atom, debounce, "debounce")
CAF_ADD_ATOM(mcprt, mcprt::atom, reload, "reload")
CAF_ADD_ATOM(mcprt, mcprt::atom, approve, "approve")
CAF_ADD_ATOM(mcprt, mcprt::atom, reject, "reject")
CAF_ADD_ATOM(mcprt, mcprt::atom, reason, "reason")
CAF_ADD_ATOM(mcprt, mcprt::atom, config, "config")
CAF_ADD_ATOM(mcprt, mcprt::atom, attach, "attach")
CAF_ADD_ATOM(mcprt, mcprt::atom, reconcile, "reconcile")
CAF_ADD_ATOM(mcprt, mcprt::atom, start, "start")
CAF_ADD_ATOM(mcprt, mcprt::atom, lookup, "lookup")
CAF_ADD_ATOM(mcprt, mcprt::atom, tools, "tools")
CAF_ADD_ATOM(mcprt, mcprt::atom, requeue, "requeue")

namespace mcprt {

/// The RECONCILER interface: one per session; it brings the session's live
/// connections in line with the admitted servers (actors/reconciler.hpp).
using reconciler_actor = caf::typed_actor<
  // The new desired state (lists first), then a reconcile request.
  caf::reacts_to<desired_state>,
  // Requests a pass; during a pass it only sets the dirty flag.
  caf::reacts_to<atom::reconcile>,
  // The runtime has started: passes may run from now on.
  caf::reacts_to<atom::start>,
  // lookup(server, tool) → the connection a call of that tool goes to
  // (empty tool: a client request no tool filter applies to). Answered at
  // once for a live server, once its acquire ends for one connecting (or
  // before the session's first desired state); fails with errc::unavailable
  // (reason and remedy), errc::not_connected, errc::unknown_server or
  // errc::unknown_tool. The calls themselves are the call broker's.
  caf::replies_to<atom::lookup, std::string, std::string>::with<connection_actor>,
  // The session's tools of one server, after its tool filter.
  caf::replies_to<atom::tools, std::string>::with<std::vector<tool_info>>,
  // What the session's connection to a server knows (tools after the
  // session's filter, capabilities): the gateway's view of it.
  caf::replies_to<atom::info, std::string>::with<connection_info>,
  caf::replies_to<atom::snapshot>::with<session_snapshot>,
  // Releases every connection of the session, then quits.
  caf::replies_to<atom::stop>::with<bool>,
  // What happened to a pool entry the session holds (from its pool).
  caf::reacts_to<pool_entry_changed>,
  // A budget slot went back: servers refused for budget are retried.
  caf::reacts_to<budget_slot_freed>,
  // Whether a server's definitions are pinned, and its pins (from gating).
  caf::reacts_to<definition_pin_state>,
  // INTERNAL: a server's backoff after a failure ran out.
  caf::reacts_to<atom::requeue>>;

/// The GATING actor interface: it layers the settings, decides per server
/// whether it is admitted (allow-lists, exclusions, approvals, trust) and
/// hands each session its desired state.
using gating_actor = caf::typed_actor<
  // A drained batch of the watcher (or an explicit reload).
  caf::reacts_to<settings_update>,
  // approve / reject(name): persists the decision for the current config
  // hash and reconciles. Fails with errc::unknown_server or errc::not_gated.
  caf::replies_to<atom::approve, std::string>::with<bool>,
  caf::replies_to<atom::reject, std::string>::with<bool>,
  // Why `name` is unavailable; an empty reason when it is admitted or was
  // never configured.
  caf::replies_to<atom::reason, std::string>::with<unavailability>,
  // The workspace's admitted config of `name` (for `mcprt auth`). Fails
  // with errc::unknown_server, or errc::unavailable saying why it is kept out.
  caf::replies_to<atom::config, std::string>::with<server_config>,
  // A session joins with its own top-tier servers / leaves.
  caf::reacts_to<atom::attach, reconciler_actor, std::vector<server_config>>,
  caf::reacts_to<atom::detach, reconciler_actor>,
  // The runtime has started: reconcile every attached session.
  caf::reacts_to<atom::start>,
  // Something happened next to the approvals store (from the inotify
  // adapter, or injected by tests); INTERNAL: its debounce ran out.
  caf::reacts_to<atom::fs_event, std::string>,
  caf::reacts_to<atom::debounce, uint64_t>,
  caf::replies_to<atom::snapshot>::with<gating_snapshot>,
  // A session saw a listing of a pinned server: the first after its
  // approval is pinned, a different one is held back and reported.
  caf::reacts_to<definitions_offered>>;

/// The WATCHER actor interface: it watches the settings files, debounces
/// bursts of changes and forwards the last good content of every file.
using watcher_actor = caf::typed_actor<
  // Something happened at `path` in a watched directory (from the inotify
  // adapter, or injected by tests).
  caf::reacts_to<atom::fs_event, std::string>,
  // Reads every file now and forwards the state even when unchanged.
  caf::replies_to<atom::reload>::with<bool>,
  // The last good content of every settings file.
  caf::replies_to<atom::snapshot>::with<std::vector<settings_file>>,
  // INTERNAL: the debounce timer of burst `token` ran out.
  caf::reacts_to<atom::debounce, uint64_t>>;

/// Registers the session type ids (call after add_workspace_types).
void add_hot_reload_types(caf::actor_system_config& cfg);

} // namespace mcprt

CAF_BEGIN_TYPE_ID_BLOCK(mcprt_hot_reload, caf::id_block::mcprt_workspace::end)
  CAF_ADD_TYPE_ID(mcprt_hot_reload, (mcprt::file_change))
  CAF_ADD_TYPE_ID(mcprt_hot_reload, (mcprt::settings_file))
  CAF_ADD_TYPE_ID(mcprt_hot_reload, (std::vector<mcprt::settings_file>))
  CAF_ADD_TYPE_ID(mcprt_hot_reload, (mcprt::settings_change))
  CAF_ADD_TYPE_ID(mcprt_hot_reload, (mcprt::settings_update))
  CAF_ADD_TYPE_ID(mcprt_hot_reload, (mcprt::desired_state))
  CAF_ADD_TYPE_ID(mcprt_hot_reload, (std::vector<mcprt::server_config>))
  CAF_ADD_TYPE_ID(mcprt_hot_reload, (mcprt::definition_pin_state))
  CAF_ADD_TYPE_ID(mcprt_hot_reload, (mcprt::definitions_offered))
  CAF_ADD_TYPE_ID(mcprt_hot_reload, (mcprt::reconciler_actor))
  CAF_ADD_TYPE_ID(mcprt_hot_reload, (mcprt::gating_actor))
  CAF_ADD_TYPE_ID(mcprt_hot_reload, (mcprt::watcher_actor))
CAF_END_TYPE_ID_BLOCK(mcprt_hot_reload)
