#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include <caf/fwd.hpp>

#include "messages/workspace.hpp"

namespace mcprt {

/// Spawns the workspace event bus: every typed event (settings, reconcile,
/// client, approval, budget and pool events) goes through it to the
/// subscribers, and no payload carries a secret (`env` or `headers` values).
///
/// - `publish(payload)` (one of the structs of messages/events.hpp; the
///   kind follows from it) stamps the event with the next sequence number
///   (monotonic, from 1) and the wall-clock time in milliseconds (never
///   earlier than the previous event's), renders the payload once with its
///   `to_json` into `event::data`, keeps the event in a ring of the last
///   `replay_capacity` events and sends it to every subscriber whose kind
///   filter matches (an empty filter matches every kind). Delivery is a plain
///   asynchronous send: nothing waits on a subscriber, so a slow or dead one
///   never holds up the others.
/// - `subscribe(sink, kinds)` answers the last sequence number published so
///   far (replay from there closes the gap). Subscribing again replaces the
///   filter. Subscribers are monitored and dropped when they die.
/// - `unsubscribe(sink)` drops a subscriber (no-op if unknown).
/// - `replay(after_seq)` answers the events with `seq > after_seq` that are
///   still in the ring, oldest first.
///
/// Every payload is made safe on its way in: invalid UTF-8 is replaced in
/// every string and internal connection ids are shown through
/// `show_connection_id` (the runtime's keyed digest), both in the struct and
/// so in its rendering (`make_publishable`); the rendering passes through
/// core/event_payload as well (invalid UTF-8 replaced, nesting cut at
/// max_event_payload_depth). A payload can thus never make a subscriber's
/// JSON dump throw, and no handler of the bus lets an exception end it; if
/// making it safe throws (out of memory, a throwing id function), the event
/// still counts and carries `{"error": ...}` and the kind's empty payload.
event_bus_actor spawn_event_bus(caf::actor_system& sys, std::size_t replay_capacity = 1024);

struct event_bus_options {
  std::size_t replay_capacity = 1024;
  /// How a connection id appears outside the runtime; empty: unchanged.
  std::function<std::string(const std::string&)> show_connection_id;
};

event_bus_actor spawn_event_bus(caf::actor_system& sys, event_bus_options opts);

} // namespace mcprt
