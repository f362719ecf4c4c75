#include "actors/budget.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <variant>
#include <vector>

#include <caf/all.hpp>

namespace mcprt {

namespace {

struct budget_state {
  static inline const char* name = "mcprt.budget";

  // Optional only because CAF default-constructs the state.
  std::optional<budget_ledger> ledger;
  event_bus_actor bus;
  /// Told when a slot goes back while refusals are on record.
  std::vector<budget_listener_actor> listeners;

  // -- the fleet (--fleet-budget) --
  fleet_link_actor fleet;
  /// Names the fleet granted and not released.
  std::set<std::string> fleet_held;
  struct waiter {
    caf::typed_response_promise<reserve_reply> rp;
    /// Set for reserve(name, transport): the outcome settles the refusal record.
    std::optional<std::string> transport;
  };
  /// Reserves waiting for the fleet's answer, by name.
  std::map<std::string, std::vector<waiter>> asking;
  /// Names released while the fleet was asked: its grant goes straight
  /// back, or the fleet would hold a slot no server uses, renewed forever.
  std::set<std::string> released_while_asking;
  /// end_pass messages held until the fleet has answered every reserve.
  std::size_t held_end_passes = 0;
};

using budget_self = budget_actor::stateful_pointer<budget_state>;

reserve_reply to_reply(reserve_result r) {
  switch (r) {
    case reserve_result::reserved: return reserve_reply::reserved;
    case reserve_result::already_held: return reserve_reply::already_held;
    case reserve_result::refused: return reserve_reply::refused;
  }
  return reserve_reply::refused;
}

/// Publishes what one ledger call produced, in order.
void publish_all(budget_self self, std::vector<budget_event>& out) {
  for (auto& ev : out)
    publish(self, self->state.bus, to_payload(ev));
  out.clear();
}

budget_snapshot snapshot_of(const budget_ledger& l) {
  budget_snapshot s;
  s.scope = l.scope();
  s.limited = l.budget().has_value();
  s.budget = l.budget().value_or(0);
  s.mode = to_string(l.mode());
  s.reserved = l.reserved();
  s.reserved_count = l.reserved_count();
  s.live_count = l.live_count();
  s.refused = l.last_refused();
  return s;
}

void notify_listeners(budget_self self, const std::string& name) {
  for (auto& l : self->state.listeners)
    self->send(l, budget_slot_freed{name});
}

void end_pass(budget_self self) {
  std::vector<budget_event> out;
  self->state.ledger->end_bulk_pass(out);
  publish_all(self, out);
}

std::string refusal_reason(fleet_grant g) {
  switch (g) {
    case fleet_grant::recovering: return "fleet_recovering";
    case fleet_grant::unreachable: return "fleet_unreachable";
    default: return "budget_exhausted";
  }
}

/// The fleet's answer to a reserve of `name`, for every reserve of it
/// waiting.
void settle(budget_self self, const std::string& name, fleet_grant g) {
  auto& st = self->state;
  auto i = st.asking.find(name);
  if (i == st.asking.end()) return;
  auto waiters = std::move(i->second);
  st.asking.erase(i);
  auto& ledger = *st.ledger;
  std::vector<budget_event> out;
  bool granted = g == fleet_grant::reserved || g == fleet_grant::already_held;
  if (st.released_while_asking.erase(name) != 0) {
    // Every waiter released before the answer came: nobody takes the slot.
    if (granted) self->send(st.fleet, atom::release_v, name);
    for (auto& w : waiters)
      w.rp.deliver(reserve_reply::refused);
  } else if (granted) {
    st.fleet_held.insert(name);
    ledger.clear_refusal(name);
  } else {
    ledger.release(name); // the local reservation made before asking
    for (auto& w : waiters)
      if (w.transport) {
        ledger.record_refusal(name, *w.transport, out, refusal_reason(g));
        break;
      }
  }
  publish_all(self, out);
  bool first = true;
  for (auto& w : waiters) {
    if (w.rp.pending())
      w.rp.deliver(granted ? (first ? reserve_reply::reserved : reserve_reply::already_held) : reserve_reply::refused);
    first = false;
  }
  if (st.asking.empty())
    for (; st.held_end_passes > 0; --st.held_end_passes)
      end_pass(self);
}

caf::result<reserve_reply> reserve(budget_self self, const std::string& name, std::optional<std::string> transport) {
  auto& st = self->state;
  auto& ledger = *st.ledger;
  std::vector<budget_event> out;
  if (st.fleet && st.fleet_held.count(name) != 0) return reserve_reply::already_held;
  if (st.fleet) {
    if (auto i = st.asking.find(name); i != st.asking.end()) {
      if (st.released_while_asking.count(name) != 0) {
        // The name is wanted again: it needs its local slot back, and then
        // the answer on its way is its own.
        if (ledger.reserve(name, out) == reserve_result::refused) {
          if (transport) ledger.record_refusal(name, *transport, out);
          publish_all(self, out);
          return reserve_reply::refused;
        }
        publish_all(self, out);
        st.released_while_asking.erase(name);
      }
      auto rp = self->make_response_promise<reserve_reply>();
      i->second.push_back({rp, std::move(transport)});
      return rp;
    }
  }
  auto r = ledger.reserve(name, out);
  if (r == reserve_result::refused || !st.fleet) {
    if (transport) {
      if (r == reserve_result::refused)
        ledger.record_refusal(name, *transport, out);
      else
        ledger.clear_refusal(name);
    }
    publish_all(self, out);
    return to_reply(r);
  }
  publish_all(self, out);
  auto rp = self->make_response_promise<reserve_reply>();
  st.asking[name].push_back({rp, std::move(transport)});
  // The link answers every reserve itself (unreachable when it cannot ask).
  self->request(st.fleet, caf::infinite, atom::reserve_v, name)
    .then([self, name](fleet_grant g) { settle(self, name, g); },
          [self, name](const caf::error&) { settle(self, name, fleet_grant::unreachable); });
  return rp;
}

budget_actor::behavior_type budget_behavior(budget_self self, std::optional<std::size_t> limit,
                                            budget_mode mode, std::string scope, event_bus_actor bus,
                                            fleet_link_actor fleet) {
  self->state.ledger.emplace(limit, mode, std::move(scope));
  self->state.bus = std::move(bus);
  if (fleet) {
    self->state.ledger->record_outside_refusals();
    self->send(fleet, atom::subscribe_v, caf::actor_cast<fleet_listener_actor>(self));
    self->state.fleet = std::move(fleet);
  }
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& ls = self->state.listeners;
    ls.erase(std::remove_if(ls.begin(), ls.end(), [&](const auto& l) { return l.address() == dm.source; }), ls.end());
  });
  return {
    [self](atom::reserve, const std::string& name) { return reserve(self, name, std::nullopt); },
    [self](atom::reserve, const std::string& name, const std::string& transport) {
      return reserve(self, name, transport);
    },
    [self](atom::release, const std::string& name) {
      auto& st = self->state;
      auto freed = st.ledger->release(name);
      if (st.fleet && st.asking.count(name) != 0) st.released_while_asking.insert(name);
      if (st.fleet && st.fleet_held.erase(name) != 0) {
        self->send(st.fleet, atom::release_v, name);
        freed = true;
      }
      // Only when someone waits for room: a release with no refusal on
      // record would wake every session for nothing.
      if (freed && st.ledger->has_refusals()) notify_listeners(self, name);
      return freed;
    },
    [self](atom::fleet_free) {
      if (self->state.ledger->has_refusals()) notify_listeners(self, "");
    },
    [self](atom::subscribe, budget_listener_actor& l) {
      auto& ls = self->state.listeners;
      if (!l || std::find(ls.begin(), ls.end(), l) != ls.end()) return;
      self->monitor(l);
      ls.push_back(std::move(l));
    },
    [self](atom::begin_pass, bool preserve_refusals) {
      self->state.ledger->begin_bulk_pass(preserve_refusals);
    },
    [self](atom::end_pass) {
      // A pass's refusals go out as one batch: the fleet's answers to its
      // reserves come first.
      if (!self->state.asking.empty()) {
        ++self->state.held_end_passes;
        return;
      }
      end_pass(self);
    },
    [self](atom::refused, const std::string& name, const std::string& transport) {
      std::vector<budget_event> out;
      self->state.ledger->record_refusal(name, transport, out);
      publish_all(self, out);
    },
    [self](atom::clear_refusal, const std::string& name) {
      self->state.ledger->clear_refusal(name);
    },
    [self](atom::live_count, uint64_t n) {
      self->state.ledger->set_live_count(static_cast<std::size_t>(n));
    },
    [self](atom::snapshot) { return snapshot_of(*self->state.ledger); },
  };
}

} // namespace

budget_actor spawn_budget(caf::actor_system& sys, std::optional<std::size_t> budget,
                          budget_mode mode, std::string scope, event_bus_actor bus, fleet_link_actor fleet) {
  return sys.spawn(budget_behavior, budget, mode, std::move(scope), std::move(bus), std::move(fleet));
}

} // namespace mcprt
