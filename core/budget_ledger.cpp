#include "core/budget_ledger.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

namespace mcprt {

namespace {

std::string_view trim_ledger_text(std::string_view s) {
  constexpr std::string_view space = " \t\n\r\f\v";
  auto first = s.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

template <class T>
bool erase_value(std::vector<T>& xs, const T& x) {
  auto i = std::find(xs.begin(), xs.end(), x);
  if (i == xs.end()) return false;
  xs.erase(i);
  return true;
}

} // namespace

std::string to_string(budget_mode m) {
  switch (m) {
    case budget_mode::off:
      return "off";
    case budget_mode::warn:
      return "warn";
    case budget_mode::enforce:
      return "enforce";
  }
  return "unknown";
}

std::optional<budget_mode> parse_budget_mode(std::string_view s) {
  s = trim_ledger_text(s);
  for (auto m : {budget_mode::off, budget_mode::warn, budget_mode::enforce})
    if (s == to_string(m)) return m;
  return std::nullopt;
}

std::string to_string(reserve_result r) {
  switch (r) {
    case reserve_result::reserved:
      return "reserved";
    case reserve_result::already_held:
      return "already_held";
    case reserve_result::refused:
      return "refused";
  }
  return "unknown";
}

budget_parse_result parse_budget_value(std::string_view text) {
  auto s = trim_ledger_text(text);
  auto quoted = "'" + std::string{text} + "'";
  if (s.empty()) return {std::nullopt, "budget is empty"};
  // Checked first: from_chars would read the "1" of "1e2" or "1.0" and stop.
  if (!std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return {std::nullopt, "budget must be a plain positive decimal integer, got " + quoted};
  std::size_t value = 0;
  if (std::from_chars(s.data(), s.data() + s.size(), value).ec != std::errc{})
    return {std::nullopt, "budget is too large, got " + quoted};
  if (value == 0) return {std::nullopt, "budget must be positive, got " + quoted};
  return {value, {}};
}

bool operator==(const refused_server& a, const refused_server& b) {
  return a.name == b.name && a.transport == b.transport && a.reason == b.reason;
}

budget_ledger::budget_ledger(std::optional<std::size_t> budget, budget_mode mode,
                             std::string scope)
  : budget_(budget), mode_(mode), scope_(std::move(scope)) {
  // nop
}

reserve_result budget_ledger::reserve(const std::string& name,
                                      std::vector<budget_event>& out) {
  if (is_held(name)) return reserve_result::already_held;
  if (!tracking()) return reserve_result::reserved;
  if (enforcing() && held_.size() >= *budget_) return reserve_result::refused;
  return hold(name, out);
}

reserve_result budget_ledger::adopt(const std::string& name, std::vector<budget_event>& out) {
  if (is_held(name)) return reserve_result::already_held;
  if (!tracking()) return reserve_result::reserved;
  return hold(name, out);
}

reserve_result budget_ledger::hold(const std::string& name, std::vector<budget_event>& out) {
  auto seq = next_seq_++;
  if (spare_.empty()) {
    held_.emplace(name, seq);
  } else {
    auto node = std::move(spare_.back());
    spare_.pop_back();
    node.key() = name; // reuses the node's string buffer when it fits
    node.mapped() = seq;
    held_.insert(std::move(node));
  }
  reserved_dirty_ = true;
  if (update_warning())
    out.emplace_back(budget_warning_event{scope_, *budget_, mode_, held_.size(),
                                          live_count(), budget_warn_fraction});
  return reserve_result::reserved;
}

bool budget_ledger::release(const std::string& name) {
  auto i = held_.find(name);
  if (i == held_.end()) return false;
  auto node = held_.extract(i);
  // Bounded: a budget that shrinks back does not keep its peak in memory.
  if (spare_.size() < 64) spare_.push_back(std::move(node));
  reserved_dirty_ = true;
  update_warning();
  return true;
}

const std::vector<std::string>& budget_ledger::reserved() const {
  if (reserved_dirty_) {
    std::vector<std::pair<uint64_t, const std::string*>> order;
    order.reserve(held_.size());
    for (auto& [name, seq] : held_)
      order.emplace_back(seq, &name);
    std::sort(order.begin(), order.end());
    reserved_cache_.clear();
    for (auto& [seq, name] : order)
      reserved_cache_.push_back(*name);
    reserved_dirty_ = false;
  }
  return reserved_cache_;
}

void budget_ledger::record_refusal(const std::string& name, const std::string& transport,
                                   std::vector<budget_event>& out, std::string reason) {
  if (!enforcing() && !outside_refusals_) return;
  refused_server r{name, transport.empty() ? "unknown" : transport, std::move(reason)};
  auto i = std::find_if(pending_.begin(), pending_.end(),
                        [&](const refused_server& x) { return x.name == name; });
  if (i != pending_.end())
    *i = std::move(r);
  else
    pending_.push_back(std::move(r));
  if (bulk_depth_ == 0) flush_refusals(out);
}

void budget_ledger::begin_bulk_pass(bool preserve_refusals) {
  if (!preserve_refusals) {
    last_refused_.clear();
    last_refused_set_.clear();
  }
  ++bulk_depth_;
}

void budget_ledger::end_bulk_pass(std::vector<budget_event>& out) {
  if (bulk_depth_ == 0) return;
  if (--bulk_depth_ == 0) flush_refusals(out);
}

void budget_ledger::clear_refusal(const std::string& name) {
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [&](const refused_server& x) { return x.name == name; }),
                 pending_.end());
  // Only a name that was refused pays for the ordered erase.
  if (last_refused_set_.erase(name) != 0) erase_value(last_refused_, name);
}

bool budget_ledger::update_warning() {
  if (!tracking()) return false;
  // Multiplying instead of dividing: no division by a zero budget.
  auto reserved = static_cast<double>(held_.size());
  auto budget = static_cast<double>(*budget_);
  if (warning_armed_ && reserved >= budget_warn_fraction * budget) {
    warning_armed_ = false;
    return true;
  }
  if (!warning_armed_ && reserved < budget_rearm_fraction * budget) warning_armed_ = true;
  return false;
}

void budget_ledger::flush_refusals(std::vector<budget_event>& out) {
  if (pending_.empty()) return;
  for (auto& r : pending_)
    if (last_refused_set_.insert(r.name).second) last_refused_.push_back(r.name);
  out.emplace_back(refused_batch_event{scope_, budget_.value_or(0), mode_, held_.size(),
                                       live_count(), std::move(pending_)});
  pending_.clear();
}

} // namespace mcprt
