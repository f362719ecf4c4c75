#pragma once

// INTERNAL (not installed): the event bus's interface, how actors publish
// on it, and what the bus does to a payload before subscribers see it.

#include <functional>
#include <string>
#include <utility>

#include "core/budget_ledger.hpp"
#include "messages/connection.hpp"
#include "messages/events.hpp"

CAF_ADD_ATOM(mcprt, mcprt::atom, publish, "publish")
CAF_ADD_ATOM(mcprt, mcprt::atom, unsubscribe, "unsubscr")
CAF_ADD_ATOM(mcprt, mcprt::atom, replay, "replay")

namespace mcprt {

namespace events {

/// A connection's status change, as the connection reported it.
client_update of(const mcprt::client_update& u);

/// The budget ledger's events as bus payloads.
budget_warning of(const budget_warning_event& e);
child_refused_batch of(const refused_batch_event& e);

} // namespace events

/// The budget ledger's event as a bus payload.
event_payload to_payload(const budget_event& e);

/// What the bus does to every typed payload before a subscriber sees it:
/// invalid UTF-8 in any string is replaced by U+FFFD, and internal
/// connection ids (client_update's connection_id, the pool events' id) are
/// shown through `show` (when set). May throw only what `show` or the
/// allocator throws.
void make_publishable(event_payload& p, const std::function<std::string(const std::string&)>& show);

/// The EVENT BUS actor interface.
using event_bus_actor = caf::typed_actor<
  // Publishes a typed event; the bus stamps sequence number and time.
  caf::reacts_to<atom::publish, event_payload>,
  // Subscribes (empty kinds: all kinds); answers the last sequence number
  // published so far. Subscribers are monitored and dropped when they die.
  caf::replies_to<atom::subscribe, event_subscriber_actor, std::vector<event_kind>>::with<uint64_t>,
  caf::reacts_to<atom::unsubscribe, event_subscriber_actor>,
  // Events with seq > the given one still in the bounded replay ring.
  caf::replies_to<atom::replay, uint64_t>::with<std::vector<event>>>;

/// Publishes `payload` on `bus` from actor `self`; nothing when `bus` is
/// invalid (an actor spawned without a bus drops its events).
template <class Self, class Payload>
void publish(Self* self, const event_bus_actor& bus, Payload&& payload) {
  if (bus) self->send(bus, atom::publish_v, event_payload{std::forward<Payload>(payload)});
}

} // namespace mcprt

CAF_BEGIN_TYPE_ID_BLOCK(mcprt_event_bus, caf::id_block::mcprt_connection::end)
  CAF_ADD_TYPE_ID(mcprt_event_bus, (mcprt::event_bus_actor))
CAF_END_TYPE_ID_BLOCK(mcprt_event_bus)
