#include "actors/budget.hpp"

#include <algorithm>
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
};

using self_ptr = budget_actor::stateful_pointer<budget_state>;

reserve_reply to_reply(reserve_result r) {
  switch (r) {
    case reserve_result::reserved: return reserve_reply::reserved;
    case reserve_result::already_held: return reserve_reply::already_held;
    case reserve_result::refused: return reserve_reply::refused;
  }
  return reserve_reply::refused;
}

/// Publishes what one ledger call produced, in order.
void publish_all(self_ptr self, std::vector<budget_event>& out) {
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

budget_actor::behavior_type budget_behavior(self_ptr self, std::optional<std::size_t> limit,
                                            budget_mode mode, std::string scope, event_bus_actor bus) {
  self->state.ledger.emplace(limit, mode, std::move(scope));
  self->state.bus = std::move(bus);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& ls = self->state.listeners;
    ls.erase(std::remove_if(ls.begin(), ls.end(), [&](const auto& l) { return l.address() == dm.source; }), ls.end());
  });
  return {
    [self](atom::reserve, const std::string& name) {
      std::vector<budget_event> out;
      auto r = self->state.ledger->reserve(name, out);
      publish_all(self, out);
      return to_reply(r);
    },
    [self](atom::reserve, const std::string& name, const std::string& transport) {
      std::vector<budget_event> out;
      auto& ledger = *self->state.ledger;
      auto r = ledger.reserve(name, out);
      if (r == reserve_result::refused)
        ledger.record_refusal(name, transport, out);
      else
        ledger.clear_refusal(name);
      publish_all(self, out);
      return to_reply(r);
    },
    [self](atom::release, const std::string& name) {
      auto& st = self->state;
      auto freed = st.ledger->release(name);
      // Only when someone waits for room: a release with no refusal on
      // record would wake every session for nothing.
      if (freed && st.ledger->has_refusals())
        for (auto& l : st.listeners)
          self->send(l, budget_slot_freed{name});
      return freed;
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
      std::vector<budget_event> out;
      self->state.ledger->end_bulk_pass(out);
      publish_all(self, out);
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
                          budget_mode mode, std::string scope, event_bus_actor bus) {
  return sys.spawn(budget_behavior, budget, mode, std::move(scope), std::move(bus));
}

} // namespace mcprt
