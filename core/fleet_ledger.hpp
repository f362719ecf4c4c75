#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/budget_ledger.hpp"

namespace mcprt {

/// What the fleet ledger answers a node's reserve with.
enum class fleet_reserve_result { reserved, already_held, refused, recovering };

/// The fleet budget's books: server slots held by workspace
/// nodes, one slot per (node, server name), under one budget with the
/// workspace budget's rules (a budget_ledger keyed `name@node`: the same
/// warnings and refusal batches). Each node's holding is a lease: a node
/// renews it with the full list of what it holds; a node that stops
/// renewing loses its slots when the lease runs out.
///
/// A budget server that restarts knows nothing. For `claim_grace` after it
/// starts it grants nothing new (`recovering`) and adopts what renewing
/// nodes say they hold, even past the budget, so that running servers are
/// counted before new ones start: no overshoot from a restart.
///
/// Pure: times are milliseconds of a steady clock, passed in.
class fleet_ledger {
public:
  fleet_ledger(std::optional<std::size_t> budget, budget_mode mode, std::chrono::milliseconds lease,
               std::chrono::milliseconds claim_grace, int64_t now_ms);

  fleet_reserve_result reserve(const std::string& node, const std::string& name, int64_t now_ms,
                               std::vector<budget_event>& out);

  /// True when the node held the name (a slot went back).
  bool release(const std::string& node, const std::string& name);

  /// The node holds exactly `held`: names it no longer lists are released,
  /// new ones adopted; its lease runs `lease` from now. Names in `asking`
  /// are the node's reserves still unanswered when it sent the renewal:
  /// they are neither released nor adopted, since the reserve, sent before
  /// the renewal, was answered here before it and decided them. Returns
  /// how many slots went back.
  std::size_t renew(const std::string& node, const std::vector<std::string>& held,
                    const std::vector<std::string>& asking, int64_t now_ms, std::vector<budget_event>& out);

  /// Drops every node whose lease ran out by `now_ms`; returns their ids.
  std::vector<std::string> expire(int64_t now_ms);

  /// The expiry check that was due at `due_ms` runs at `now_ms`. When it
  /// runs more than a tenth of the lease late, the budget server itself
  /// was not running (descheduled, suspended, swapped): the renewals nodes
  /// sent meanwhile are still unread. Then nothing expires now; every
  /// lease is moved on by the delay and runs at least half a lease more,
  /// time enough to read them. At most once per lease, so that a server
  /// that is always late still expires leases. Otherwise the same as
  /// `expire(now_ms)`.
  std::vector<std::string> expire_due(int64_t due_ms, int64_t now_ms);
  /// Whether a check due at `due_ms` and run at `now_ms` moves the leases on.
  bool pardons(int64_t due_ms, int64_t now_ms) const {
    return now_ms - due_ms > lease_.count() / 10 && now_ms >= last_pardon_ms_ + lease_.count();
  }

  /// Whether the start-up grace still holds new reserves back.
  bool recovering(int64_t now_ms) const { return now_ms < grace_end_ms_; }
  int64_t grace_end_ms() const { return grace_end_ms_; }

  /// The earliest lease end, if any node holds a lease.
  std::optional<int64_t> next_expiry() const;

  std::chrono::milliseconds lease() const { return lease_; }
  std::size_t reserved_count() const { return slots_.reserved_count(); }
  std::size_t node_count() const { return nodes_.size(); }
  std::optional<std::size_t> budget() const { return slots_.budget(); }
  budget_mode mode() const { return slots_.mode(); }
  bool has_refusals() const { return slots_.has_refusals(); }

  struct node_state {
    std::set<std::string> held;
    int64_t lease_end_ms = 0;
  };
  const std::map<std::string, node_state>& nodes() const { return nodes_; }

  /// `name@node`: a slot's key in the budget ledger and in its events.
  /// Node ids hold no '@' (the budget server refuses them), so the key is
  /// unambiguous whatever the server name.
  static std::string slot_key(const std::string& node, const std::string& name);

private:
  budget_ledger slots_;
  std::chrono::milliseconds lease_;
  int64_t grace_end_ms_;
  int64_t last_pardon_ms_ = INT64_MIN / 2;
  std::map<std::string, node_state> nodes_;
};

} // namespace mcprt
