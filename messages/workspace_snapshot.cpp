#include "messages/workspace_snapshot.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "core/budget_ledger.hpp"
#include "core/event_payload.hpp"

namespace mcprt {

using nlohmann::json;

namespace {

json snapshot_text(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

json snapshot_pid(const std::optional<int32_t>& pid) {
  return pid ? json(*pid) : json(nullptr);
}

std::optional<int32_t> known_pid(int32_t pid) {
  return pid < 0 ? std::nullopt : std::optional<int32_t>{pid};
}

std::string budget_status(const budget_snapshot& b) {
  if (b.mode == "enforce" && !b.refused.empty()) return "error";
  if (b.limited && static_cast<double>(b.reserved_count) >= budget_warn_fraction * static_cast<double>(b.budget))
    return "warning";
  return "ok";
}

json budget_json(const budget_snapshot& b) {
  return {{"scope", b.scope},
          {"budget", b.limited ? json(b.budget) : json(nullptr)},
          {"mode", b.mode},
          {"reserved", b.reserved},
          {"reserved_count", b.reserved_count},
          {"live_count", b.live_count},
          {"refused", b.refused},
          {"status", budget_status(b)}};
}

json fleet_json(const fleet_status& f) {
  return {{"address", f.address},
          {"node", f.node},
          {"state", f.state},
          {"status", f.state == "unreachable" ? json("fleet_unreachable") : json(nullptr)},
          {"held", f.held},
          {"budget", f.fleet.limited ? json(f.fleet.budget) : json(nullptr)},
          {"mode", snapshot_text(f.fleet.mode)},
          {"reserved_count", f.fleet.reserved_count},
          {"nodes", f.fleet.nodes},
          {"lease_ms", f.fleet.lease_ms},
          {"error", snapshot_text(f.error)}};
}

} // namespace

workspace_snapshot assemble(snapshot_parts parts, const std::function<std::string(const std::string&)>& show_id) {
  workspace_snapshot out;
  out.version = std::move(parts.version);
  out.workspace = std::move(parts.workspace);
  out.trusted = parts.trusted;
  out.capabilities = std::move(parts.capabilities);
  auto& sess = parts.session;
  if (sess) out.reconcile = {sess->generation, sess->in_progress, sess->last_error};
  std::map<std::string, uint64_t> restarts;
  if (parts.pool)
    for (auto& e : parts.pool->entries)
      restarts[e.id] += e.restarts;
  std::map<std::string, const session_server*> live;
  std::map<std::string, std::string> skipped, failed;
  if (sess) {
    for (auto& s : sess->servers)
      live[s.name] = &s;
    for (auto& u : sess->skipped)
      skipped[u.server] = u.reason;
    for (auto& u : sess->failed)
      failed[u.server] = u.remedy;
  }
  auto add = [&](const std::string& name, const std::string& scope, const std::string& transport,
                 const std::string& fingerprint, const std::string& reason, const std::string& approval) {
    workspace_snapshot::server_row s;
    s.name = name;
    s.scope = scope;
    s.transport = transport;
    s.fingerprint = show_id(fingerprint);
    if (auto l = live.find(name); l != live.end()) {
      auto& ls = *l->second;
      s.status = to_string(ls.status);
      s.pid = known_pid(ls.pid);
      s.tools = ls.tools;
      s.prompts = ls.prompts;
      s.last_error = ls.last_error;
      s.sandbox = ls.sandbox;
      if (auto r = restarts.find(ls.connection_id); r != restarts.end()) s.restarts = r->second;
    } else if (auto f = failed.find(name); f != failed.end()) {
      s.status = "error";
      s.last_error = f->second;
    } else {
      s.status = "disconnected";
    }
    auto sk = skipped.find(name);
    s.reason = !reason.empty() ? reason : sk != skipped.end() ? sk->second : std::string{};
    s.approval = approval;
    out.servers.push_back(std::move(s));
  };
  std::set<std::string> listed;
  if (parts.gating)
    for (auto& gs : parts.gating->servers) {
      add(gs.name, gs.scope, gs.transport, gs.fingerprint, gs.reason, gs.approval);
      listed.insert(gs.name);
    }
  // The session's own servers (and any the workspace does not configure).
  for (auto& [name, ls] : live)
    if (!listed.count(name)) add(name, ls->scope, ls->transport, ls->connection_id, "", "");
  std::stable_sort(out.servers.begin(), out.servers.end(),
                   [](const auto& a, const auto& b) { return a.name < b.name; });
  if (parts.pool) {
    workspace_snapshot::pool_view pv;
    for (auto& e : parts.pool->entries)
      pv.entries.push_back({show_id(e.id), e.name, e.refs, to_string(e.status), known_pid(e.pid), e.restarts});
    pv.subprocess_count = parts.pool->subprocess_count;
    out.pool = std::move(pv);
  }
  out.budgets = std::move(parts.budgets);
  out.fleet = std::move(parts.fleet);
  if (parts.gating) out.errors = std::move(parts.gating->errors);
  return out;
}

void to_json(json& j, const workspace_snapshot& x) {
  j = json{{"v", 1}, {"version", x.version}, {"workspace", x.workspace}, {"trusted", x.trusted},
           {"capabilities", x.capabilities}};
  j["reconcile"] = {{"generation", x.reconcile.generation},
                    {"in_progress", x.reconcile.in_progress},
                    {"last_error", snapshot_text(x.reconcile.last_error)}};
  json servers = json::array();
  for (auto& s : x.servers)
    servers.push_back({{"name", s.name},
                       {"scope", s.scope},
                       {"transport", s.transport},
                       {"fingerprint", s.fingerprint},
                       {"status", s.status},
                       {"pid", snapshot_pid(s.pid)},
                       {"tools", s.tools},
                       {"prompts", s.prompts},
                       {"last_error", snapshot_text(s.last_error)},
                       {"restarts", s.restarts},
                       {"reason", snapshot_text(s.reason)},
                       {"approval", snapshot_text(s.approval)},
                       {"sandbox", s.sandbox.empty() ? json(nullptr) : json::parse(s.sandbox, nullptr, false)}});
  j["servers"] = std::move(servers);
  if (x.pool) {
    json entries = json::array();
    for (auto& e : x.pool->entries)
      entries.push_back({{"id", e.id}, {"name", e.name}, {"refs", e.refs}, {"status", e.status},
                         {"pid", snapshot_pid(e.pid)}, {"restarts", e.restarts}});
    j["pool"] = {{"entries", std::move(entries)}, {"subprocess_count", x.pool->subprocess_count}};
  } else {
    j["pool"] = nullptr;
  }
  json cells = json::array();
  for (auto& b : x.budgets)
    cells.push_back(budget_json(b));
  j["budgets"] = std::move(cells);
  j["fleet"] = x.fleet ? fleet_json(*x.fleet) : json(nullptr);
  if (!x.errors.empty()) j["errors"] = x.errors;
  // Server text (last_error, stderr) and settings text reach the snapshot:
  // whatever a source let through, the answer dumps as valid UTF-8.
  make_payload_safe(j);
}

} // namespace mcprt
