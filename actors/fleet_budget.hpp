#pragma once

#include <chrono>
#include <cstddef>
#include <optional>

#include <caf/fwd.hpp>

#include "core/budget_ledger.hpp"
#include "messages/fleet.hpp"

namespace mcprt {

struct fleet_budget_options {
  /// None: unlimited (counts, never refuses).
  std::optional<std::size_t> budget;
  budget_mode mode = budget_mode::enforce;
  /// A node that does not renew within this loses its slots.
  std::chrono::milliseconds lease{10000};
  /// After start, how long only claims are taken (core/fleet_ledger.hpp).
  std::chrono::milliseconds claim_grace{1500};
};

/// Spawns the budget server's actor (`mcprt budget-server`): a thin shell
/// around core/fleet_ledger. Warnings and refusal batches are logged as the
/// workspace budget publishes them. Every node's link is told `fleet_free`
/// when a slot goes back while refusals are on record, and when the
/// start-up grace ends.
fleet_budget_actor spawn_fleet_budget(caf::actor_system& sys, fleet_budget_options opts);

} // namespace mcprt
