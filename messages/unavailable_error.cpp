#include "messages/unavailable_error.hpp"

#include <caf/atom.hpp>
#include <caf/make_message.hpp>

namespace mcprt {

caf::error make_unavailable_error(const unavailability& u) {
  auto text = u.server + " is unavailable (" + u.reason + "): " + u.remedy;
  return caf::error{static_cast<uint8_t>(errc::unavailable), caf::atom("mcprt"), caf::make_message(std::move(text), u)};
}

std::optional<unavailability> unavailability_of(const caf::error& e) {
  // category() and context() require an error (CAF 0.17 reads through a null pointer).
  if (!e || e.category() != caf::atom("mcprt") || e.code() != static_cast<uint8_t>(errc::unavailable)) return std::nullopt;
  auto& context = e.context();
  if (!context.match_elements<std::string, unavailability>()) return std::nullopt;
  return context.get_as<unavailability>(1);
}

} // namespace mcprt
