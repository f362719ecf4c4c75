#include "core/event_payload.hpp"

#include <utility>
#include <vector>

#include "core/untrusted_text.hpp"

namespace mcprt {

using nlohmann::json;

bool make_payload_safe(json& payload, std::size_t max_depth) {
  bool changed = false;
  std::vector<std::pair<json*, std::size_t>> todo{{&payload, 0}};
  while (!todo.empty()) {
    auto [v, depth] = todo.back();
    todo.pop_back();
    if (v->is_string()) {
      auto& s = v->get_ref<std::string&>();
      if (first_invalid_utf8(s)) {
        s = replace_invalid_utf8(s);
        changed = true;
      }
      continue;
    }
    if (!v->is_structured()) continue;
    if (depth >= max_depth) {
      *v = "<nested deeper than " + std::to_string(max_depth) + " levels>";
      changed = true;
      continue;
    }
    if (v->is_object()) {
      std::vector<std::string> bad_keys;
      for (auto& [k, child] : v->items())
        if (first_invalid_utf8(k)) bad_keys.push_back(k);
      for (auto& k : bad_keys) {
        auto child = std::move((*v)[k]);
        v->erase(k);
        (*v)[replace_invalid_utf8(k)] = std::move(child);
        changed = true;
      }
      for (auto& [k, child] : v->items())
        todo.emplace_back(&child, depth + 1);
    } else {
      for (auto& child : *v)
        todo.emplace_back(&child, depth + 1);
    }
  }
  return changed;
}

} // namespace mcprt
