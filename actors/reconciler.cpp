#include "actors/reconciler.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <random>
#include <utility>

#include <caf/all.hpp>

#include "core/backoff.hpp"
#include "core/definition_pins.hpp"
#include "core/fingerprint.hpp"
#include "core/reconcile_plan.hpp"
#include "core/tool_filter.hpp"
#include "messages/unavailable_error.hpp"

namespace mcprt {

namespace {

using nlohmann::json;

/// One server the session runs.
struct live_server {
  server_config cfg; // the session's view: its tool filter applies here
  std::string id;
  /// The handle of the last acquire or lookup, which a crash restart
  /// replaces: good for calls while `conn_generation` is the entry's
  /// `generation` and the server is connected; otherwise calls resolve the
  /// current one through the pool (and keep it for the next call).
  connection_actor conn;
  uint64_t conn_generation = 0;
  uint64_t generation = 0; // of the entry's connection, as the pool last said
  connection_status status = connection_status::connecting;
  int32_t pid = -1;
  std::string error;
};

struct pass_report {
  std::vector<std::string> added, removed, restarted, refiltered;
  shared_names kept;
  std::vector<unavailability> skipped;
  std::vector<std::pair<std::string, std::string>> errors;
};

struct reconciler_state {
  static inline const char* name = "mcprt.reconciler";

  reconciler_options opts;
  bool started = false;
  bool have_desired = false;
  bool in_progress = false;
  bool dirty = false;
  uint64_t generation = 0;
  desired_state desired;
  server_map desired_map;
  /// Servers a delta of the desired state named since the last plan, and
  /// whether the next plan must walk everything instead: after a whole
  /// state, or once live may have drifted from desired (a connection lost,
  /// a retry or budget slot due, a pass that left servers out).
  std::set<std::string> changed;
  bool plan_all = true;
  std::map<std::string, live_server> live;
  /// What the plan compares against, kept in step with `live` so a pass
  /// over 10,000 servers does not rebuild it.
  std::map<std::string, live_connection> live_view;

  /// live_view's names in order, rebuilt only when a server joins or
  /// leaves the live set (an edit that restarts one server keeps it).
  /// Immutable once built: the kept lists of passes' events share it.
  std::shared_ptr<const std::vector<std::string>> live_names;
  bool live_names_stale = true;

  void set_live(const std::string& name, live_server s) {
    auto [at, fresh] = live_view.insert_or_assign(name, live_connection{s.id, filter_key(s.cfg)});
    if (fresh) live_names_stale = true;
    live.insert_or_assign(name, std::move(s));
  }
  void erase_live(const std::string& name) {
    live.erase(name);
    if (live_view.erase(name)) live_names_stale = true;
  }
  const std::shared_ptr<const std::vector<std::string>>& sorted_live_names() {
    if (live_names_stale) {
      live_names = names_of(live_view);
      live_names_stale = false;
    }
    return live_names;
  }
  std::size_t pending = 0;
  pass_report report;
  /// Servers with an acquire in flight, and the lookups of their
  /// connection waiting for it (with the tool each caller wants).
  std::set<std::string> connecting;
  struct waiting_lookup {
    std::string tool;
    caf::typed_response_promise<connection_actor> rp;
  };
  std::map<std::string, std::vector<waiting_lookup>> waiting;
  /// Servers named by lookups that came before the first desired state
  /// (or before start): a session opened a moment ago has not heard from
  /// gating yet, and "not configured" would be a lie.
  std::set<std::string> waiting_early;
  bool awaiting_desired() const { return !started || !have_desired; }
  std::vector<unavailability> skipped; // of the last finished pass
  std::vector<unavailability> failed;  // servers that failed to connect in it
  /// Servers whose pool entry failed or closed under the session: when the
  /// next acquire may go out, and how many failures in a row.
  struct retry {
    unsigned failures = 0;
    caf::actor_clock::time_point not_before; // the actor clock: tests drive it
    std::optional<caf::actor_clock::time_point> connected_at;
    std::string error;
  };
  std::map<std::string, retry> retries;
  bool requeue_armed = false;
  std::mt19937_64 rng{std::random_device{}()};
  std::string last_error;
  std::optional<std::vector<std::string>> told_promptable;
  /// Whether each server's definitions are pinned, and its pins (gating's),
  /// and the digest of the listing last reported to gating, by server.
  std::map<std::string, definition_pin_state> pins;
  std::map<std::string, std::string> offered_told;
  // Timing of the current pass, reported in reconcile_finished.
  std::chrono::steady_clock::time_point pass_start, applied_from;
  double plan_ms = 0;
};

using reconciler_self = reconciler_actor::stateful_pointer<reconciler_state>;


std::vector<tool_info> filter_tools_info(const std::vector<tool_info>& tools, const server_config& cfg) {
  std::vector<tool_info> out;
  for (auto& t : tools)
    if (passes(t.name, cfg.include_tools, cfg.exclude_tools)) out.push_back(t);
  return out;
}

// -- definitions pinned at approval ---------------------------------------------------

/// The tools as their server listed them: what the pins are over.
std::vector<json> tool_definitions(const std::vector<tool_info>& tools) {
  std::vector<json> out;
  out.reserve(tools.size());
  for (auto& t : tools) {
    if (t.raw.value.is_object() && !t.raw.value.empty()) {
      out.push_back(t.raw.value);
      continue;
    }
    json def{{"name", t.name}, {"inputSchema", t.input_schema.value}};
    if (!t.description.empty()) def["description"] = t.description;
    out.push_back(std::move(def));
  }
  return out;
}

bool tools_pinned(const reconciler_state& st, const std::string& server) {
  auto p = st.pins.find(server);
  return p != st.pins.end() && p->second.on && p->second.pins.count(pins_key(definition_kind::tool));
}

struct pinned_tools {
  std::vector<tool_info> shown;
  /// Offered, but new or changed since the approval.
  std::map<std::string, bool> held; // name → added (else changed)
};

/// What callers of the session may see of the tools `server` offers: with
/// its definitions pinned, only those as they were pinned. A listing not
/// reported yet goes to gating, which pins the first one after an approval
/// and reports a different one.
pinned_tools apply_pins(reconciler_self self, const std::string& server, std::vector<tool_info> tools) {
  auto& st = self->state;
  pinned_tools out;
  auto p = st.pins.find(server);
  if (p == st.pins.end() || !p->second.on) {
    out.shown = std::move(tools);
    return out;
  }
  auto defs = tool_definitions(tools);
  auto key = pins_key(definition_kind::tool);
  auto pinned = p->second.pins.find(key);
  definitions_check check;
  if (pinned != p->second.pins.end()) check = check_definitions(definition_kind::tool, pinned->second, defs);
  auto listing = pin_listing(definition_kind::tool, defs);
  auto digest = listing_digest(listing);
  if (auto& told = st.offered_told[server]; told != digest && st.opts.gating) {
    told = digest;
    self->send(st.opts.gating, definitions_offered{server, p->second.hash, key, std::move(listing), digest,
                                                   describe_changes(check.changes)});
  }
  for (auto& c : check.changes)
    if (c.change != definition_change::what::removed) out.held[c.name] = c.change == definition_change::what::added;
  for (auto& t : tools)
    if (!out.held.count(t.name)) out.shown.push_back(std::move(t));
  return out;
}

/// A connect succeeded: a changed server counts as restarted, not added.
void note_connected(pass_report& r, const std::string& name) {
  if (std::find(r.restarted.begin(), r.restarted.end(), name) == r.restarted.end()) r.added.push_back(name);
}

bool is(const caf::error& e, errc x) {
  return e.category() == caf::atom("mcprt") && e.code() == static_cast<uint8_t>(x);
}

// -- resolving a server's current connection ---------------------------------------

// A call goes straight to the handle the session holds while the pool has
// said nothing of a restart since: the pool is one actor every session's
// calls would otherwise queue at, twice per call.
bool has_current_connection(const live_server& s) {
  return s.conn && s.status == connection_status::connected && s.conn_generation == s.generation;
}

template <class OnConn, class OnError>
void with_connection(reconciler_self self, const live_server& s, OnConn on_conn, OnError on_error) {
  if (has_current_connection(s)) {
    on_conn(s.conn);
    return;
  }
  self->request(self->state.opts.pool, std::chrono::seconds(10), pool_lookup{s.id})
    .then(
      [self, id = s.id, name = s.cfg.name, on_conn](pool_handle& h) mutable {
        auto& st = self->state;
        if (auto i = st.live.find(name); i != st.live.end() && i->second.id == id && h.generation >= i->second.generation) {
          i->second.conn = h.connection;
          i->second.conn_generation = h.generation;
          i->second.generation = h.generation;
        }
        on_conn(h.connection);
      },
      [on_error](caf::error& e) mutable { on_error(e); });
}

caf::error unavailable_error(const reconciler_state& st, const std::string& server) {
  auto describe = [&](const unavailability& u) { return make_unavailable_error({server, u.reason, u.remedy}); };
  for (auto& u : st.desired.unavailable)
    if (u.server == server) return describe(u);
  for (auto* skipped : {&st.report.skipped, &st.skipped})
    for (auto& u : *skipped)
      if (u.server == server) return describe(u);
  for (auto& [name, err] : st.report.errors)
    if (name == server) return make_error(errc::not_connected, server + " could not connect: " + err);
  if (auto r = st.retries.find(server); r != st.retries.end())
    return make_error(errc::not_connected, server + " failed (" + r->second.error + "); it is acquired again after a backoff");
  if (st.desired_map.count(server))
    return make_error(errc::not_connected, server + " is admitted but not connected yet");
  return make_error(errc::unknown_server, "no MCP server named " + server + " is configured");
}

/// The connection to `s` for a call of `tool` (empty: a request no tool
/// filter applies to).
void resolve_route(reconciler_self self, const live_server& s, const std::string& tool,
                   caf::typed_response_promise<connection_actor> rp) {
  auto& cfg = s.cfg;
  if (!tool.empty() && !passes(tool, cfg.include_tools, cfg.exclude_tools)) {
    rp.deliver(make_error(errc::unknown_tool,
                          cfg.name + ": tool " + tool + " is hidden by this server's includeTools / excludeTools"));
    return;
  }
  if (!tool.empty() && tools_pinned(self->state, cfg.name)) {
    // What the server offers now decides: a call of a tool it changed
    // since the approval does not reach it.
    auto name = cfg.name;
    with_connection(
      self, s,
      [self, rp, name, tool](connection_actor conn) mutable {
        self->request(conn, std::chrono::seconds(10), atom::info_v)
          .then(
            [self, rp, name, tool, conn](connection_info& ci) mutable {
              auto view = apply_pins(self, name, std::move(ci.tools));
              if (auto h = view.held.find(tool); h != view.held.end())
                rp.deliver(make_error(errc::definitions_changed, held_back_call_message(name, tool, h->second)));
              else
                rp.deliver(std::move(conn));
            },
            [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
      },
      [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
    return;
  }
  with_connection(
    self, s, [rp](connection_actor conn) mutable { rp.deliver(std::move(conn)); },
    [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
}

/// Where a call of the session goes: its server's connection at once when
/// it is live, once its acquire ends when it is connecting, else why not.
caf::result<connection_actor> lookup_route(reconciler_self self, const std::string& server, const std::string& tool) {
  auto& st = self->state;
  auto i = st.live.find(server);
  if (i != st.live.end()) {
    auto& s = i->second;
    if (has_current_connection(s) && (tool.empty() || (passes(tool, s.cfg.include_tools, s.cfg.exclude_tools)
                                                        && !tools_pinned(st, server))))
      return s.conn;
    auto rp = self->make_response_promise<connection_actor>();
    resolve_route(self, s, tool, rp);
    return rp;
  }
  if (st.connecting.count(server) || st.awaiting_desired()) {
    if (st.awaiting_desired()) st.waiting_early.insert(server);
    auto rp = self->make_response_promise<connection_actor>();
    st.waiting[server].push_back({tool, rp});
    return rp;
  }
  return unavailable_error(st, server);
}

/// The lookups waiting for `name` get its connection, or why not.
void release_waiting(reconciler_self self, const std::string& name) {
  auto& st = self->state;
  auto p = st.waiting.find(name);
  if (p == st.waiting.end()) return;
  auto lookups = std::move(p->second);
  st.waiting.erase(p);
  auto i = st.live.find(name);
  for (auto& w : lookups) {
    if (i == st.live.end()) w.rp.deliver(unavailable_error(st, name));
    else resolve_route(self, i->second, w.tool, w.rp);
  }
}

/// An acquire of `name` ended: waiting lookups get its connection, or why not.
void acquire_settled(reconciler_self self, const std::string& name) {
  self->state.connecting.erase(name);
  release_waiting(self, name);
}

/// Once the session has its desired state and has started its first pass,
/// the lookups that came before that get their answer, wait on their
/// acquire like any other, or fail with the reason.
void release_early(reconciler_self self) {
  auto& st = self->state;
  if (st.awaiting_desired() || st.waiting_early.empty()) return;
  for (auto& name : std::exchange(st.waiting_early, {}))
    if (!st.connecting.count(name)) release_waiting(self, name);
}

// -- a pass ---------------------------------------------------------------------------

void run_pass(reconciler_self self);

void finish_pass(reconciler_self self) {
  auto& st = self->state;
  if (st.opts.budget) self->send(st.opts.budget, atom::end_pass_v);
  auto& r = st.report;
  if (!r.errors.empty() || !r.skipped.empty()) st.plan_all = true;
  // The pass that changed who is live pays for the names' array, not the
  // next edit's plan.
  st.sorted_live_names();
  st.last_error = r.errors.empty() ? std::string{} : r.errors.front().first + ": " + r.errors.front().second;
  auto apply_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - st.applied_from).count();
  publish(self, st.opts.bus,
          events::reconcile_finished{st.opts.session, st.generation, r.added, r.removed, r.restarted, r.refiltered,
                                     std::move(r.kept), events::skipped_servers(r.skipped),
                                     events::server_errors(r.errors),
                                     st.plan_ms, apply_ms});
  st.skipped = std::move(r.skipped);
  st.failed.clear();
  for (auto& [name, err] : r.errors)
    st.failed.push_back({name, "error", err});
  auto& promptable = st.desired.promptable;
  if (!promptable.empty() || (st.told_promptable && *st.told_promptable != promptable)) {
    publish(self, st.opts.bus, events::pending_approval_changed{st.opts.session, promptable});
    st.told_promptable = promptable;
  }
  st.in_progress = false;
  if (st.dirty) run_pass(self);
}

void step_done(reconciler_self self) {
  if (--self->state.pending == 0) finish_pass(self);
}

/// The session stops using `name`'s connection; the pool is told at once.
void let_go(reconciler_self self, const std::string& name, const std::string& why, release_reason reason) {
  auto& st = self->state;
  auto i = st.live.find(name);
  if (i == st.live.end()) return;
  auto s = std::move(i->second);
  st.erase_live(name);
  self->send(st.opts.pool, pool_detach{st.opts.pool_session, s.id, reason});
  publish(self, st.opts.bus, events::client_update::disconnected(st.opts.session, name, s.id, why));
}

/// Asks `name`'s connection for its tools again, so that a listing of a
/// pinned server reaches gating without waiting for a caller (the first
/// after an approval is the one pinned); with `tell`, the session's view
/// of its tools is published (`client_update` refiltered), so that the
/// gateway lists them again.
void relist(reconciler_self self, const std::string& name, bool tell) {
  auto i = self->state.live.find(name);
  if (i == self->state.live.end()) return;
  with_connection(
    self, i->second,
    [self, name, tell](connection_actor conn) {
      self->request(conn, std::chrono::seconds(10), atom::info_v)
        .then(
          [self, name, tell](connection_info& ci) {
            auto& st = self->state;
            auto j = st.live.find(name);
            if (j == st.live.end()) return;
            auto shown = filter_tools_info(apply_pins(self, name, std::move(ci.tools)).shown, j->second.cfg);
            if (tell)
              publish(self, st.opts.bus,
                      events::client_update::refiltered_tools(st.opts.session, name, j->second.id, ci.status,
                                                              static_cast<uint32_t>(shown.size())));
          },
          [](caf::error&) {});
    },
    [](caf::error&) {});
}

/// Acquires `cfg`; `replaced` is the live connection of a changed config it
/// replaces make-before-break: the old one stays live (calls go to it, its
/// tools stay listed) until the new one is up, then is let go. When the new
/// one fails, the old one stays and the failure is reported; the next pass
/// tries the new config again.
void connect_server(reconciler_self self, const server_config& cfg, std::optional<std::string> replaced = std::nullopt) {
  auto& st = self->state;
  auto name = cfg.name;
  ++st.pending;
  st.connecting.insert(name);
  auto holder = caf::actor_cast<pool_holder_actor>(self);
  auto release_replaced = [self, replaced] {
    if (replaced)
      self->send(self->state.opts.pool, pool_detach{self->state.opts.pool_session, *replaced, release_reason::changed});
  };
  // Whether the replaced connection is still the live one (it may have
  // failed meanwhile, and left the live set).
  auto old_still_live = [self, name, replaced] {
    auto& st = self->state;
    auto i = st.live.find(name);
    return replaced && i != st.live.end() && i->second.id == *replaced;
  };
  self->request(st.opts.pool, st.opts.acquire_timeout, pool_acquire{st.opts.pool_session, cfg, holder})
    .then(
      [self, cfg, release_replaced](pool_handle& h) {
        auto& st = self->state;
        release_replaced();
        live_server s;
        s.cfg = cfg;
        s.id = h.connection_id;
        s.conn = h.connection;
        s.conn_generation = h.generation;
        s.generation = h.generation;
        s.status = connection_status::connected;
        st.set_live(cfg.name, std::move(s));
        if (auto r = st.retries.find(cfg.name); r != st.retries.end()) r->second.connected_at = self->clock().now();
        note_connected(st.report, cfg.name);
        acquire_settled(self, cfg.name);
        if (auto p = st.pins.find(cfg.name); p != st.pins.end() && p->second.on) relist(self, cfg.name, false);
        step_done(self);
      },
      [self, name, release_replaced, old_still_live](caf::error& e) {
        auto& st = self->state;
        if (old_still_live()) {
          st.report.errors.emplace_back(name, self->system().render(e) + " (the previous connection stays)");
          acquire_settled(self, name);
          step_done(self);
          return;
        }
        release_replaced();
        if (is(e, errc::budget_exhausted)) {
          st.report.skipped.push_back({name, "budget_exhausted",
                                       self->system().render(e)
                                         + "; raise the budget (--budget / MCPRT_BUDGET) or remove a server"});
        } else if (is(e, errc::needs_auth)) {
          // Not retried on a timer: only a person can fix it. The next pass
          // after `mcprt auth` acquires it with the stored tokens.
          auto remedy = "run mcprt auth " + name;
          st.report.skipped.push_back({name, "needs_auth", self->system().render(e) + "; " + remedy});
          publish(self, st.opts.bus, events::auth_required{name, self->system().render(e), remedy});
        } else
          st.report.errors.emplace_back(name, self->system().render(e));
        acquire_settled(self, name);
        step_done(self);
      });
}

void refilter(reconciler_self self, const server_config& cfg) {
  auto& st = self->state;
  auto i = st.live.find(cfg.name);
  if (i == st.live.end()) return;
  i->second.cfg = cfg;
  st.live_view[cfg.name].filter_key = filter_key(cfg);
  ++st.pending;
  auto name = cfg.name;
  with_connection(
    self, i->second,
    [self, name](connection_actor conn) {
      self->request(conn, std::chrono::seconds(10), atom::info_v)
        .then(
          [self, name](connection_info& ci) {
            auto& st = self->state;
            auto j = st.live.find(name);
            if (j != st.live.end()) {
              auto shown = filter_tools_info(apply_pins(self, name, std::move(ci.tools)).shown, j->second.cfg);
              publish(self, st.opts.bus,
                      events::client_update::refiltered_tools(st.opts.session, name, j->second.id, ci.status,
                                                              static_cast<uint32_t>(shown.size())));
            }
            step_done(self);
          },
          [self](caf::error&) { step_done(self); });
    },
    [self](caf::error&) { step_done(self); });
}

void run_pass(reconciler_self self) {
  auto& st = self->state;
  st.dirty = false;
  if (!st.desired.trusted) { // an untrusted folder starts nothing
    release_early(self);
    return;
  }
  st.in_progress = true;
  ++st.generation;
  st.report = {};
  publish(self, st.opts.bus, events::reconcile_started{st.opts.session, st.generation, st.desired.revision});
  st.pass_start = std::chrono::steady_clock::now();
  auto plan = st.plan_all ? plan_reconcile(st.desired_map, st.live_view)
                           : plan_reconcile(st.desired_map, st.live_view, st.changed, st.sorted_live_names());
  st.plan_all = false;
  st.changed.clear();
  st.applied_from = std::chrono::steady_clock::now();
  st.plan_ms = std::chrono::duration<double, std::milli>(st.applied_from - st.pass_start).count();
  st.report.removed = plan.removed;
  st.report.restarted = plan.restarted;
  st.report.refiltered = plan.refiltered;
  st.report.kept = std::move(plan.kept);
  if (st.opts.budget) self->send(st.opts.budget, atom::begin_pass_v, false);
  for (auto& name : plan.removed)
    let_go(self, name, "removed", release_reason::removed);
  // Changed servers stay live until their replacement is up (connect_server).
  std::map<std::string, std::optional<std::string>> replaced;
  for (auto& name : plan.restarted)
    if (auto i = st.live.find(name); i != st.live.end()) replaced[name] = i->second.id;
  for (auto i = st.retries.begin(); i != st.retries.end();)
    i = st.desired_map.count(i->first) ? std::next(i) : st.retries.erase(i);
  st.pending = 1; // held until every step below has been issued
  auto now = self->clock().now();
  std::optional<caf::actor_clock::time_point> next_retry;
  for (auto& name : plan.added) {
    if (auto r = st.retries.find(name); r != st.retries.end() && r->second.not_before > now) {
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(r->second.not_before - now);
      st.report.skipped.push_back({name, "backoff",
                                   "its connection failed (" + r->second.error + "); mcprt acquires it again in "
                                     + std::to_string(wait.count()) + " ms"});
      if (!next_retry || r->second.not_before < *next_retry) next_retry = r->second.not_before;
      continue;
    }
    connect_server(self, st.desired_map.at(name));
  }
  if (next_retry && !st.requeue_armed) {
    st.requeue_armed = true;
    self->delayed_send(self, *next_retry - now, atom::requeue_v);
  }
  for (auto& name : plan.restarted)
    connect_server(self, st.desired_map.at(name), std::move(replaced[name]));
  for (auto& name : plan.refiltered)
    refilter(self, st.desired_map.at(name));
  step_done(self);
  release_early(self);
}

void request_pass(reconciler_self self) {
  auto& st = self->state;
  if (!st.started || !st.have_desired) return; // before start: a safe no-op
  if (st.in_progress) {
    st.dirty = true;
    return;
  }
  run_pass(self);
}

// -- snapshot and stop -----------------------------------------------------------------

struct snapshot_job {
  caf::typed_response_promise<session_snapshot> rp;
  session_snapshot result;
  std::size_t pending = 0;
  void done() {
    if (--pending == 0) {
      std::sort(result.servers.begin(), result.servers.end(),
                [](const session_server& a, const session_server& b) { return a.name < b.name; });
      rp.deliver(std::move(result));
    }
  }
};

caf::result<session_snapshot> snapshot(reconciler_self self) {
  auto& st = self->state;
  auto job = std::make_shared<snapshot_job>();
  job->rp = self->make_response_promise<session_snapshot>();
  job->result.session = st.opts.session;
  job->result.generation = st.generation;
  job->result.in_progress = st.in_progress;
  job->result.last_error = st.last_error;
  job->result.skipped = st.skipped;
  job->result.failed = st.failed;
  job->pending = 1;
  for (auto& [name, s] : st.live) {
    ++job->pending;
    session_server base;
    base.name = name;
    base.scope = to_string(s.cfg.scope);
    base.transport = to_string(s.cfg.transport());
    base.connection_id = s.id;
    base.status = s.status;
    base.pid = s.pid;
    base.last_error = s.error;
    auto cfg = s.cfg;
    auto fallback = [job, base](caf::error&) mutable {
      job->result.servers.push_back(base);
      job->done();
    };
    with_connection(
      self, s,
      [self, job, base, cfg, fallback](connection_actor conn) mutable {
        self->request(conn, std::chrono::seconds(5), atom::info_v)
          .then(
            [self, job, base, cfg](connection_info& ci) mutable {
              base.status = ci.status;
              base.pid = ci.pid;
              auto shown = apply_pins(self, base.name, std::move(ci.tools)).shown;
              base.tools = static_cast<uint32_t>(filter_tools_info(shown, cfg).size());
              base.prompts = static_cast<uint32_t>(ci.prompts.size());
              base.last_error = ci.last_error;
              base.sandbox = ci.sandbox;
              job->result.servers.push_back(std::move(base));
              job->done();
            },
            fallback);
      },
      fallback);
  }
  auto rp = job->rp;
  job->done();
  return rp;
}

caf::result<bool> stop_reconciler(reconciler_self self) {
  auto& st = self->state;
  for (auto& [name, lookups] : st.waiting)
    for (auto& w : lookups)
      w.rp.deliver(make_error(errc::not_connected, name + ": the session closed"));
  st.waiting.clear();
  auto rp = self->make_response_promise<bool>();
  self->request(st.opts.pool, std::chrono::seconds(30), atom::release_session_v, st.opts.pool_session)
    .then([self, rp](uint64_t) mutable { rp.deliver(true); self->quit(); },
          [self, rp](caf::error&) mutable { rp.deliver(true); self->quit(); });
  st.live.clear();
  st.live_view.clear();
  st.live_names_stale = true;
  return rp;
}

/// The pool says what happened to an entry the session holds.
void entry_changed(reconciler_self self, const pool_entry_changed& c) {
  auto& st = self->state;
  auto i = st.live.find(c.server);
  if (i == st.live.end() || i->second.id != c.connection_id) return; // let go already
  auto& s = i->second;
  if (c.generation < s.generation) return; // about a connection the entry has replaced since
  s.generation = c.generation;
  switch (c.what) {
    case pool_entry_event::restarting:
      s.status = connection_status::connecting;
      s.error = c.error;
      return;
    case pool_entry_event::restarted:
      s.status = connection_status::connected;
      s.error.clear();
      return;
    case pool_entry_event::failed:
    case pool_entry_event::closed:
      break;
  }
  // The handle is dead: the server leaves the live set (the next plan sees
  // it as missing, never as kept) and comes back after its backoff.
  auto& r = st.retries[c.server];
  auto now = self->clock().now();
  // A server that stayed up past the longest backoff starts over; one that
  // flaps keeps backing off.
  if (r.connected_at && now - *r.connected_at >= st.opts.retry_cap) r.failures = 0;
  r.connected_at.reset();
  ++r.failures;
  r.error = c.error.empty() ? to_string(c.what) : c.error;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto delay = backoff_delay(r.failures - 1, st.opts.retry_base, st.opts.retry_cap, 0.1, unit(st.rng));
  r.not_before = now + delay;
  auto id = s.id;
  st.erase_live(c.server);
  st.plan_all = true;
  publish(self, st.opts.bus, events::client_update::disconnected(st.opts.session, c.server, id, to_string(c.what)));
  request_pass(self);
}

reconciler_actor::behavior_type reconciler(reconciler_self self, reconciler_options opts) {
  self->state.opts = std::move(opts);
  return {
    [self](desired_state& d) {
      auto& st = self->state;
      // The configs move into the map: copying 10,000 of them per push
      // would cost more than the whole plan.
      if (!d.delta) {
        st.desired_map.clear();
        st.plan_all = true;
      }
      for (auto& name : d.withdrawn) {
        st.desired_map.erase(name);
        st.changed.insert(name);
      }
      for (auto& c : d.admitted) {
        auto name = c.name;
        if (d.delta) st.changed.insert(name);
        st.desired_map.insert_or_assign(std::move(name), std::move(c));
      }
      d.admitted.clear();
      d.withdrawn.clear();
      st.desired = std::move(d);
      st.have_desired = true;
    },
    [self](atom::reconcile) { request_pass(self); },
    [self](atom::start) {
      auto& st = self->state;
      if (!st.started && st.opts.budget)
        self->send(st.opts.budget, atom::subscribe_v, caf::actor_cast<budget_listener_actor>(self));
      st.started = true;
      request_pass(self);
    },
    [self](atom::lookup, const std::string& server, const std::string& tool) {
      return lookup_route(self, server, tool);
    },
    [self](atom::tools, const std::string& server) -> caf::result<std::vector<tool_info>> {
      auto& st = self->state;
      auto i = st.live.find(server);
      if (i == st.live.end()) return unavailable_error(st, server);
      auto rp = self->make_response_promise<std::vector<tool_info>>();
      auto cfg = i->second.cfg;
      with_connection(
        self, i->second,
        [self, rp, cfg](connection_actor conn) mutable {
          self->request(conn, std::chrono::seconds(10), atom::info_v)
            .then(
              [self, rp, cfg](connection_info& ci) mutable {
                rp.deliver(filter_tools_info(apply_pins(self, cfg.name, std::move(ci.tools)).shown, cfg));
              },
              [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
        },
        [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
      return rp;
    },
    [self](atom::info, const std::string& server) -> caf::result<connection_info> {
      auto& st = self->state;
      auto i = st.live.find(server);
      if (i == st.live.end()) return unavailable_error(st, server);
      auto rp = self->make_response_promise<connection_info>();
      auto cfg = i->second.cfg;
      with_connection(
        self, i->second,
        [self, rp, cfg](connection_actor conn) mutable {
          self->request(conn, std::chrono::seconds(10), atom::info_v)
            .then(
              [self, rp, cfg](connection_info& ci) mutable {
                auto view = apply_pins(self, cfg.name, std::move(ci.tools));
                ci.tools = filter_tools_info(view.shown, cfg);
                for (auto& [tool, added] : view.held)
                  if (passes(tool, cfg.include_tools, cfg.exclude_tools)) ci.held_tools.push_back(tool);
                rp.deliver(std::move(ci));
              },
              [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
        },
        [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
      return rp;
    },
    [self](atom::snapshot) { return snapshot(self); },
    [self](atom::stop) { return stop_reconciler(self); },
    [self](const pool_entry_changed& c) { entry_changed(self, c); },
    [self](const budget_slot_freed&) {
      auto& st = self->state;
      auto refused = [](const std::vector<unavailability>& xs) {
        return std::any_of(xs.begin(), xs.end(), [](const unavailability& u) { return u.reason == "budget_exhausted"; });
      };
      // During a pass, an acquire still in flight may be refused before this
      // slot's release reached the budget: one more pass settles it.
      // The servers refused are in desired and not live: a full plan finds
      // them. A slot freed with nobody waiting for one changes no plan.
      if (refused(st.skipped) || (st.in_progress && (refused(st.report.skipped) || !st.connecting.empty()))) {
        st.plan_all = true;
        request_pass(self);
      }
    },
    [self](definition_pin_state& p) {
      auto& st = self->state;
      auto name = p.server;
      st.offered_told.erase(name);
      st.pins.insert_or_assign(name, std::move(p));
      relist(self, name, true);
    },
    [self](atom::requeue) {
      self->state.requeue_armed = false;
      self->state.plan_all = true;
      request_pass(self);
    },
  };
}

} // namespace

reconciler_actor spawn_reconciler(caf::actor_system& sys, reconciler_options opts) {
  return sys.spawn(reconciler, std::move(opts));
}

} // namespace mcprt
