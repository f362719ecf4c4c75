#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/server_config.hpp"

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
  std::vector<std::string> kept;       // untouched: no disconnect, no gap in tools

  /// Connections the plan touches (everything but `kept` and `refiltered`).
  std::size_t touched() const { return removed.size() + restarted.size() + added.size(); }
  bool empty() const { return touched() == 0 && refiltered.empty(); }
};

reconcile_plan plan_reconcile(const server_map& desired,
                              const std::map<std::string, live_connection>& live);

} // namespace mcprt
