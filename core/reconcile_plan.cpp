#include "core/reconcile_plan.hpp"

#include "core/fingerprint.hpp"

namespace mcprt {

reconcile_plan plan_reconcile(const server_map& desired,
                              const std::map<std::string, live_connection>& live) {
  reconcile_plan plan;
  // Both maps are sorted by name: one merge walk.
  auto d = desired.begin();
  auto l = live.begin();
  while (d != desired.end() || l != live.end()) {
    if (l == live.end() || (d != desired.end() && d->first < l->first)) {
      plan.added.push_back(d->first);
      ++d;
    } else if (d == desired.end() || l->first < d->first) {
      plan.removed.push_back(l->first);
      ++l;
    } else {
      if (connection_id(d->second) != l->second.connection_id)
        plan.restarted.push_back(d->first);
      else if (filter_key(d->second) != l->second.filter_key)
        plan.refiltered.push_back(d->first);
      else
        plan.kept.push_back(d->first);
      ++d;
      ++l;
    }
  }
  return plan;
}

} // namespace mcprt
