#include "actors/gating.hpp"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/definition_pin_store.hpp"
#include "core/fingerprint.hpp"
#include "core/untrusted_text.hpp"
#include "core/workspace_gating.hpp"
#include "io/inotify_watch.hpp"

namespace mcprt {

namespace {

struct session_entry {
  reconciler_actor reconciler;
  server_map servers; // the session's own top tier
  /// For sessions that get deltas (those with no servers of their own):
  /// the admitted servers last sent, and the model's latest version then
  /// (workspace_gating::changes). Empty until their first, whole state.
  std::set<std::string> sent;
  uint64_t synced_version = 0;
  bool synced = false;
};

struct gating_state {
  static inline const char* name = "mcprt.gating";

  std::unique_ptr<approvals_store> approvals;
  std::unique_ptr<input_store> inputs;
  std::unique_ptr<workspace_gating> model;
  std::unique_ptr<definition_pin_store> pin_store;
  /// The pin state last sent to the sessions, by server; the warning last
  /// logged for a setting not honoured; the held-back listing last
  /// published, by server.
  std::map<std::string, definition_pin_state> pin_states;
  std::map<std::string, std::string> pin_warnings;
  std::map<std::string, std::string> told_changes;
  // The variable problems last published, by server, so that one that
  // stays is reported once.
  std::map<std::string, std::string> published_problems;
  event_bus_actor bus;
  bool started = false;
  uint64_t revision = 0;
  std::map<caf::actor_addr, session_entry> sessions;
  std::chrono::milliseconds debounce{300};
  // The debounce timer of the current burst of store events; older timers
  // carry an older token and do nothing.
  uint64_t store_token = 0;
  bool store_pending = false;
  // Last member: destroyed first, so no callback outlives the rest.
  std::unique_ptr<io::inotify_watch> store_watch;
};

using gating_self = gating_actor::stateful_pointer<gating_state>;

/// The session's next state. A session with servers of its own gets it
/// whole; the others get their first state whole and then only the servers
/// whose version moved, so the cost of an edit follows the edit.
desired_state desired_for(const workspace_gating& model, session_entry& s, uint64_t revision) {
  bool delta = s.servers.empty() && s.synced;
  auto adm = model.admit(s.servers, !delta);
  desired_state d;
  d.revision = revision;
  d.trusted = adm.trusted;
  d.delta = delta;
  if (!delta) {
    d.admitted.reserve(adm.admitted.size());
    for (auto& [name, cfg] : adm.admitted)
      d.admitted.push_back(std::move(cfg));
    if (s.servers.empty()) {
      s.sent.clear();
      for (auto& c : d.admitted)
        s.sent.insert(s.sent.end(), c.name);
      s.synced_version = model.latest_version();
      s.synced = true;
    }
  } else {
    // Every change to what a session runs for a name moved its version:
    // the names changed since the last state are all there is to send.
    auto& changes = model.changes();
    for (auto c = changes.upper_bound(s.synced_version); c != changes.end(); ++c) {
      auto& name = c->second;
      if (auto* cfg = model.admitted_config(name)) {
        d.admitted.push_back(*cfg);
        s.sent.insert(name);
      } else if (s.sent.erase(name)) {
        d.withdrawn.push_back(name);
      }
    }
    s.synced_version = model.latest_version();
  }
  for (auto& u : adm.unavailable)
    d.unavailable.push_back({u.name, to_string(u.reason), remedy(u.reason, u.name)});
  d.promptable = std::move(adm.promptable);
  d.has_allowed = adm.lists.allowed.has_value();
  if (adm.lists.allowed) d.allowed = *adm.lists.allowed;
  d.excluded = adm.lists.excluded;
  d.pending = adm.lists.pending;
  return d;
}

void push(gating_self self, session_entry& s, bool reconcile) {
  self->send(s.reconciler, desired_for(*self->state.model, s, self->state.revision));
  if (reconcile) self->send(s.reconciler, atom::reconcile_v);
}

/// Publishes a settings_error for each admitted server whose variables
/// cannot be expanded, once per problem; logs it too (never a value).
void report_variable_errors(gating_self self) {
  auto& st = self->state;
  std::map<std::string, std::string> now;
  for (auto& [name, e] : st.model->variable_errors()) {
    auto& known = st.published_problems[name];
    if (known != e.message) {
      auto scope = st.model->merged().servers.at(name).scope;
      spdlog::warn("settings: {}: {}", escape_for_display(e.path), e.message);
      publish(self, st.bus, events::settings_error{replace_invalid_utf8(e.path), to_string(scope), 0, 0, e.message});
    }
    now.emplace(name, e.message);
  }
  st.published_problems = std::move(now);
}

void push_all(gating_self self) {
  report_variable_errors(self);
  ++self->state.revision;
  for (auto& [addr, s] : self->state.sessions)
    push(self, s, true);
}

std::vector<settings_content> contents_of(settings_update& u, const workspace_options& o) {
  auto sources = settings_sources(o.home, o.workspace, o.settings_profile);
  std::vector<settings_content> files;
  for (auto& f : u.files) {
    auto scope = parse_config_scope(f.scope).value_or(config_scope::user);
    if (scope == config_scope::session) continue; // the top tier is read once, at start
    auto format = format_of(sources, f.path, scope);
    files.push_back({std::move(f.path), scope, f.exists, std::move(f.content.value), format});
  }
  return files;
}

// -- definitions pinned at approval ---------------------------------------------------

bool same_pin_state(const definition_pin_state& a, const definition_pin_state& b) {
  return a.server == b.server && a.hash == b.hash && a.on == b.on && a.pins == b.pins;
}

/// Whether each configured server's definitions are pinned, and what was
/// pinned under its current approval hash.
std::map<std::string, definition_pin_state> pin_states_of(gating_state& st) {
  auto& model = *st.model;
  std::optional<pin_mode> user_mode, workspace_mode;
  for (auto& d : model.documents()) {
    if (!d.pin_definitions) continue;
    if (d.scope == config_scope::user) user_mode = d.pin_definitions;
    else if (is_gated(d.scope)) workspace_mode = d.pin_definitions;
  }
  std::map<std::string, definition_pin_state> out;
  std::map<std::string, std::string> warnings;
  bool all = user_mode == pin_mode::all || workspace_mode == pin_mode::all;
  for (auto& [name, cfg] : model.merged().servers) {
    // The owner's own servers are pinned only when asked: an edit among
    // 10,000 of them costs nothing here.
    if (!is_gated(cfg.scope) && !cfg.pin_definitions && !all) continue;
    auto policy = pinning_for(cfg.scope, cfg.pin_definitions, user_mode, workspace_mode);
    if (!policy.warning.empty()) {
      if (st.pin_warnings[name] != policy.warning)
        spdlog::warn("settings: mcpServers.{}: {}", escape_for_display(name), policy.warning);
      warnings[name] = policy.warning;
    }
    definition_pin_state s;
    s.server = name;
    s.on = policy.on;
    if (s.on) {
      s.hash = approval_hash(cfg);
      if (auto r = st.pin_store->get(model.project_root(), name); r && r->hash == s.hash) s.pins = std::move(r->pins);
    }
    out.emplace(name, std::move(s));
  }
  st.pin_warnings = std::move(warnings);
  return out;
}

/// Sends every session the pin states that changed.
void push_pins(gating_self self) {
  auto& st = self->state;
  auto now = pin_states_of(st);
  for (auto& w : st.pin_store->take_warnings())
    spdlog::warn("definitions: {}", escape_for_display(w));
  auto send_all = [&](const definition_pin_state& s) {
    for (auto& [addr, session] : st.sessions)
      self->send(session.reconciler, s);
  };
  for (auto& [name, s] : now)
    if (auto old = st.pin_states.find(name); old == st.pin_states.end() || !same_pin_state(old->second, s))
      send_all(s);
  for (auto& [name, s] : st.pin_states)
    if (!now.count(name) && s.on) send_all(definition_pin_state{name, {}, false, {}});
  st.pin_states = std::move(now);
}

void definitions_seen(gating_self self, definitions_offered& o) {
  auto& st = self->state;
  auto s = st.pin_states.find(o.server);
  // A listing of an earlier config, or of a server no longer pinned.
  if (s == st.pin_states.end() || !s->second.on || s->second.hash != o.hash) return;
  auto& root = st.model->project_root();
  try {
    if (!s->second.pins.count(o.kind)) {
      auto kind = o.kind == "prompts" ? definition_kind::prompt
                  : o.kind == "resources" ? definition_kind::resource : definition_kind::tool;
      if (st.pin_store->pin(root, o.server, o.hash, kind, o.listing))
        spdlog::info("definitions: pinned {} {} of {} as approved", o.listing.size(), o.kind,
                     escape_for_display(o.server));
      st.told_changes.erase(o.server);
      push_pins(self);
      return;
    }
    if (o.changes.empty()) {
      st.told_changes.erase(o.server);
      st.pin_store->hold(root, o.server, o.hash, {}, {});
      return;
    }
    auto& told = st.told_changes[o.server];
    if (told == o.digest) return;
    told = o.digest;
    st.pin_store->hold(root, o.server, o.hash, o.digest, o.changes);
  } catch (const std::exception& e) {
    spdlog::warn("definitions: {}", escape_for_display(e.what()));
  }
  // The changes were escaped and bounded where they were described.
  auto remedy = "run mcprt approve " + o.server;
  spdlog::warn("definitions: {} offers definitions other than those approved; held back: {} ({})",
               escape_for_display(o.server), o.changes, escape_for_display(remedy));
  publish(self, st.bus, events::definitions_changed{o.server, o.changes, remedy});
}

/// The store's problems (a symlinked lock file, a malformed store) reach
/// the log; the store collects them, core has no output channel.
void log_store_warnings(gating_self self) {
  for (auto& w : self->state.model->approvals().take_warnings())
    spdlog::warn("approvals: {}", escape_for_display(w));
  if (auto* inputs = self->state.model->inputs())
    for (auto& w : inputs->take_warnings())
      spdlog::warn("inputs: {}", escape_for_display(w));
}

/// The decision in force for every configured gated server.
std::map<std::string, std::optional<approval_state>> decisions_of(const workspace_gating& model) {
  std::map<std::string, std::optional<approval_state>> out;
  for (auto& [name, adm] : model.gating().servers)
    out.emplace(name, adm.approval);
  return out;
}

/// The store changed on disk: re-read it, and regate only when a decision
/// that matters here changed.
void reread_store(gating_self self) {
  auto& model = *self->state.model;
  auto before = decisions_of(model);
  model.approvals().reload();
  if (model.inputs()) model.inputs()->reload();
  self->state.pin_store->reload();
  bool changed = model.refresh();
  log_store_warnings(self);
  if (changed || decisions_of(model) != before) push_all(self);
  push_pins(self);
}

void start_store_watch(gating_self self, std::vector<std::filesystem::path> files) {
  caf::actor_addr me = self->address();
  auto on_change = [me](const std::string& path) {
    if (auto a = caf::actor_cast<caf::actor>(me)) caf::anon_send(a, atom::fs_event_v, path);
  };
  auto on_error = [](const std::string& message) {
    spdlog::warn("approvals store watch: {}", escape_for_display(message));
  };
  try {
    self->state.store_watch = std::make_unique<io::inotify_watch>(std::move(files), on_change, on_error);
  } catch (const std::exception& e) {
    on_error(std::string("decisions written by other processes are not seen until a restart: ") + e.what());
  }
}

caf::result<bool> decide(gating_self self, const std::string& name, approval_state decision) {
  auto& model = *self->state.model;
  auto& servers = model.merged().servers;
  const server_config* cfg = nullptr;
  if (auto i = servers.find(name); i != servers.end()) cfg = &i->second;
  // Else a gated server a session brought (a remote host's): the decision
  // is bound to its config like a project server's.
  for (auto s = self->state.sessions.begin(); !cfg && s != self->state.sessions.end(); ++s)
    if (auto j = s->second.servers.find(name); j != s->second.servers.end() && is_gated(j->second.scope))
      cfg = &j->second;
  if (!cfg) return make_error(errc::unknown_server, name + ": no server of that name is configured");
  if (auto p = self->state.pin_states.find(name);
      !is_gated(cfg->scope) && decision == approval_state::approved && p != self->state.pin_states.end()
      && p->second.on) {
    // The owner's own server needs no approval, but its pinned
    // definitions do: what it offers now is pinned at its next listing.
    try {
      self->state.pin_store->forget(model.project_root(), name);
    } catch (const std::exception& e) {
      return make_error(errc::io_error, replace_invalid_utf8(e.what()));
    }
    self->state.told_changes.erase(name);
    push_pins(self);
    return true;
  }
  if (!is_gated(cfg->scope))
    return make_error(errc::not_gated, name + ": comes from " + to_string(cfg->scope)
                                         + " settings, which need no approval");
  try {
    model.approvals().set(model.project_root(), name, approval_hash(*cfg), decision);
    // A decision approves (or rejects) the definitions offered from now
    // on: the next listing is pinned.
    self->state.pin_store->forget(model.project_root(), name);
  } catch (const std::exception& e) {
    log_store_warnings(self);
    return make_error(errc::io_error, replace_invalid_utf8(e.what()));
  }
  self->state.told_changes.erase(name);
  log_store_warnings(self);
  model.refresh();
  push_all(self);
  push_pins(self);
  return true;
}

gating_snapshot gating_snapshot_of(const gating_state& st) {
  gating_snapshot s;
  auto& model = *st.model;
  s.trusted = model.options().trusted;
  s.revision = st.revision;
  s.promptable = model.gating().promptable;
  for (auto& e : model.top_tier_errors())
    s.errors.push_back(e.path + ":" + std::to_string(e.line) + ":" + std::to_string(e.column) + ": " + e.message);
  for (auto& [name, e] : model.variable_errors())
    s.errors.push_back(e.path + ": " + e.message);
  for (auto& [name, cfg] : model.merged().servers) {
    gated_server g;
    g.name = name;
    g.scope = to_string(cfg.scope);
    g.transport = to_string(cfg.transport());
    // The id of the config as it runs: with its variables expanded.
    auto x = model.gating().expanded.find(name);
    g.fingerprint = connection_id(x != model.gating().expanded.end() ? x->second : cfg);
    g.prefix = cfg.prefix ? *cfg.prefix : name + "__";
    auto a = model.gating().servers.find(name);
    if (a != model.gating().servers.end()) {
      g.admitted = a->second.admitted;
      if (a->second.reason) g.reason = to_string(*a->second.reason);
      if (a->second.approval) g.approval = to_string(*a->second.approval);
    }
    s.servers.push_back(std::move(g));
  }
  for (auto& [name, set] : model.merged().tool_sets)
    s.tool_sets.push_back(set);
  return s;
}

gating_actor::behavior_type gating(gating_self self, gating_options opts, event_bus_actor bus) {
  auto& st = self->state;
  st.bus = std::move(bus);
  st.approvals = std::make_unique<approvals_store>(opts.approvals_file);
  if (!opts.inputs_file.empty()) st.inputs = std::make_unique<input_store>(opts.inputs_file);
  st.model = std::make_unique<workspace_gating>(std::move(opts.workspace), *st.approvals, st.inputs.get());
  if (opts.pins_file.empty()) opts.pins_file = opts.approvals_file.parent_path() / "mcp-definitions.json";
  st.pin_store = std::make_unique<definition_pin_store>(opts.pins_file);
  st.debounce = opts.debounce;
  log_store_warnings(self);
  if (opts.watch_approvals) {
    std::vector<std::filesystem::path> watched{opts.approvals_file, opts.pins_file};
    if (!opts.inputs_file.empty()) watched.push_back(opts.inputs_file);
    start_store_watch(self, std::move(watched));
  }
  self->set_down_handler([self](const caf::down_msg& dm) { self->state.sessions.erase(dm.source); });
  return {
    [self](settings_update& u) {
      auto& model = *self->state.model;
      bool changed = model.set_contents(contents_of(u, model.options()));
      if (changed || u.forced) push_all(self);
      push_pins(self);
      model.release_replaced();
    },
    [self](atom::approve, const std::string& name) { return decide(self, name, approval_state::approved); },
    [self](atom::reject, const std::string& name) { return decide(self, name, approval_state::rejected); },
    [self](atom::reason, const std::string& name) {
      unavailability u;
      u.server = name;
      if (auto r = self->state.model->reason(name)) {
        u.reason = to_string(*r);
        u.remedy = remedy(*r, name);
      }
      return u;
    },
    [self](atom::config, const std::string& name) -> caf::result<server_config> {
      if (auto* cfg = self->state.model->admitted_config(name)) return *cfg;
      if (auto r = self->state.model->reason(name))
        return make_error(errc::unavailable, name + " is not admitted: " + to_string(*r) + "; " + remedy(*r, name));
      return make_error(errc::unknown_server, "no MCP server named " + name + " is configured");
    },
    [self](atom::attach, reconciler_actor& r, std::vector<server_config>& servers) {
      auto& st = self->state;
      self->monitor(r);
      auto& s = st.sessions[r.address()];
      s.reconciler = r;
      s.servers.clear();
      s.sent.clear();
      s.synced = false;
      for (auto& c : servers)
        s.servers.insert_or_assign(c.name, c);
      push(self, s, false);
      for (auto& [name, p] : st.pin_states)
        if (p.on) self->send(r, p);
      if (st.started) self->send(r, atom::start_v);
    },
    [self](atom::detach, const reconciler_actor& r) {
      self->demonitor(r.address());
      self->state.sessions.erase(r.address());
    },
    [self](atom::start) {
      auto& st = self->state;
      if (st.started) return;
      st.started = true;
      for (auto& [addr, s] : st.sessions)
        self->send(s.reconciler, atom::start_v);
    },
    [self](atom::snapshot) { return gating_snapshot_of(self->state); },
    [self](atom::fs_event, const std::string&) {
      auto& st = self->state;
      st.store_pending = true;
      self->delayed_send(self, st.debounce, atom::debounce_v, ++st.store_token);
    },
    [self](atom::debounce, uint64_t token) {
      auto& st = self->state;
      if (!st.store_pending || token != st.store_token) return; // superseded
      st.store_pending = false;
      reread_store(self);
    },
    [self](definitions_offered& o) { definitions_seen(self, o); },
  };
}

} // namespace

gating_actor spawn_gating(caf::actor_system& sys, gating_options opts, event_bus_actor bus) {
  return sys.spawn(gating, std::move(opts), std::move(bus));
}

} // namespace mcprt
