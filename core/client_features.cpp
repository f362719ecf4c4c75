#include "core/client_features.hpp"

namespace mcprt {

std::string to_string(elicitation_policy p) {
  switch (p) {
    case elicitation_policy::decline:
      return "decline";
    case elicitation_policy::accept_defaults:
      return "accept-defaults";
    case elicitation_policy::ask:
      return "ask";
  }
  return "decline";
}

std::optional<elicitation_policy> parse_elicitation_policy(const std::string& s) {
  if (s == "decline") return elicitation_policy::decline;
  if (s == "accept-defaults") return elicitation_policy::accept_defaults;
  if (s == "ask") return elicitation_policy::ask;
  return std::nullopt;
}

} // namespace mcprt
