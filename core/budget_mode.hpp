#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mcprt {

/// `off` tracks nothing, `warn` tracks and warns but never refuses,
/// `enforce` also refuses once the budget is full.
enum class budget_mode { off, warn, enforce };

std::string to_string(budget_mode m);
std::optional<budget_mode> parse_budget_mode(std::string_view s);

/// Fraction of the budget at which `budget_warning` fires, and the fraction
/// the reservations must fall below before it can fire again. The gap keeps
/// one server flapping around the threshold from repeating the warning.
inline constexpr double budget_warn_fraction = 0.75;
inline constexpr double budget_rearm_fraction = 0.375;

} // namespace mcprt
