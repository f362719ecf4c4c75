#pragma once

#include <chrono>
#include <string>

#include <caf/fwd.hpp>

#include "messages/hot_reload.hpp"
#include "messages/pool.hpp"

namespace mcprt {

struct reconciler_options {
  /// The session's name in events ("s1").
  std::string session;
  /// How the pool knows the session (unique per runtime).
  session_id pool_session = 0;
  /// Where the session's connections come from: the workspace pool, or
  /// under the kill switch the session's private pool.
  pool_actor pool;
  /// The budget the pool admits through (workspace or session), to bracket
  /// each pass in a bulk pass (refusals of one pass come as one batch) and
  /// to hear when a slot frees. May be invalid.
  budget_actor budget;
  event_bus_actor bus;
  /// Where the listings of servers whose definitions are pinned are
  /// reported (definitions_offered). May be invalid: nothing is reported.
  gating_actor gating;
  std::chrono::milliseconds acquire_timeout{120000};
  /// A server whose pool entry failed is acquired again after a backoff
  /// (backoff_delay(failures - 1, base, cap, jitter 0.1)).
  std::chrono::milliseconds retry_base{1000};
  std::chrono::milliseconds retry_cap{30000};
};

/// Spawns the reconciler of one session. It keeps the latest
/// `desired_state` from the gating actor and, on `reconcile`, runs a pass:
/// plan (core/reconcile_plan) the admitted servers against its live
/// connections; release the removed and the changed ones first (with that
/// reason, so the pool closes them at once), then acquire the added and the
/// changed ones; re-filter filter-only edits without reconnecting. After a
/// delta of the desired state the plan walks only the servers it named
/// (the rest of live is kept); it walks everything after a whole state and
/// whenever live may have drifted (a connection lost, a retry or budget
/// slot due, a pass that left servers out). A
/// request during a pass sets a dirty flag; when the pass ends exactly one
/// more pass runs on the latest state. Nothing runs before `start`, nor in
/// an untrusted folder.
///
/// Level-triggered, like a controller requeueing a key: when the pool says
/// an entry the session holds failed or closed, the server leaves the live
/// set and a pass after its backoff acquires it again; when the budget says
/// a slot freed, a session with servers refused for budget runs a pass.
///
/// Events: `reconcile_started` {session, generation}, `reconcile_finished`
/// {session, generation, added, removed, restarted, refiltered, kept,
/// skipped: [{name, reason}], errors: [{name, error}]}, `client_update`
/// {session, server, status: "disconnected", reason} for every connection the
/// session lets go and {session, server, status, tools, refiltered: true} for
/// a re-filter, and after every pass `pending_approval_changed` {promptable}
/// when servers await approval or the list changed since it was last told.
reconciler_actor spawn_reconciler(caf::actor_system& sys, reconciler_options opts);

} // namespace mcprt
