// The pool's rules. Design in brief:
// - One map id -> entry. An entry exists from the first acquire (while the
//   budget reservation is in flight, then while spawning) until it is closed
//   or given up, so "a sibling of this name" is a scan of that one map and
//   concurrent acquires of one id always meet the same entry (one spawn).
// - Slots: `held_` names the slots this pool reserved itself. A slot goes
//   back only when no entry of the name is left and the pool holds it, so
//   an `already_held` answer for someone else's slot is never released.
// - Staleness: updates carry (id, generation); generations are issued per
//   id and never reused, and the table supersedes a connection (clears
//   `live`, or bumps the generation) before it asks for it to stop, so only
//   updates of the current connection act. Timers carry a table-wide token;
//   only the entry's current token acts. Late budget replies carry the
//   entry serial.
// - The hot path (attach to a live entry, detach that leaves others
//   attached) produces no effect and does not allocate in steady state: no
//   budget traffic, no events, no timers; holder nodes are reused. An entry
//   has at most one drain timer in flight; a release that starts a drain
//   only moves the entry's deadline, and the timer re-arms itself for what
//   is left.
// - Why an entry goes: the last holder's release reason decides. A closed
//   session drains it (that session or another may come back for it); a
//   config that no longer wants it (removed, changed) closes it at once, so
//   its process stops and its slot is free now, unless another session is
//   already waiting for it.
// - Holders hear what happens to an entry they hold: restarting (a crash),
//   restarted, failed (given up: the entry is gone), closed (drained under
//   them). Sessions only waiting for an entry get their answer instead.

#include "core/pool_table.hpp"

#include <algorithm>
#include <utility>

#include "core/fingerprint.hpp"
#include "core/untrusted_text.hpp"

namespace mcprt {

namespace {

using std::chrono::milliseconds;

constexpr double backoff_jitter = 0.1;

pool_table_options clamped(pool_table_options opts) {
  opts.drain_delay = std::clamp<milliseconds>(opts.drain_delay, std::chrono::seconds(1), std::chrono::minutes(10));
  return opts;
}

const char* reason_text(pool_release r) {
  switch (r) {
    case pool_release::session_closed: return "session_closed";
    case pool_release::removed: return "removed";
    case pool_release::changed: return "changed";
  }
  return "released";
}

} // namespace

pool_table::pool_table(pool_table_options opts) : opts_(clamped(std::move(opts))), rng_(opts_.seed) {
  // nop
}

// -- helpers --------------------------------------------------------------------------

pool_table::entry* pool_table::find(const std::string& id, uint64_t serial) {
  auto i = entries_.find(id);
  if (i == entries_.end()) return nullptr;
  if (serial != 0 && i->second.serial != serial) return nullptr;
  return &i->second;
}

std::string pool_table::shown(const std::string& id) const {
  return opts_.show_id ? opts_.show_id(id) : id;
}

void pool_table::log(pool_log_effect::level level, std::string text) {
  effects_.emplace_back(pool_log_effect{level, std::move(text)});
}

double pool_table::unit_random() {
  if (opts_.unit_random) return opts_.unit_random();
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

bool pool_table::has_sibling(const std::string& name) const {
  for (auto& [id, e] : entries_)
    if (e.name == name) return true;
  return false;
}

void pool_table::release_slot_if_last(const std::string& name) {
  if (!opts_.budget || held_.count(name) == 0 || has_sibling(name)) return;
  held_.erase(name);
  effects_.emplace_back(pool_release_slot_effect{name});
}

void pool_table::attach_holder(entry& e, uint64_t session) {
  ++e.refs;
  if (auto h = e.holders.find(session); h != e.holders.end()) {
    ++h->second;
    return;
  }
  if (spare_holders_.empty()) {
    e.holders.emplace(session, 1);
    return;
  }
  auto node = std::move(spare_holders_.back());
  spare_holders_.pop_back();
  node.key() = session;
  node.mapped() = 1;
  e.holders.insert(std::move(node));
}

void pool_table::drop_holder(entry& e, holder_map::iterator h) {
  auto node = e.holders.extract(h);
  if (spare_holders_.size() < 1024) spare_holders_.push_back(std::move(node));
}

void pool_table::spawn(entry& e) {
  e.generation = ++generations_[e.id];
  e.link = pool_link::connecting;
  e.pid = -1;
  e.live = true;
  effects_.emplace_back(pool_spawn_effect{e.id, e.connection, e.generation, e.config});
}

void pool_table::stop(entry& e, bool ask_tail, std::optional<pool_event> failed) {
  if (!e.live) {
    if (failed) effects_.emplace_back(pool_publish_effect{finish_failed_event(std::move(*failed), {})});
    return;
  }
  e.live = false;
  effects_.emplace_back(pool_stop_effect{e.connection, ask_tail || failed, e.id, e.serial, std::move(failed)});
}

void pool_table::fail_waiters(entry& e, pool_error code, const std::string& message) {
  auto ws = std::move(e.waiters);
  e.waiters.clear();
  for (auto& w : ws)
    effects_.emplace_back(pool_fail_effect{w.token, code, message});
}

void pool_table::finish_restart_waiters(entry& e, bool ok, const std::string& reason, pool_time now) {
  auto ws = std::move(e.restart_waiters);
  e.restart_waiters.clear();
  for (auto& w : ws) {
    auto req = restarts_.find(w.request);
    if (req == restarts_.end()) continue;
    auto& r = req->second.results[w.index];
    r.restarted = ok;
    r.duration_ms = std::chrono::duration_cast<milliseconds>(now - w.started).count();
    r.reason = ok ? std::string{} : reason;
    if (--req->second.pending == 0) {
      effects_.emplace_back(pool_restart_done_effect{w.request, std::move(req->second.results)});
      restarts_.erase(req);
    }
  }
}

void pool_table::notify_holders(const entry& e, pool_change what, const std::string& error) {
  for (auto& [session, handles] : e.holders)
    effects_.emplace_back(pool_notify_effect{session, e.id, e.name, what, e.generation, error});
}

pool_event pool_table::event_of(const entry& e, pool_event::kind what) {
  pool_event ev;
  ev.what = what;
  ev.id = e.id;
  ev.name = e.name;
  ev.generation = e.generation;
  ev.restarts = e.restarts;
  ev.last_error = e.last_error;
  return ev;
}

void pool_table::publish_restarted(const entry& e, const char* reason) {
  auto ev = event_of(e, pool_event::kind::restarted);
  ev.reason = reason;
  effects_.emplace_back(pool_publish_effect{std::move(ev)});
}

void pool_table::remove(const std::string& id) {
  auto i = entries_.find(id);
  if (i == entries_.end()) return;
  auto name = std::move(i->second.name);
  free_connections_.push_back(i->second.connection);
  entries_.erase(i);
  release_slot_if_last(name);
}

void pool_table::close(entry& e, const char* reason, pool_time now) {
  log(pool_log_effect::level::debug, "pool: closing " + shown(e.id) + " (" + reason + ")");
  fail_waiters(e, pool_error::not_connected, e.name + ": pool entry closed (" + reason + ")");
  finish_restart_waiters(e, false, std::string("closed (") + reason + ")", now);
  notify_holders(e, pool_change::closed, std::string("closed (") + reason + ")");
  stop(e);
  remove(e.id);
}

void pool_table::arm_drain_timer(entry& e, milliseconds delay) {
  e.drain_token = next_token_++;
  effects_.emplace_back(pool_timer_effect{pool_timer_type::drain, e.id, e.drain_token, delay});
}

void pool_table::start_drain(entry& e, pool_time now) {
  e.state = pool_state::draining;
  e.drain_deadline = now + opts_.drain_delay;
  // A timer still in flight (from an earlier drain that an attach ended)
  // fires before the new deadline and re-arms itself for the rest.
  if (e.drain_token == 0) arm_drain_timer(e, opts_.drain_delay);
  if (!e.idle_armed) {
    e.idle_armed = true;
    e.idle_token = next_token_++;
    effects_.emplace_back(pool_timer_effect{pool_timer_type::idle, e.id, e.idle_token, opts_.max_idle});
  }
}

void pool_table::after_release(entry& e, pool_release reason, pool_time now) {
  if (e.refs > 0) return;
  if (reason != pool_release::session_closed && e.waiters.empty()) {
    close(e, reason_text(reason), now);
    return;
  }
  if (e.state == pool_state::active) start_drain(e, now);
}

void pool_table::connected(entry& e, pool_time now) {
  // Holders first: the sessions that were waiting get their handle instead.
  if (e.state == pool_state::restarting) notify_holders(e, pool_change::restarted, {});
  // last_error stays: the snapshot shows why the entry was last restarted.
  auto ws = std::move(e.waiters);
  e.waiters.clear();
  for (auto& w : ws)
    attach_holder(e, w.session);
  for (auto& w : ws)
    effects_.emplace_back(pool_reply_effect{w.token, e.id, e.connection, e.generation});
  finish_restart_waiters(e, true, {}, now);
  if (e.refs > 0)
    e.state = pool_state::active;
  else
    start_drain(e, now);
}

void pool_table::failure(entry& e, const std::string& why, pool_time now) {
  using level = pool_log_effect::level;
  e.last_error = why.empty() ? std::string("connection failed") : why;
  e.link = pool_link::error;
  finish_restart_waiters(e, false, e.last_error, now);
  if (e.state == pool_state::spawning) {
    // Never connected: a failed spawn. Every waiter fails; the slot goes
    // back unless a sibling of the name remains.
    log(level::warn, "pool: " + shown(e.id) + " failed to start: " + escape_for_display(e.last_error));
    fail_waiters(e, pool_error::spawn_failed, e.name + ": " + e.last_error);
    stop(e);
    remove(e.id);
    return;
  }
  if (e.state == pool_state::draining && e.refs == 0 && e.waiters.empty()) {
    // Nobody uses it: close it now instead of restarting it.
    log(level::info,
        "pool: idle " + shown(e.id) + " went away (" + escape_for_display(e.last_error) + "); closing it");
    stop(e);
    remove(e.id);
    return;
  }
  if (e.intensity.allow(now)) {
    auto in_window = e.intensity.count_in_window(now);
    auto attempt = static_cast<unsigned>(in_window > 0 ? in_window - 1 : 0);
    auto delay = backoff_delay(attempt, opts_.backoff_base, opts_.backoff_cap, backoff_jitter, unit_random());
    log(level::warn, "pool: " + shown(e.id) + " crashed (" + escape_for_display(e.last_error) + "); restarting in "
                       + std::to_string(delay.count()) + " ms");
    e.state = pool_state::restarting;
    e.drain_token = 0; // no drain while restarting
    e.restart_token = next_token_++;
    effects_.emplace_back(pool_timer_effect{pool_timer_type::restart, e.id, e.restart_token, delay});
    stop(e, true);
    notify_holders(e, pool_change::restarting, e.last_error);
    return;
  }
  // Beyond the restart intensity: give up on it.
  log(level::error, "pool: " + shown(e.id) + " crashed " + std::to_string(e.intensity.max_restarts() + 1)
                      + " times within " + std::to_string(e.intensity.window().count())
                      + " ms; giving up: " + escape_for_display(e.last_error));
  fail_waiters(e, pool_error::spawn_failed, e.name + ": " + e.last_error);
  notify_holders(e, pool_change::failed, e.last_error);
  auto failed = event_of(e, pool_event::kind::failed);
  failed.stderr_tail = e.stderr_tail;
  stop(e, true, std::move(failed));
  remove(e.id);
}

// The server refuses us until a person authorizes: restarting it would
// only be refused again, so the entry fails at once and leaves; the next
// acquire after `mcprt auth` starts afresh with the stored tokens.
void pool_table::needs_auth(entry& e, const std::string& why, pool_time now) {
  e.last_error = why.empty() ? std::string("authorization required") : why;
  e.link = pool_link::needs_auth;
  finish_restart_waiters(e, false, e.last_error, now);
  log(pool_log_effect::level::warn, "pool: " + shown(e.id) + " needs authorization: " + escape_for_display(e.last_error));
  fail_waiters(e, pool_error::needs_auth, e.name + ": " + e.last_error);
  if (e.state == pool_state::spawning) {
    stop(e);
    remove(e.id);
    return;
  }
  notify_holders(e, pool_change::failed, e.last_error);
  stop(e, false, event_of(e, pool_event::kind::failed));
  remove(e.id);
}

pool_event pool_table::finish_failed_event(pool_event failed, std::vector<std::string> tail) const {
  if (!tail.empty()) failed.stderr_tail = std::move(tail);
  auto& xs = failed.stderr_tail;
  auto n = opts_.failed_stderr_lines;
  if (xs.size() > n) xs.erase(xs.begin(), xs.end() - static_cast<std::ptrdiff_t>(n));
  return failed;
}

pool_join pool_table::join(entry& e, uint64_t session, uint64_t waiter) {
  pool_join j;
  if (e.state == pool_state::active || e.state == pool_state::draining) {
    attach_holder(e, session);
    // Ends a drain; its timer (if any) lapses when it finds the entry
    // active again.
    e.state = pool_state::active;
    j.result = pool_join::outcome::ready;
    j.id = &e.id;
    j.connection = e.connection;
    j.generation = e.generation;
    return j;
  }
  e.waiters.push_back({session, waiter});
  j.result = pool_join::outcome::waiting;
  return j;
}

// -- events ---------------------------------------------------------------------------

pool_join pool_table::acquire(uint64_t session, server_config config, uint64_t waiter) {
  if (draining_) {
    pool_join j;
    j.code = pool_error::pool_draining;
    j.message = "pool is draining; refusing acquire of " + config.name;
    return j;
  }
  // The parsed config carries its id: no hashing per acquire.
  auto id = config.connection_id_cache.empty() ? compute_connection_id(config) : config.connection_id_cache;
  if (auto e = find(id)) return join(*e, session, waiter);
  auto& e = entries_[id];
  e.serial = next_serial_++;
  e.id = id;
  e.name = config.name;
  e.transport = to_string(config.transport());
  e.config = std::move(config);
  e.intensity = restart_intensity(opts_.max_restarts, opts_.restart_window);
  if (free_connections_.empty()) {
    e.connection = next_connection_++;
  } else {
    e.connection = free_connections_.back();
    free_connections_.pop_back();
  }
  e.waiters.push_back({session, waiter});
  if (opts_.budget)
    effects_.emplace_back(pool_reserve_effect{e.id, e.serial, e.name, e.transport});
  else
    spawn(e);
  pool_join j;
  j.result = pool_join::outcome::waiting;
  return j;
}

pool_join pool_table::attach(uint64_t session, const std::string& id, uint64_t waiter) {
  pool_join j;
  if (draining_) {
    j.code = pool_error::pool_draining;
    j.message = "pool is draining; refusing acquire of " + id;
    return j;
  }
  if (auto e = find(id)) return join(*e, session, waiter);
  j.code = pool_error::not_connected;
  j.message = id + ": no pool entry; acquire it with its config";
  return j;
}

bool pool_table::detach(uint64_t session, const std::string& id, pool_release reason, pool_time now) {
  auto e = find(id);
  if (!e) return false;
  if (auto h = e->holders.find(session); h != e->holders.end()) {
    if (--h->second == 0) drop_holder(*e, h);
    --e->refs;
    after_release(*e, reason, now);
    return true;
  }
  // Released before the connection was ready: the waiting acquire fails.
  auto& ws = e->waiters;
  auto i = std::find_if(ws.begin(), ws.end(), [&](const waiter& w) { return w.session == session; });
  if (i == ws.end()) return false;
  auto token = i->token;
  ws.erase(i);
  effects_.emplace_back(
    pool_fail_effect{token, pool_error::not_connected, e->name + ": released before the connection was ready"});
  after_release(*e, reason, now);
  return true;
}

uint64_t pool_table::release_session(uint64_t session, pool_time now) {
  uint64_t n = 0;
  for (auto& [id, e] : entries_) {
    if (auto h = e.holders.find(session); h != e.holders.end()) {
      n += h->second;
      e.refs -= h->second;
      drop_holder(e, h);
      if (e.refs == 0 && e.state == pool_state::active) start_drain(e, now);
    }
    auto keep = std::partition(e.waiters.begin(), e.waiters.end(),
                               [&](const waiter& w) { return w.session != session; });
    for (auto i = keep; i != e.waiters.end(); ++i)
      effects_.emplace_back(pool_fail_effect{i->token, pool_error::not_connected,
                                             e.name + ": released before the connection was ready"});
    e.waiters.erase(keep, e.waiters.end());
  }
  return n;
}

void pool_table::reserve_answered(const std::string& id, uint64_t serial, const std::string& name, reserve_result r,
                                  std::optional<uint64_t> budget_size, pool_time) {
  if (r == reserve_result::reserved) held_.insert(name);
  auto e = find(id, serial);
  if (!e) {
    // Torn down (closed or drained) while the reservation was in flight.
    release_slot_if_last(name);
    return;
  }
  // The budget already settled the refusal record (reserve with transport).
  if (r != reserve_result::refused) {
    spawn(*e);
    return;
  }
  // Only an enforcing budget refuses, and it refuses only when full: it
  // never reserves past its size, so at the refusal reserved == budget.
  auto message = budget_size ? name + ": budget " + std::to_string(*budget_size) + " exhausted ("
                                 + std::to_string(*budget_size) + " reserved)"
                             : name + ": budget exhausted";
  fail_waiters(*e, pool_error::budget_exhausted, message);
  remove(id);
}

void pool_table::reserve_failed(const std::string& id, uint64_t serial, pool_error code, const std::string& message) {
  if (auto e = find(id, serial)) {
    fail_waiters(*e, code, message);
    remove(id);
  }
}

void pool_table::connection_update(const std::string& id, uint64_t generation, pool_link link, int32_t pid,
                                   const std::string& error, pool_time now) {
  auto e = find(id);
  if (!e || !e->live || generation != e->generation) return; // superseded or retired
  e->pid = pid;
  e->link = link;
  switch (link) {
    case pool_link::connecting:
      break;
    case pool_link::connected:
      if (e->state == pool_state::spawning || e->state == pool_state::restarting) connected(*e, now);
      break;
    case pool_link::error:
      failure(*e, error, now);
      break;
    case pool_link::needs_auth:
      needs_auth(*e, error, now);
      break;
    case pool_link::disconnected:
      // The table supersedes a connection before stopping it, so a
      // disconnect of the current one was not asked for.
      failure(*e, error.empty() ? "connection closed unexpectedly" : error, now);
      break;
  }
}

void pool_table::connection_down(const std::string& id, uint64_t generation, const std::string& why, pool_time now) {
  auto e = find(id);
  if (!e || !e->live || generation != e->generation) return;
  failure(*e, why, now);
}

void pool_table::stderr_tail(const std::string& id, uint64_t serial, std::optional<pool_event> failed,
                             std::vector<std::string> tail) {
  // A given-up entry is gone by now: its event carries what it left.
  if (failed) {
    effects_.emplace_back(pool_publish_effect{finish_failed_event(std::move(*failed), std::move(tail))});
    return;
  }
  if (auto e = find(id, serial); e && !tail.empty()) e->stderr_tail = std::move(tail);
}

void pool_table::timer_fired(pool_timer_type kind, const std::string& id, uint64_t token, pool_time now) {
  auto e = find(id);
  if (!e) return;
  switch (kind) {
    case pool_timer_type::drain: {
      if (e->drain_token != token) return;
      e->drain_token = 0;
      if (e->state != pool_state::draining || e->refs > 0) return; // in use again: lapses
      if (now < e->drain_deadline) {
        // Re-attached and released again since this timer was set.
        arm_drain_timer(*e, std::chrono::ceil<milliseconds>(e->drain_deadline - now));
        return;
      }
      close(*e, "drain_timer", now);
      return;
    }
    case pool_timer_type::idle: {
      if (e->idle_token != token || !e->idle_armed) return;
      if (e->refs == 0 && e->waiters.empty() && e->state == pool_state::draining) {
        close(*e, "max_idle", now);
        return;
      }
      // In use at this moment: the next idle period starts a fresh limit.
      e->idle_armed = false;
      return;
    }
    case pool_timer_type::restart: {
      if (e->restart_token != token || e->state != pool_state::restarting || e->live) return;
      ++e->restarts;
      spawn(*e);
      publish_restarted(*e, "crash");
      return;
    }
  }
}

void pool_table::restart(const std::string& name, uint64_t request, pool_time now) {
  std::vector<pool_restart_outcome> results;
  if (draining_) {
    effects_.emplace_back(pool_restart_done_effect{request, std::move(results)});
    return;
  }
  std::vector<entry*> matching;
  for (auto& [id, e] : entries_)
    if (e.name == name) matching.push_back(&e);
  std::sort(matching.begin(), matching.end(), [](const entry* a, const entry* b) { return a->id < b->id; });
  std::size_t pending = 0;
  for (auto* match : matching) {
    auto& e = *match;
    pool_restart_outcome r;
    r.id = e.id;
    if (e.state == pool_state::spawning) {
      r.reason = "still starting";
      results.push_back(std::move(r));
      continue;
    }
    results.push_back(std::move(r));
    stop(e);
    e.state = pool_state::restarting;
    e.drain_token = 0;   // re-armed once it is connected, if still idle
    e.restart_token = 0; // a pending crash restart happens now instead
    ++e.restarts;
    spawn(e);
    e.restart_waiters.push_back({request, results.size() - 1, now});
    ++pending;
    publish_restarted(e, "manual");
  }
  if (pending == 0)
    effects_.emplace_back(pool_restart_done_effect{request, std::move(results)});
  else
    restarts_[request] = restart_request{std::move(results), pending};
}

pool_drain_plan pool_table::drain_all(pool_time now) {
  draining_ = true;
  pool_drain_plan plan;
  for (auto& [id, e] : entries_) {
    fail_waiters(e, pool_error::pool_draining, e.name + ": pool is draining");
    finish_restart_waiters(e, false, "pool is draining", now);
    notify_holders(e, pool_change::closed, "pool is draining");
    if (e.live)
      plan.to_stop.push_back({id, e.connection});
    else
      ++plan.already_stopped;
  }
  entries_.clear();
  // Every entry is gone: every slot this pool holds goes back.
  for (auto& name : held_)
    effects_.emplace_back(pool_release_slot_effect{name});
  held_.clear();
  return plan;
}

// -- observers ------------------------------------------------------------------------

const std::string* pool_table::live_id(const std::string& id, std::size_t& connection, uint64_t& generation) const {
  auto i = entries_.find(id);
  if (i == entries_.end() || !i->second.live) return nullptr;
  connection = i->second.connection;
  generation = i->second.generation;
  return &i->second.id;
}

std::vector<pool_entry_view> pool_table::entries() const {
  std::vector<pool_entry_view> out;
  out.reserve(entries_.size());
  for (auto& [id, e] : entries_) {
    out.push_back(pool_entry_view{e.id, e.name, e.transport, e.state, e.live, e.connection, e.generation, e.link,
                                  e.pid, e.refs, e.restarts, e.last_error, e.stderr_tail});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

std::size_t pool_table::live_subprocesses() const {
  std::size_t n = 0;
  for (auto& [id, e] : entries_)
    if (e.transport == "stdio" && e.live && e.link == pool_link::connected) ++n;
  return n;
}

std::vector<std::string> pool_table::held_slots() const {
  return {held_.begin(), held_.end()};
}

std::vector<std::pair<uint64_t, uint64_t>> pool_table::holders(const std::string& id) const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  if (auto i = entries_.find(id); i != entries_.end()) out.assign(i->second.holders.begin(), i->second.holders.end());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace mcprt
