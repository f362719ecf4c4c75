#include "actors/event_bus.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "core/event_payload.hpp"

namespace mcprt {

namespace {

struct subscriber {
  event_subscriber_actor sink;
  std::vector<event_kind> kinds; // empty: every kind

  bool wants(event_kind k) const {
    return kinds.empty() || std::find(kinds.begin(), kinds.end(), k) != kinds.end();
  }
};

struct event_bus_state {
  static inline const char* name = "mcprt.event_bus";

  std::size_t capacity = 1024;
  std::function<std::string(const std::string&)> show_connection_id;
  uint64_t last_seq = 0;
  int64_t last_timestamp_ms = 0;
  std::deque<event> ring;
  // In subscription order, so delivery order is deterministic.
  std::vector<subscriber> subscribers;

  std::vector<subscriber>::iterator find(const caf::actor_addr& addr) {
    return std::find_if(subscribers.begin(), subscribers.end(),
                        [&](const subscriber& s) { return s.sink.address() == addr; });
  }
};

using event_bus_self = event_bus_actor::stateful_pointer<event_bus_state>;

int64_t event_time_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

constexpr const char* dropped_payload = "payload dropped: it could not be made safe to publish";

/// A typed payload made what subscribers may see, and its one rendering.
nlohmann::json render_publishable(event_bus_state& st, event_payload& payload) {
  try {
    mcprt::make_publishable(payload, st.show_connection_id);
    nlohmann::json data = payload;
    // The typed value is already safe; this keeps the rendering's own
    // guarantee (no invalid UTF-8, bounded depth) independent of it.
    make_payload_safe(data);
    return data;
  } catch (...) {
    payload = empty_payload(kind_of(payload));
    return nlohmann::json{{"error", dropped_payload}};
  }
}

void deliver_event(event_bus_self self, event ev) {
  auto& st = self->state;
  ev.seq = ++st.last_seq;
  // Wall-clock time, but never going backwards when the clock is set back.
  ev.timestamp_ms = std::max(event_time_ms(), st.last_timestamp_ms);
  st.last_timestamp_ms = ev.timestamp_ms;
  for (auto& s : st.subscribers)
    if (s.wants(ev.kind)) self->send(s.sink, ev);
  if (st.capacity == 0) return;
  if (st.ring.size() == st.capacity) st.ring.pop_front();
  st.ring.push_back(std::move(ev));
}

void publish_payload(event_bus_self self, event_payload& payload) {
  event ev;
  ev.kind = kind_of(payload);
  ev.data.value = render_publishable(self->state, payload);
  ev.payload = std::move(payload);
  deliver_event(self, std::move(ev));
}

event_bus_actor::behavior_type event_bus(event_bus_self self, event_bus_options opts) {
  self->state.capacity = opts.replay_capacity;
  self->state.show_connection_id = std::move(opts.show_connection_id);
  // A dead subscriber is dropped; its pending events are simply lost.
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& subs = self->state.subscribers;
    subs.erase(std::remove_if(subs.begin(), subs.end(),
                              [&](const subscriber& s) { return s.sink.address() == dm.source; }),
               subs.end());
  });
  return {
    [self](atom::publish, event_payload& payload) {
      // Nothing a publisher sends may end the bus (CAF 0.17 ends an actor
      // on any exception from a handler): at worst this one event is lost.
      try {
        publish_payload(self, payload);
      } catch (...) {
      }
    },
    [self](atom::subscribe, event_subscriber_actor& sink,
           std::vector<event_kind>& kinds) -> uint64_t {
      auto& st = self->state;
      if (!sink) return st.last_seq;
      auto i = st.find(sink.address());
      if (i != st.subscribers.end()) {
        i->kinds = std::move(kinds);
      } else {
        self->monitor(sink);
        st.subscribers.push_back(subscriber{std::move(sink), std::move(kinds)});
      }
      return st.last_seq;
    },
    [self](atom::unsubscribe, const event_subscriber_actor& sink) {
      auto& st = self->state;
      auto i = st.find(sink.address());
      if (i == st.subscribers.end()) return;
      self->demonitor(sink.address());
      st.subscribers.erase(i);
    },
    [self](atom::replay, uint64_t after_seq) {
      auto& ring = self->state.ring;
      // The ring is ordered by seq: skip to the first newer event.
      auto first = std::find_if(ring.begin(), ring.end(),
                                [&](const event& e) { return e.seq > after_seq; });
      return std::vector<event>(first, ring.end());
    },
  };
}

} // namespace

event_bus_actor spawn_event_bus(caf::actor_system& sys, std::size_t replay_capacity) {
  event_bus_options opts;
  opts.replay_capacity = replay_capacity;
  return spawn_event_bus(sys, std::move(opts));
}

event_bus_actor spawn_event_bus(caf::actor_system& sys, event_bus_options opts) {
  return sys.spawn(event_bus, std::move(opts));
}

} // namespace mcprt
