#include "core/client_features.hpp"

#include "core/ascii.hpp"

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

std::string file_uri(const std::string& absolute_path) {
  return "file://" + percent_encode(absolute_path, "/");
}

mcp_root root_for_folder(const std::string& absolute_path) {
  auto end = absolute_path.find_last_not_of('/');
  if (end == std::string::npos) return {file_uri("/"), "/"};
  auto trimmed = absolute_path.substr(0, end + 1);
  auto slash = trimmed.rfind('/');
  return {file_uri(trimmed), slash == std::string::npos ? trimmed : trimmed.substr(slash + 1)};
}

std::optional<elicitation_policy> parse_elicitation_policy(const std::string& s) {
  if (s == "decline") return elicitation_policy::decline;
  if (s == "accept-defaults") return elicitation_policy::accept_defaults;
  if (s == "ask") return elicitation_policy::ask;
  return std::nullopt;
}

} // namespace mcprt
