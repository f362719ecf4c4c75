#pragma once

// The error a session answers a call to a server that gating keeps out:
// errc::unavailable whose context carries the text for humans and the
// unavailability itself, so no caller parses the text back.

#include <optional>

#include <caf/error.hpp>

#include "messages/state.hpp"

namespace mcprt {

/// errc::unavailable with the context ("SERVER is unavailable (REASON):
/// REMEDY", u): rendered as before, read back with unavailability_of.
caf::error make_unavailable_error(const unavailability& u);

/// The unavailability an error carries; none for any other error.
std::optional<unavailability> unavailability_of(const caf::error& e);

} // namespace mcprt
