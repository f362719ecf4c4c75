#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "core/budget_mode.hpp"

namespace mcprt {

enum class reserve_result { reserved, already_held, refused };

std::string to_string(reserve_result r);

/// A budget read from a flag or `MCPRT_BUDGET`: exactly one of the two is set.
struct budget_parse_result {
  std::optional<std::size_t> value;
  std::string error;
};

/// Accepts only plain positive decimal integers (surrounding whitespace is
/// ignored). Hex, exponents, fractions, signs, 0 and overflow are errors,
/// so a typo can never silently become "unlimited" or a tiny cap.
budget_parse_result parse_budget_value(std::string_view text);

struct refused_server {
  std::string name;
  std::string transport;
  std::string reason = "budget_exhausted";
};

bool operator==(const refused_server& a, const refused_server& b);

struct budget_warning_event {
  std::string scope;
  std::size_t budget = 0;
  budget_mode mode = budget_mode::warn;
  std::size_t reserved_count = 0;
  std::size_t live_count = 0;
  double threshold_ratio = budget_warn_fraction;
};

struct refused_batch_event {
  std::string scope;
  std::size_t budget = 0;
  budget_mode mode = budget_mode::enforce;
  std::size_t reserved_count = 0;
  std::size_t live_count = 0;
  std::vector<refused_server> refused;
};

using budget_event = std::variant<budget_warning_event, refused_batch_event>;

/// The workspace (or session) budget of server slots, keyed by server name.
/// Pure state machine: operations append the events they cause to `out`
/// instead of publishing them, so the owning actor decides delivery and the
/// rules can be tested without an actor system. Budget and mode are fixed
/// for the ledger's lifetime.
class budget_ledger {
public:
  /// `budget` of none means unlimited, which behaves like `off`.
  budget_ledger(std::optional<std::size_t> budget, budget_mode mode,
                std::string scope = "workspace");

  // -- slots ----------------------------------------------------------------

  /// Order of checks: already held (no state change), untracked (`off` or
  /// unlimited), refused (`enforce` and full; nothing is recorded, the
  /// caller decides whether to `record_refusal`), else reserved. `warn` may
  /// go past the budget. May append a `budget_warning_event`.
  reserve_result reserve(const std::string& name, std::vector<budget_event>& out);

  /// Holds `name` even when the budget is full: a server that already runs
  /// (a fleet node's claim after the budget server restarted). Warns as
  /// reserve does; never refuses.
  reserve_result adopt(const std::string& name, std::vector<budget_event>& out);

  /// Returns true iff `name` was held. Releasing can only re-arm the
  /// warning (it stayed armed only below the threshold), never fire it, so
  /// there is nothing to emit.
  bool release(const std::string& name);

  // -- refusals -------------------------------------------------------------

  /// No-op unless enforcing. Outside a bulk pass it appends a batch of one
  /// at once; inside one it queues until the outermost pass ends. An empty
  /// `transport` is reported as "unknown".
  void record_refusal(const std::string& name, const std::string& transport,
                      std::vector<budget_event>& out, std::string reason = "budget_exhausted");

  /// Refusals are recorded even when this ledger does not enforce: another
  /// budget (the fleet's) refuses for it.
  void record_outside_refusals() { outside_refusals_ = true; }

  /// Passes nest. A pass that is not `preserve_refusals` (a full discovery)
  /// forgets the previous refusals when it starts, not when they were
  /// emitted, so a snapshot between passes still shows them. It does so at
  /// any depth: a full discovery overlapping a partial recovery re-decides
  /// every server.
  void begin_bulk_pass(bool preserve_refusals = false);

  /// Only the outermost end emits: one batch of the servers refused during
  /// the pass, and only if there are any. At depth 0 it does nothing.
  void end_bulk_pass(std::vector<budget_event>& out);

  /// Forgets a refusal once the server got a slot after all. Emits nothing,
  /// so clearing the last refusal never produces an empty batch.
  void clear_refusal(const std::string& name);

  // -- observers ------------------------------------------------------------

  budget_mode mode() const { return mode_; }
  std::optional<std::size_t> budget() const { return budget_; }
  const std::string& scope() const { return scope_; }

  /// Held names in reservation order. Built on demand (snapshots) and
  /// cached until the next change; reserve/release never pay for it.
  const std::vector<std::string>& reserved() const;
  std::size_t reserved_count() const { return held_.size(); }
  bool is_held(const std::string& name) const { return held_.count(name) != 0; }

  /// Whether someone is waiting for room: refusals pending in a pass or
  /// emitted in the last batches and not cleared since.
  bool has_refusals() const { return !pending_.empty() || !last_refused_.empty(); }

  /// Names refused by the last emitted batches, in refusal order.
  const std::vector<std::string>& last_refused() const { return last_refused_; }

  std::size_t bulk_depth() const { return bulk_depth_; }

  /// The `live_count` reported in events. A session budget sets its
  /// connected count here; by default (none) it is the reserved count, as
  /// the workspace budget reports.
  void set_live_count(std::optional<std::size_t> n) { live_count_ = n; }
  std::size_t live_count() const { return live_count_.value_or(held_.size()); }

private:
  bool tracking() const { return mode_ != budget_mode::off && budget_.has_value(); }
  bool enforcing() const { return mode_ == budget_mode::enforce && budget_.has_value(); }
  /// Advances the warning hysteresis; true when the warning fires.
  bool update_warning();
  reserve_result hold(const std::string& name, std::vector<budget_event>& out);
  void flush_refusals(std::vector<budget_event>& out);

  std::optional<std::size_t> budget_;
  budget_mode mode_;
  std::string scope_;
  /// Held names -> reservation sequence number: reserve, release and
  /// is_held are O(1), so the budget actor's per-message cost does not grow
  /// with the budget. Nodes of released names are kept (up to a bound) and
  /// reused, so a steady reserve/release cycle does not allocate.
  using held_map = std::unordered_map<std::string, uint64_t>;
  held_map held_;
  std::vector<held_map::node_type> spare_;
  uint64_t next_seq_ = 0;
  mutable std::vector<std::string> reserved_cache_;
  mutable bool reserved_dirty_ = false;
  bool warning_armed_ = true;
  bool outside_refusals_ = false;
  std::size_t bulk_depth_ = 0;
  std::optional<std::size_t> live_count_;
  /// Refused in the current pass, not yet emitted.
  std::vector<refused_server> pending_;
  std::vector<std::string> last_refused_;
  /// The names in last_refused_, so that recording a refusal is O(1).
  std::unordered_set<std::string> last_refused_set_;
};

} // namespace mcprt
