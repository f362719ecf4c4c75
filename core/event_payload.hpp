#pragma once

// What an event payload must be before it leaves the runtime: every event
// is published through the bus, which passes each payload through here, so
// subscribers (the daemon's SSE stream, a host's sink, the replay ring)
// never see text that breaks a JSON dump or an internal connection id.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

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

/// Replaces the internal connection ids in a payload of event kind
/// `kind_name` (the wire name) by `show(id)`: "connection_id" at the top
/// level of any kind, "id" at the top level of pool_entry_restarted and
/// pool_entry_failed. Non-string values are left alone.
void show_connection_ids(nlohmann::json& payload, std::string_view kind_name,
                         const std::function<std::string(const std::string&)>& show);

} // namespace mcprt
