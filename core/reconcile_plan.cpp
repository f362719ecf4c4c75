#include "core/reconcile_plan.hpp"

#include <algorithm>

#include "core/fingerprint.hpp"

namespace mcprt {

namespace {

/// A server both desired and live: restarted (its transport changed),
/// refiltered, or kept (returns true).
bool classify(reconcile_plan& plan, const std::string& name, const server_config& cfg, const live_connection& l) {
  bool moved = cfg.connection_id_cache.empty() ? connection_id(cfg) != l.connection_id
                                                : cfg.connection_id_cache != l.connection_id;
  if (moved)
    plan.restarted.push_back(name);
  else if ((cfg.filter_key_cache.empty() ? filter_key(cfg) : cfg.filter_key_cache) != l.filter_key)
    plan.refiltered.push_back(name);
  else
    return true;
  return false;
}

} // namespace

std::shared_ptr<const std::vector<std::string>> names_of(const std::map<std::string, live_connection>& live) {
  std::vector<std::string> out;
  out.reserve(live.size());
  for (auto& [name, l] : live)
    out.push_back(name);
  return std::make_shared<const std::vector<std::string>>(std::move(out));
}

reconcile_plan plan_reconcile(const server_map& desired, const std::map<std::string, live_connection>& live,
                              const std::set<std::string>& touched,
                              std::shared_ptr<const std::vector<std::string>> live_names) {
  reconcile_plan plan;
  // Touched, live and not kept: the exceptions to the array of live names.
  std::vector<std::string> moved;
  for (auto& name : touched) {
    auto l = live.find(name);
    auto d = desired.find(name);
    if (d == desired.end()) {
      if (l != live.end()) {
        plan.removed.push_back(name);
        moved.push_back(name);
      }
    } else if (l == live.end()) {
      plan.added.push_back(name);
    } else if (!classify(plan, name, d->second, l->second)) {
      moved.push_back(name);
    }
  }
  plan.kept = shared_names(std::move(live_names), std::move(moved));
  return plan;
}

reconcile_plan plan_reconcile(const server_map& desired,
                              const std::map<std::string, live_connection>& live) {
  reconcile_plan plan;
  std::vector<std::string> kept;
  // Almost everything is kept on a typical pass: one allocation, not twenty.
  kept.reserve(std::min(desired.size(), live.size()));
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
      if (classify(plan, d->first, d->second, l->second)) kept.push_back(d->first);
      ++d;
      ++l;
    }
  }
  plan.kept = shared_names(std::move(kept));
  return plan;
}

} // namespace mcprt
