#include "core/settings_schema.hpp"

#include <algorithm>

namespace mcprt {

settings_schema::settings_schema(
  std::initializer_list<std::pair<const std::string, bool>> entries)
  : entries_(entries) {
}

settings_schema& settings_schema::add(std::string key_path, bool requires_restart) {
  entries_.insert_or_assign(std::move(key_path), requires_restart);
  return *this;
}

std::optional<bool> settings_schema::find(std::string_view key_path) const {
  if (auto i = entries_.find(key_path); i != entries_.end())
    return i->second;
  return std::nullopt;
}

bool settings_schema::requires_restart(std::string_view key_path) const {
  auto prefix = key_path;
  while (!prefix.empty()) {
    if (auto hit = find(prefix))
      return *hit;
    auto dot = prefix.rfind('.');
    if (dot == std::string_view::npos)
      break;
    prefix = prefix.substr(0, dot);
  }
  return false;
}

const settings_schema& settings_schema::standard() {
  static const settings_schema instance{
    // If this were true, an MCP-only edit would be suppressed and the
    // reconciler would never see it: hot reload of servers is the point.
    {"mcpServers", false},
    // Unknown `mcp.*` keys fall back to this parent; they are read at start.
    {"mcp", true},
    // The command that launches everything cannot change under a live host.
    {"mcp.serverCommand", true},
    // The gating lists are re-evaluated on every reconcile.
    {"mcp.allowed", false},
    {"mcp.excluded", false},
    {"mcp.toolIdleTimeoutMs", false},
    // The gateway's tool sets follow every edit, as its catalog does.
    {"mcp.toolSets", false},
    // Which servers' definitions are pinned: applied to every session at once.
    {"mcp.pinDefinitions", false},
    // A new sandbox policy is a new connection id: the pool restarts the
    // server under it.
    {"mcp.sandbox", false},
    {"mcp.sandboxFor", false},
    // Free-form map: `env.FOO` resolves here. Spawned servers have already
    // inherited the old environment, so a change needs a restart.
    {"env", true},
    // Credentials and folder trust are settled at start; a hot change would
    // let a half-authenticated session keep running.
    {"security", true},
    {"security.auth", true},
    {"security.auth.apiKey", true},
    // Presentation only: hosts re-read it live.
    {"ui", false},
    {"ui.theme", false},
  };
  return instance;
}

namespace {

std::string join_path(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + '.' + key;
}

bool is_absent(const nlohmann::json* v) {
  return v == nullptr || v->is_null();
}

void collect_leaves(const nlohmann::json& obj, const std::string& path,
                    std::vector<std::string>& out);

void diff(const nlohmann::json* before, const nlohmann::json* after,
          const std::string& path, std::vector<std::string>& out) {
  bool b_obj = before != nullptr && before->is_object();
  bool a_obj = after != nullptr && after->is_object();
  if (b_obj && a_obj) {
    // Both key sets are sorted (std::map), so a merge walk visits each key
    // once and keeps the output sorted.
    auto bi = before->items().begin();
    auto be = before->items().end();
    auto ai = after->items().begin();
    auto ae = after->items().end();
    while (bi != be || ai != ae) {
      if (ai == ae || (bi != be && bi.key() < ai.key())) {
        diff(&bi.value(), nullptr, join_path(path, bi.key()), out);
        ++bi;
      } else if (bi == be || ai.key() < bi.key()) {
        diff(nullptr, &ai.value(), join_path(path, ai.key()), out);
        ++ai;
      } else {
        diff(&bi.value(), &ai.value(), join_path(path, bi.key()), out);
        ++bi;
        ++ai;
      }
    }
    return;
  }
  if (b_obj && is_absent(after)) {
    collect_leaves(*before, path, out);
    return;
  }
  if (a_obj && is_absent(before)) {
    collect_leaves(*after, path, out);
    return;
  }
  // Missing and explicit null are different values here: `"x": null`
  // appearing is an edit, even if an odd one.
  if (before == nullptr || after == nullptr || *before != *after)
    out.push_back(path);
}

void collect_leaves(const nlohmann::json& obj, const std::string& path,
                    std::vector<std::string>& out) {
  if (obj.empty()) {
    out.push_back(path);
    return;
  }
  for (auto& [key, value] : obj.items()) {
    if (value.is_object())
      collect_leaves(value, join_path(path, key), out);
    else
      out.push_back(join_path(path, key));
  }
}

} // namespace

std::vector<std::string> changed_keys(const nlohmann::json& before,
                                      const nlohmann::json& after) {
  static const auto empty = nlohmann::json::object();
  const auto& b = before.is_null() ? empty : before;
  const auto& a = after.is_null() ? empty : after;
  std::vector<std::string> out;
  diff(&b, &a, std::string{}, out);
  return out;
}

bool should_notify(const std::vector<std::string>& changed, const settings_schema& schema) {
  return std::any_of(changed.begin(), changed.end(), [&](const std::string& key) {
    return !schema.requires_restart(key);
  });
}

} // namespace mcprt
