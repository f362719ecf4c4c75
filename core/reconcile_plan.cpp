#include "core/reconcile_plan.hpp"

#include <algorithm>

#include "core/fingerprint.hpp"

namespace mcprt {

reconcile_plan plan_reconcile(const server_map& desired,
                              const std::map<std::string, live_connection>& live) {
  reconcile_plan plan;
  // Almost everything is kept on a typical pass: one allocation, not twenty.
  plan.kept.reserve(std::min(desired.size(), live.size()));
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
      auto& cfg = d->second;
      bool moved = cfg.connection_id_cache.empty() ? connection_id(cfg) != l->second.connection_id
                                                    : cfg.connection_id_cache != l->second.connection_id;
      if (moved)
        plan.restarted.push_back(d->first);
      else if ((cfg.filter_key_cache.empty() ? filter_key(cfg) : cfg.filter_key_cache) != l->second.filter_key)
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
