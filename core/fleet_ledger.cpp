#include "core/fleet_ledger.hpp"

#include <algorithm>

namespace mcprt {

fleet_ledger::fleet_ledger(std::optional<std::size_t> budget, budget_mode mode, std::chrono::milliseconds lease,
                           std::chrono::milliseconds claim_grace, int64_t now_ms)
  : slots_(budget, mode, "fleet"), lease_(lease), grace_end_ms_(now_ms + claim_grace.count()) {
}

std::string fleet_ledger::slot_key(const std::string& node, const std::string& name) {
  return name + "@" + node;
}

fleet_reserve_result fleet_ledger::reserve(const std::string& node, const std::string& name, int64_t now_ms,
                                           std::vector<budget_event>& out) {
  auto key = slot_key(node, name);
  if (slots_.is_held(key)) return fleet_reserve_result::already_held;
  auto& n = nodes_[node];
  n.lease_end_ms = std::max(n.lease_end_ms, now_ms + lease_.count());
  if (recovering(now_ms)) {
    if (n.held.empty()) nodes_.erase(node);
    return fleet_reserve_result::recovering;
  }
  auto r = slots_.reserve(key, out);
  if (r == reserve_result::refused) {
    slots_.record_refusal(key, "", out);
    if (n.held.empty()) nodes_.erase(node);
    return fleet_reserve_result::refused;
  }
  slots_.clear_refusal(key);
  n.held.insert(name);
  return fleet_reserve_result::reserved;
}

bool fleet_ledger::release(const std::string& node, const std::string& name) {
  auto i = nodes_.find(node);
  if (i == nodes_.end() || i->second.held.erase(name) == 0) return false;
  slots_.release(slot_key(node, name));
  return true;
}

std::size_t fleet_ledger::renew(const std::string& node, const std::vector<std::string>& held,
                                const std::vector<std::string>& asking, int64_t now_ms,
                                std::vector<budget_event>& out) {
  auto& n = nodes_[node];
  n.lease_end_ms = now_ms + lease_.count();
  std::set<std::string> listed(held.begin(), held.end());
  std::set<std::string> undecided(asking.begin(), asking.end());
  std::size_t freed = 0;
  for (auto i = n.held.begin(); i != n.held.end();) {
    if (listed.count(*i) != 0 || undecided.count(*i) != 0) {
      ++i;
      continue;
    }
    slots_.release(slot_key(node, *i));
    i = n.held.erase(i);
    ++freed;
  }
  for (auto& name : listed)
    if (undecided.count(name) == 0 && n.held.insert(name).second) slots_.adopt(slot_key(node, name), out);
  return freed;
}

std::vector<std::string> fleet_ledger::expire(int64_t now_ms) {
  std::vector<std::string> gone;
  for (auto i = nodes_.begin(); i != nodes_.end();) {
    if (i->second.lease_end_ms > now_ms) {
      ++i;
      continue;
    }
    for (auto& name : i->second.held)
      slots_.release(slot_key(i->first, name));
    gone.push_back(i->first);
    i = nodes_.erase(i);
  }
  return gone;
}

std::vector<std::string> fleet_ledger::expire_due(int64_t due_ms, int64_t now_ms) {
  if (!pardons(due_ms, now_ms)) return expire(now_ms);
  last_pardon_ms_ = now_ms;
  for (auto& [id, n] : nodes_)
    n.lease_end_ms = std::max(n.lease_end_ms + (now_ms - due_ms), now_ms + lease_.count() / 2);
  return {};
}

std::optional<int64_t> fleet_ledger::next_expiry() const {
  std::optional<int64_t> first;
  for (auto& [id, n] : nodes_)
    if (!first || n.lease_end_ms < *first) first = n.lease_end_ms;
  return first;
}

} // namespace mcprt
