#include "core/reconcile_plan.hpp"

#include <algorithm>

#include "core/fingerprint.hpp"

namespace mcprt {

namespace {

/// A server both desired and live: restarted, refiltered or kept.
void classify(reconcile_plan& plan, const std::string& name, const server_config& cfg, const live_connection& l) {
  bool moved = cfg.connection_id_cache.empty() ? connection_id(cfg) != l.connection_id
                                                : cfg.connection_id_cache != l.connection_id;
  if (moved)
    plan.restarted.push_back(name);
  else if ((cfg.filter_key_cache.empty() ? filter_key(cfg) : cfg.filter_key_cache) != l.filter_key)
    plan.refiltered.push_back(name);
  else
    plan.kept.push_back(name);
}

} // namespace

std::vector<std::string> names_of(const std::map<std::string, live_connection>& live) {
  std::vector<std::string> out;
  out.reserve(live.size());
  for (auto& [name, l] : live)
    out.push_back(name);
  return out;
}

reconcile_plan plan_reconcile(const server_map& desired, const std::map<std::string, live_connection>& live,
                              const std::set<std::string>& touched, const std::vector<std::string>& live_names) {
  reconcile_plan plan;
  plan.kept.reserve(live_names.size());
  auto n = live_names.begin();
  auto t = touched.begin();
  while (n != live_names.end() || t != touched.end()) {
    if (t == touched.end() || (n != live_names.end() && *n < *t)) {
      plan.kept.push_back(*n);
      ++n;
      continue;
    }
    auto& name = *t;
    if (n != live_names.end() && *n == name) ++n;
    auto l = live.find(name);
    auto d = desired.find(name);
    if (d == desired.end()) {
      if (l != live.end()) plan.removed.push_back(name);
    } else if (l == live.end()) {
      plan.added.push_back(name);
    } else {
      classify(plan, name, d->second, l->second);
    }
    ++t;
  }
  return plan;
}

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
      classify(plan, d->first, d->second, l->second);
      ++d;
      ++l;
    }
  }
  return plan;
}

} // namespace mcprt
