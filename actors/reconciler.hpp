#pragma once

#include <chrono>
#include <string>

#include <caf/fwd.hpp>

#include "messages/session.hpp"
#include "pool/pool_supervisor.hpp"

namespace mcprt {

struct reconciler_options {
  /// The session's name in events ("s1").
  std::string session;
  /// How the pool knows the session (unique per runtime).
  session_id pool_session = 0;
  /// Pool mode when valid: connections are acquired from and released to
  /// the pool, which admits new ones through the workspace budget.
  pool_actor pool;
  /// Pool mode: the workspace budget, only to bracket each pass in a bulk
  /// pass (refusals of one pass come as one batch). Kill-switch mode: the
  /// session budget, which admits each new connection. May be invalid.
  budget_actor budget;
  /// Kill-switch mode (no pool): starts the session's own connections.
  connection_factory make;
  event_bus_actor bus;
  std::chrono::milliseconds acquire_timeout{120000};
};

/// Spawns the reconciler of one session (SPEC section 5). It keeps the
/// latest `desired_state` from the gating actor and, on `reconcile`, runs a
/// pass: plan (core/reconcile_plan) the admitted servers against its live
/// connections; release the removed and the changed ones first, then
/// acquire the added and the changed ones; re-filter filter-only edits
/// without reconnecting. A request during a pass sets a dirty flag; when the
/// pass ends exactly one more pass runs on the latest state. Nothing runs
/// before `start`, nor in an untrusted folder.
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
