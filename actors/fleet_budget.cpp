#include "actors/fleet_budget.hpp"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/fleet_ledger.hpp"

namespace mcprt {

namespace {

using fleet_budget_impl = fleet_budget_actor::extend<caf::reacts_to<atom::tick>, caf::reacts_to<atom::fleet_free>>;

/// Node labels and server names come from other processes: bounded, so
/// that a peer cannot grow the books without end. A node's key never holds
/// '@', so a slot's key `name@node` cannot name another node's slot.
constexpr std::size_t max_name_bytes = 512;
constexpr std::size_t max_held_per_node = 100000;
constexpr std::size_t max_nodes = 4096;

bool acceptable(const std::string& node, const std::string& name) {
  return !node.empty() && !name.empty() && node.size() <= max_name_bytes && name.size() <= max_name_bytes &&
         node.find('@') == std::string::npos;
}

struct fleet_budget_state {
  static inline const char* name = "mcprt.fleet_budget";

  // Optional only because CAF default-constructs the state.
  std::optional<fleet_ledger> ledger;
  /// Each node's link, from its latest renewal.
  std::map<std::string, fleet_listener_actor> links;
  /// The name each node gives itself, shown in the snapshot.
  std::map<std::string, std::string> labels;
  bool ticking = false;
  /// When the armed expiry check is due (steady-clock milliseconds).
  int64_t tick_due_ms = 0;
};

using fleet_budget_self = fleet_budget_impl::stateful_pointer<fleet_budget_state>;

/// The key of the node that sent the message being handled: its CAF node
/// and the actor that sent it (the node's link), as the connection carries
/// them. The name a node sends only labels it, so one node cannot reserve,
/// renew or release for another by naming it. Empty for a message with no
/// sender (refused).
std::string sender_key(fleet_budget_self self) {
  const auto& sender = self->current_sender();
  if (!sender) return {};
  auto key = caf::to_string(sender->node()) + "/" + std::to_string(sender->id());
  for (auto& c : key)
    if (c == '@') c = '_';
  return key;
}

/// The sender's key when it may act: a known node, or room for a new one.
std::string admitted_key(fleet_budget_self self, const std::string& label) {
  auto key = sender_key(self);
  if (key.empty() || !acceptable(label, "-")) return {};
  auto& st = self->state;
  if (!st.ledger->nodes().count(key) && st.ledger->node_count() >= max_nodes) return {};
  return key;
}

/// Keeps the label of a node while the ledger knows it.
void remember_label(fleet_budget_self self, const std::string& key, const std::string& label) {
  if (self->state.ledger->nodes().count(key) > 0) self->state.labels[key] = label;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

void log_events(std::vector<budget_event>& out) {
  for (auto& ev : out) {
    if (auto w = std::get_if<budget_warning_event>(&ev)) {
      spdlog::warn("fleet budget: {} of {} slots reserved", w->reserved_count, w->budget);
    } else if (auto b = std::get_if<refused_batch_event>(&ev)) {
      std::string names;
      for (auto& r : b->refused)
        names += (names.empty() ? "" : ", ") + r.name;
      spdlog::warn("fleet budget: refused {} (all {} slots reserved)", names, b->budget);
    }
  }
  out.clear();
}

void tell_all(fleet_budget_self self) {
  for (auto& [node, link] : self->state.links)
    self->send(link, atom::fleet_free_v);
}

void slots_went_back(fleet_budget_self self, std::size_t n) {
  if (n > 0 && self->state.ledger->has_refusals()) tell_all(self);
}

/// One timer at a time, for the earliest lease end.
void arm(fleet_budget_self self) {
  auto& st = self->state;
  if (st.ticking) return;
  auto next = st.ledger->next_expiry();
  if (!next) return;
  st.ticking = true;
  auto now = now_ms();
  auto wait = std::max<int64_t>(*next - now, 0) + 1;
  st.tick_due_ms = now + wait;
  self->delayed_send(self, std::chrono::milliseconds(wait), atom::tick_v);
}

fleet_budget_impl::behavior_type fleet_budget_behavior(fleet_budget_self self, fleet_budget_options opts) {
  self->state.ledger.emplace(opts.budget, opts.mode, opts.lease, opts.claim_grace, now_ms());
  if (opts.claim_grace.count() > 0)
    // Nodes refused during the grace try again when it ends.
    self->delayed_send(self, opts.claim_grace, atom::fleet_free_v);
  return {
    [self](atom::reserve, const std::string& label, const std::string& name) {
      auto node = admitted_key(self, label);
      if (node.empty() || !acceptable(node, name)) return fleet_grant::refused;
      std::vector<budget_event> out;
      auto r = self->state.ledger->reserve(node, name, now_ms(), out);
      remember_label(self, node, label);
      log_events(out);
      arm(self);
      switch (r) {
        case fleet_reserve_result::reserved: return fleet_grant::reserved;
        case fleet_reserve_result::already_held: return fleet_grant::already_held;
        case fleet_reserve_result::refused: return fleet_grant::refused;
        case fleet_reserve_result::recovering: return fleet_grant::recovering;
      }
      return fleet_grant::refused;
    },
    [self](atom::release, const std::string& label, const std::string& name) {
      auto node = admitted_key(self, label);
      if (node.empty() || !acceptable(node, name)) return;
      slots_went_back(self, self->state.ledger->release(node, name) ? 1 : 0);
    },
    [self](atom::renew, const std::string& label, const std::vector<std::string>& held,
           const std::vector<std::string>& asking, fleet_listener_actor link) {
      auto& st = self->state;
      auto node = admitted_key(self, label);
      std::vector<budget_event> out;
      auto acceptable_names = [&](const std::vector<std::string>& names) {
        std::vector<std::string> kept;
        if (names.size() <= max_held_per_node)
          for (auto& name : names)
            if (acceptable(node, name)) kept.push_back(name);
        return kept;
      };
      auto freed = acceptable(node, "-")
                     ? st.ledger->renew(node, acceptable_names(held), acceptable_names(asking), now_ms(), out)
                     : 0;
      remember_label(self, node, label);
      log_events(out);
      if (link && acceptable(node, "-")) st.links[node] = std::move(link);
      slots_went_back(self, freed);
      arm(self);
      auto& l = *st.ledger;
      fleet_info info;
      info.limited = l.budget().has_value();
      info.budget = l.budget().value_or(0);
      info.mode = to_string(l.mode());
      info.reserved_count = l.reserved_count();
      info.nodes = l.node_count();
      info.lease_ms = static_cast<uint64_t>(l.lease().count());
      return info;
    },
    [self](atom::tick) {
      auto& st = self->state;
      st.ticking = false;
      auto before = st.ledger->reserved_count();
      auto now = now_ms();
      if (st.ledger->pardons(st.tick_due_ms, now))
        spdlog::info("fleet budget: the lease check ran {} ms late; every lease is moved on", now - st.tick_due_ms);
      for (auto& node : st.ledger->expire_due(st.tick_due_ms, now)) {
        spdlog::warn("fleet budget: node {} did not renew its lease; its slots go back", st.labels[node]);
        st.links.erase(node);
        st.labels.erase(node);
      }
      slots_went_back(self, before - st.ledger->reserved_count());
      arm(self);
    },
    [self](atom::fleet_free) {
      // The start-up grace is over.
      tell_all(self);
    },
    [self](atom::snapshot) {
      auto& l = *self->state.ledger;
      auto now = now_ms();
      nlohmann::json nodes = nlohmann::json::object();
      for (auto& [id, n] : l.nodes()) {
        // Keyed by the name the node gives itself; two nodes giving one
        // name are told apart by their connection.
        auto label = self->state.labels.count(id) ? self->state.labels.at(id) : id;
        auto shown = nodes.contains(label) ? label + " [" + id + "]" : label;
        nodes[shown] = {{"held", n.held}, {"lease_left_ms", std::max<int64_t>(n.lease_end_ms - now, 0)}, {"connection", id}};
      }
      nlohmann::json out = {{"budget", l.budget() ? nlohmann::json(*l.budget()) : nlohmann::json(nullptr)},
                            {"mode", to_string(l.mode())},
                            {"reserved_count", l.reserved_count()},
                            {"lease_ms", l.lease().count()},
                            {"recovering", l.recovering(now)},
                            {"nodes", std::move(nodes)}};
      return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    },
  };
}

} // namespace

fleet_budget_actor spawn_fleet_budget(caf::actor_system& sys, fleet_budget_options opts) {
  return caf::actor_cast<fleet_budget_actor>(sys.spawn(fleet_budget_behavior, std::move(opts)));
}

} // namespace mcprt
