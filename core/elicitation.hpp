#pragma once

// How `accept-defaults` answers a form-mode `elicitation/create` (SEP-1034):
// every property of the requested schema that carries a default of its own
// type is filled with it. The schema is server input, so the walk is
// bounded and anything that does not fit the 2025-11-25 primitive schemas
// (string, number, integer, boolean, single- and multi-select enums) is
// left out rather than guessed at.

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mcprt {

struct elicitation_limits {
  /// Properties looked at; a schema with more is refused whole (a form
  /// that large is not a form a user could fill in either).
  std::size_t max_properties = 256;
  /// Enum members (or oneOf / anyOf options) compared against a default.
  std::size_t max_options = 1024;
};

struct elicitation_defaults {
  /// Property name -> its default, for every property that has a usable one.
  nlohmann::json content = nlohmann::json::object();
  /// `required` properties without a usable default: with any, the defaults
  /// are not a complete answer.
  std::vector<std::string> missing_required;
  /// Set when the schema is not a flat object schema within the limits;
  /// `content` is then empty.
  std::string problem;

  /// The defaults make an answer the server accepts.
  bool complete() const { return problem.empty() && missing_required.empty(); }
};

/// Longest URL a URL-mode elicitation may carry to the host.
inline constexpr std::size_t max_elicitation_url_bytes = 8192;

/// The defaults of `requested_schema` (an elicitation's `requestedSchema`).
/// Never throws.
elicitation_defaults defaults_of_requested_schema(const nlohmann::json& requested_schema,
                                                  const elicitation_limits& limits = {});

/// The result `accept-defaults` sends for an `elicitation/create` request's
/// params: accept with the defaults when they are complete, decline when
/// they are not, when the request is URL mode (we cannot open a browser for
/// the user) or when it carries no requested schema.
nlohmann::json accept_defaults_answer(const nlohmann::json& params,
                                      const elicitation_limits& limits = {});

} // namespace mcprt
