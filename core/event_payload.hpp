#pragma once

// What an event payload must be before it leaves the runtime: every event
// is published through the bus, which passes each payload through here, so
// subscribers (the daemon's SSE stream, a host's sink, the replay ring)
// never see text that breaks a JSON dump. (Connection ids are shown through
// the runtime's digest on the typed payload: messages/events make_publishable.)

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace mcprt {

/// Nesting kept in a payload; events are shallow, anything deeper is a bug
/// or a hostile value carried along (a server's text in a field).
inline constexpr std::size_t max_event_payload_depth = 32;

/// Replaces invalid UTF-8 in every string and object key of `payload` with
/// U+FFFD, and any array or object nested deeper than `max_depth` with the
/// string "<nested deeper than N levels>". Iterative (no recursion per
/// level), never throws on any value. Returns whether anything changed.
bool make_payload_safe(nlohmann::json& payload, std::size_t max_depth = max_event_payload_depth);

} // namespace mcprt
