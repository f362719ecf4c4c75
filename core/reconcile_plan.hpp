#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/server_config.hpp"
#include "core/shared_names.hpp"

namespace mcprt {

/// What a live connection was started from, as far as the diff cares.
struct live_connection {
  std::string connection_id; // fingerprint of the transport
  std::string filter_key;    // trust / includeTools / excludeTools
};

/// The minimal set of changes that takes `live` to `desired`. Names in each
/// list are sorted. Apply `removed` and the disconnect half of `restarted`
/// first, so freed budget slots can be taken by `added` in the same pass.
struct reconcile_plan {
  std::vector<std::string> removed;    // live, no longer desired: disconnect
  std::vector<std::string> restarted;  // transport changed: disconnect, then connect
  std::vector<std::string> added;      // desired, not live: connect
  std::vector<std::string> refiltered; // only the tool filter or trust changed
  shared_names kept;                   // untouched: no disconnect, no gap in tools

  /// Connections the plan touches (everything but `kept` and `refiltered`).
  std::size_t touched() const { return removed.size() + restarted.size() + added.size(); }
  bool empty() const { return touched() == 0 && refiltered.empty(); }
};

reconcile_plan plan_reconcile(const server_map& desired,
                              const std::map<std::string, live_connection>& live);

/// The same plan when only the servers named in `touched` can differ
/// between desired and live (every other live server is desired, as it
/// runs): walks `touched` alone, and lists every other live server as kept.
/// Under that condition it equals plan_reconcile(desired, live).
/// `live_names` are live's names in order; the kept list is that array
/// less the touched names, shared, not copied: its cost follows the edit.
reconcile_plan plan_reconcile(const server_map& desired, const std::map<std::string, live_connection>& live,
                              const std::set<std::string>& touched,
                              std::shared_ptr<const std::vector<std::string>> live_names);

/// live's names in order, for the overload above.
std::shared_ptr<const std::vector<std::string>> names_of(const std::map<std::string, live_connection>& live);

} // namespace mcprt
