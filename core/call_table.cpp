#include "core/call_table.hpp"

#include <algorithm>

namespace mcprt {

bool is_valid_call_id(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'
           || c == '.' || c == ':';
  });
}

std::string call_table::key_of(const std::string& owner, const std::string& call_id) {
  return owner.empty() ? call_id : owner + "/" + call_id;
}

call_admission call_table::admit(call_slot slot) {
  if (!slot.call_id.empty() && !is_valid_call_id(slot.call_id))
    return {{}, call_refused{call_refusal::bad_id, "a call id is 1 to 128 ASCII letters, digits, '-', '_', '.' or ':'"}};
  // A request nobody can cancel gets a key no caller can choose: '/' is in
  // no call id, and "#" in no owner's name.
  slot.key = slot.call_id.empty() ? "#request/" + std::to_string(next_request_++) : key_of(slot.owner, slot.call_id);
  if (calls_.count(slot.key))
    return {{}, call_refused{call_refusal::duplicate_id, "a call with id " + slot.call_id + " is already in flight"}};
  auto& n = per_server_[slot.server];
  if (limit_ > 0 && n >= limit_) {
    if (n == 0) per_server_.erase(slot.server);
    return {{}, call_refused{call_refusal::too_many_calls,
                             slot.server + " has " + std::to_string(limit_)
                               + " tool calls in flight, as many as allowed (max_calls_per_server); "
                                 "try again when one has answered"}};
  }
  ++n;
  slot.serial = next_serial_++;
  slot.phase = call_phase::asking;
  auto key = slot.key;
  calls_.emplace(key, std::move(slot));
  return {key, std::nullopt};
}

call_slot* call_table::find(const std::string& key) {
  auto i = calls_.find(key);
  return i == calls_.end() ? nullptr : &i->second;
}

call_slot* call_table::find(const std::string& key, uint64_t serial) {
  auto* s = find(key);
  return s && s->serial == serial ? s : nullptr;
}

std::optional<call_slot> call_table::remove(const std::string& key) {
  auto i = calls_.find(key);
  if (i == calls_.end()) return std::nullopt;
  auto out = std::move(i->second);
  calls_.erase(i);
  if (auto n = per_server_.find(out.server); n != per_server_.end() && --n->second == 0) per_server_.erase(n);
  return out;
}

void call_table::wait(call_slot& slot, call_clock::time_point at) {
  slot.phase = call_phase::waiting;
  slot.retry_at = at;
  slot.serial = next_serial_++;
}

uint64_t call_table::ask_again(call_slot& slot) {
  slot.phase = call_phase::asking;
  slot.serial = next_serial_++;
  return slot.serial;
}

std::vector<std::string> call_table::expired(call_clock::time_point now) const {
  std::vector<std::string> out;
  for (auto& [key, s] : calls_)
    if (s.deadline <= now) out.push_back(key);
  return out;
}

std::vector<std::string> call_table::due(call_clock::time_point now) const {
  std::vector<std::string> out;
  for (auto& [key, s] : calls_)
    if (s.phase == call_phase::waiting && s.retry_at <= now && s.deadline > now) out.push_back(key);
  return out;
}

call_attribution call_table::attribute(const std::string& server, const std::string& tool) const {
  call_attribution out;
  bool several = false;
  for (auto& [key, s] : calls_) {
    if (s.server != server || !s.method.empty()) continue;
    out.in_flight.push_back(s.key);
    if (tool.empty() || s.tool != tool) continue;
    if (out.call) several = true;
    out.call = s;
  }
  if (several) out.call.reset();
  return out;
}

std::vector<std::string> call_table::keys() const {
  std::vector<std::string> out;
  out.reserve(calls_.size());
  for (auto& [key, s] : calls_)
    out.push_back(key);
  return out;
}

std::size_t call_table::in_flight(const std::string& server) const {
  auto i = per_server_.find(server);
  return i == per_server_.end() ? 0 : i->second;
}

} // namespace mcprt
