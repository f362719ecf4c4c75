// The pool supervisor. Design in brief:
// - One map id -> entry. An entry exists from the first acquire (while the
//   budget reservation is in flight, then while spawning) until it is closed
//   or given up, so "a sibling of this name" is a scan of that one map and
//   concurrent acquires of one id always meet the same entry (one spawn).
// - Slots: `held` names the slots this pool reserved itself. A slot goes
//   back only when no entry of the name is left and the pool holds it, so
//   an `already_held` answer for someone else's slot is never released.
// - Staleness: updates carry (id, generation); generations are issued per
//   id and never reused, and the pool supersedes a connection (clears
//   `conn`, or bumps the generation) before it stops it, so only updates of
//   the current connection act. Timers carry a pool-wide token; only the
//   entry's current token acts. Late replies carry the entry serial.
// - The hot path (acquire of a live entry, release that leaves others
//   attached) sends nothing but its reply and does not allocate in steady
//   state: no budget traffic, no events, no timers. An entry has at most
//   one drain timer in flight; a release that starts a drain only moves the
//   entry's deadline, and the timer re-arms itself for what is left.

#include "pool/pool_supervisor.hpp"
#include "pool/shard_router.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string_view>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/backoff.hpp"
#include "core/fingerprint.hpp"
#include "core/untrusted_text.hpp"

namespace mcprt {

namespace {

using std::chrono::milliseconds;
using time_point = caf::actor_clock::time_point;

/// How long a retired connection gets to hand over its stderr tail and to
/// stop before it is killed.
constexpr auto info_timeout = std::chrono::seconds(2);
constexpr auto stop_timeout = std::chrono::seconds(60);
constexpr double backoff_jitter = 0.1;

/// One `restart(name)` request: answered once every entry it restarted has
/// connected again (or failed to).
struct restart_request {
  caf::typed_response_promise<std::vector<restart_result>> rp;
  std::vector<restart_result> results;
  std::size_t pending = 0;
};

struct restart_waiter {
  std::shared_ptr<restart_request> req;
  std::size_t index = 0;
  time_point started;
};

using holder_map = std::unordered_map<session_id, uint64_t>;

/// A session waiting for an entry to connect.
struct waiter {
  session_id session = 0;
  caf::typed_response_promise<pool_handle> rp;
};

struct entry {
  /// Identity of this entry; ids come back after an entry closed, serials
  /// never do, so late replies for a closed entry cannot touch its successor.
  uint64_t serial = 0;
  std::string id;
  std::string name;
  std::string transport;
  server_config cfg;
  pool_entry_status status = pool_entry_status::spawning;
  /// Invalid while the reservation is pending, while a restart waits for
  /// its backoff, and once retired.
  connection_actor conn;
  uint64_t generation = 0;
  connection_status conn_status = connection_status::connecting;
  int32_t pid = -1;
  /// Attached sessions and how many handles each holds; refs is the sum.
  holder_map holders;
  uint64_t refs = 0;
  std::vector<waiter> waiters;
  std::vector<restart_waiter> restart_waiters;
  /// Timer tokens: a timer message acts only if it carries the current one
  /// (tokens are pool-wide, so a timer of a closed entry never matches the
  /// next entry with the same id).
  /// The drain timer in flight (0: none). It closes the entry only if it is
  /// still draining at `drain_deadline`; otherwise it re-arms itself for
  /// the rest, or lapses when the entry is in use again.
  uint64_t drain_token = 0;
  time_point drain_deadline;
  uint64_t idle_token = 0;
  uint64_t restart_token = 0;
  /// Set at the first idle moment; attach/detach flapping does not reset it.
  bool idle_armed = false;
  restart_intensity intensity;
  uint64_t restarts = 0;
  std::string last_error;
  std::vector<std::string> stderr_tail;
};

struct pool_state {
  static inline const char* name = "mcprt.pool";

  connection_factory make;
  budget_actor budget;
  event_bus_actor bus;
  pool_options opts;
  /// Looked up twice per acquire/release cycle: hashed, not ordered.
  /// Whatever is reported (snapshot, restart results) is sorted by id.
  std::unordered_map<std::string, entry> entries;
  /// Last connection generation issued per id. Never forgotten, so a late
  /// update from a closed entry's connection can never pass for one of a
  /// new entry with the same id.
  std::map<std::string, uint64_t> generations;
  /// Names whose slot this pool reserved (the budget answered `reserved`).
  /// A slot is released only from here, and only once no entry of the name
  /// remains (spawning entries included). `already_held` for a name not in
  /// here means someone else holds it: never released by the pool.
  std::set<std::string> held;
  /// Holder nodes of detached sessions, reused by the next attach so that
  /// attach/detach cycles do not allocate (bounded).
  std::vector<holder_map::node_type> spare_holders;
  /// The budget's size, learned from its first snapshot (a budget's size is
  /// fixed for its lifetime), so that a refusal needs no further round trip.
  std::optional<uint64_t> budget_limit;
  uint64_t next_serial = 1;
  uint64_t next_token = 1;
  bool draining = false;
  std::mt19937_64 rng{std::random_device{}()};

  pool_state() = default;
  pool_state(const pool_state&) = delete;
  pool_state& operator=(const pool_state&) = delete;

  // However the pool ends, its connections (and their servers) go with it.
  ~pool_state() {
    for (auto& [id, e] : entries)
      if (e.conn) caf::anon_send_exit(e.conn, caf::exit_reason::user_shutdown);
  }
};

using self_ptr = pool_actor::stateful_pointer<pool_state>;

entry* find(self_ptr self, const std::string& id, uint64_t serial = 0) {
  auto i = self->state.entries.find(id);
  if (i == self->state.entries.end()) return nullptr;
  if (serial != 0 && i->second.serial != serial) return nullptr;
  return &i->second;
}

/// A connection id as the pool's log lines show it (see pool_options).
std::string shown(self_ptr self, const std::string& id) {
  auto& show = self->state.opts.show_id;
  return show ? show(id) : id;
}

void publish(self_ptr self, event_kind kind, nlohmann::json data) {
  if (self->state.bus) self->send(self->state.bus, atom::publish_v, kind, json_value{std::move(data)});
}

bool has_sibling(const pool_state& st, const std::string& name) {
  for (auto& [id, e] : st.entries)
    if (e.name == name) return true;
  return false;
}

/// Releases the slot of `name` if this pool holds it and no entry of that
/// name (live or still spawning) remains.
void release_slot_if_last(self_ptr self, const std::string& name) {
  auto& st = self->state;
  if (!st.budget || st.held.count(name) == 0 || has_sibling(st, name)) return;
  st.held.erase(name);
  self->request(st.budget, caf::infinite, atom::release_v, name)
    .then([](bool) {}, [name](caf::error& e) { spdlog::warn("pool: releasing slot of {} failed: {}", escape_for_display(name), escape_for_display(to_string(e))); });
}

/// Stops a connection the pool no longer uses; first asks it for its stderr
/// tail when `with_tail` is set.
void retire(self_ptr self, connection_actor conn,
            std::function<void(std::vector<std::string>)> with_tail = nullptr) {
  auto stop = [self, conn] {
    self->request(conn, stop_timeout, atom::stop_v)
      .then([](bool) {}, [self, conn](caf::error&) { self->send_exit(conn, caf::exit_reason::kill); });
  };
  if (!conn) {
    if (with_tail) with_tail({});
    return;
  }
  if (!with_tail) {
    stop();
    return;
  }
  self->request(conn, info_timeout, atom::info_v)
    .then(
      [with_tail, stop](connection_info& ci) {
        with_tail(std::move(ci.stderr_tail));
        stop();
      },
      [with_tail, stop](caf::error&) {
        with_tail({});
        stop();
      });
}

void fail_waiters(entry& e, const caf::error& err) {
  auto ws = std::move(e.waiters);
  e.waiters.clear();
  for (auto& w : ws)
    w.rp.deliver(err);
}

void finish_restart_waiters(self_ptr self, entry& e, bool ok, const std::string& reason) {
  auto ws = std::move(e.restart_waiters);
  e.restart_waiters.clear();
  auto now = self->clock().now();
  for (auto& w : ws) {
    auto& r = w.req->results[w.index];
    r.restarted = ok;
    r.duration_ms = std::chrono::duration_cast<milliseconds>(now - w.started).count();
    r.reason = ok ? std::string{} : reason;
    if (--w.req->pending == 0) w.req->rp.deliver(std::move(w.req->results));
  }
}

/// Removes an entry (already retired or never started) and releases its
/// slot when it was the last of its name.
void remove_entry(self_ptr self, std::string id) {
  auto i = self->state.entries.find(id);
  if (i == self->state.entries.end()) return;
  auto name = i->second.name;
  self->state.entries.erase(i);
  release_slot_if_last(self, name);
}

void close_entry(self_ptr self, entry& e, const char* reason) {
  spdlog::debug("pool: closing {} ({})", shown(self, e.id), reason);
  e.status = pool_entry_status::closed;
  auto conn = std::move(e.conn);
  e.conn = nullptr;
  fail_waiters(e, make_error(errc::not_connected, e.name + ": pool entry closed (" + reason + ")"));
  finish_restart_waiters(self, e, false, std::string("closed (") + reason + ")");
  retire(self, conn);
  remove_entry(self, e.id);
}

void spawn_conn(self_ptr self, entry& e) {
  auto& st = self->state;
  connection_config cc;
  cc.server = e.cfg;
  cc.generation = ++st.generations[e.id];
  cc.subscribers.push_back(caf::actor_cast<event_sink_actor>(self));
  e.generation = cc.generation;
  e.conn_status = connection_status::connecting;
  e.pid = -1;
  e.conn = st.make(self->home_system(), std::move(cc));
  if (e.conn) self->monitor(e.conn);
}

void arm_drain_timer(self_ptr self, entry& e, caf::timespan delay) {
  auto& st = self->state;
  e.drain_token = st.next_token++;
  self->delayed_send(self, delay, pool_timer{pool_timer_kind::drain, e.id, e.drain_token});
}

void start_drain(self_ptr self, entry& e) {
  auto& st = self->state;
  e.status = pool_entry_status::draining;
  e.drain_deadline = self->clock().now() + st.opts.drain_delay;
  // A timer still in flight (from an earlier drain that an acquire ended)
  // fires before the new deadline and re-arms itself for the rest.
  if (e.drain_token == 0) arm_drain_timer(self, e, st.opts.drain_delay);
  if (!e.idle_armed) {
    e.idle_armed = true;
    e.idle_token = st.next_token++;
    self->delayed_send(self, st.opts.max_idle, pool_timer{pool_timer_kind::idle, e.id, e.idle_token});
  }
}

pool_handle handle_of(const entry& e) {
  return pool_handle{e.id, e.conn, e.generation};
}

void attach(pool_state& st, entry& e, session_id session) {
  ++e.refs;
  if (auto h = e.holders.find(session); h != e.holders.end()) {
    ++h->second;
    return;
  }
  if (st.spare_holders.empty()) {
    e.holders.emplace(session, 1);
    return;
  }
  auto node = std::move(st.spare_holders.back());
  st.spare_holders.pop_back();
  node.key() = session;
  node.mapped() = 1;
  e.holders.insert(std::move(node));
}

void detach_holder(pool_state& st, entry& e, holder_map::iterator h) {
  auto node = e.holders.extract(h);
  if (st.spare_holders.size() < 1024) st.spare_holders.push_back(std::move(node));
}

void on_connected(self_ptr self, entry& e) {
  // last_error stays: the snapshot shows why the entry was last restarted.
  auto ws = std::move(e.waiters);
  e.waiters.clear();
  for (auto& w : ws)
    attach(self->state, e, w.session);
  for (auto& w : ws)
    w.rp.deliver(handle_of(e));
  finish_restart_waiters(self, e, true, {});
  if (e.refs > 0) {
    e.status = pool_entry_status::active;
  } else {
    start_drain(self, e);
  }
}

void publish_failed(self_ptr self, const std::string& id, const std::string& name,
                    const std::string& last_error, std::vector<std::string> tail) {
  auto n = self->state.opts.failed_stderr_lines;
  if (tail.size() > n) tail.erase(tail.begin(), tail.end() - static_cast<std::ptrdiff_t>(n));
  publish(self, event_kind::pool_entry_failed,
          {{"id", id}, {"name", name}, {"last_error", last_error}, {"stderr", tail}});
}

/// The current connection of `e` reported an error or went away on its own.
void on_failure(self_ptr self, entry& e, const std::string& why) {
  auto& st = self->state;
  e.last_error = why.empty() ? std::string("connection failed") : why;
  e.conn_status = connection_status::error;
  auto old = std::move(e.conn);
  e.conn = nullptr;
  finish_restart_waiters(self, e, false, e.last_error);
  if (e.status == pool_entry_status::spawning) {
    // Never connected: a failed spawn. Every waiter fails; the slot goes
    // back unless a sibling of the name remains.
    spdlog::warn("pool: {} failed to start: {}", shown(self, e.id), escape_for_display(e.last_error));
    fail_waiters(e, make_error(errc::spawn_failed, e.name + ": " + e.last_error));
    e.status = pool_entry_status::failed;
    retire(self, old);
    remove_entry(self, e.id);
    return;
  }
  if (e.status == pool_entry_status::draining && e.refs == 0 && e.waiters.empty()) {
    // Nobody uses it: close it now instead of restarting it.
    spdlog::info("pool: idle {} went away ({}); closing it", shown(self, e.id), escape_for_display(e.last_error));
    e.status = pool_entry_status::closed;
    retire(self, old);
    remove_entry(self, e.id);
    return;
  }
  auto now = self->clock().now();
  if (e.intensity.allow(now)) {
    auto in_window = e.intensity.count_in_window(now);
    auto attempt = static_cast<unsigned>(in_window > 0 ? in_window - 1 : 0);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    auto delay = backoff_delay(attempt, st.opts.backoff_base, st.opts.backoff_cap, backoff_jitter, unit(st.rng));
    spdlog::warn("pool: {} crashed ({}); restarting in {} ms", shown(self, e.id), escape_for_display(e.last_error),
                 delay.count());
    e.status = pool_entry_status::restarting;
    e.drain_token = 0; // no drain while restarting
    e.restart_token = st.next_token++;
    self->delayed_send(self, delay, pool_timer{pool_timer_kind::restart, e.id, e.restart_token});
    auto id = e.id;
    auto serial = e.serial;
    retire(self, old, [self, id, serial](std::vector<std::string> tail) {
      if (auto p = find(self, id, serial); p && !tail.empty()) p->stderr_tail = std::move(tail);
    });
    return;
  }
  // Beyond the restart intensity: give up on it.
  spdlog::error("pool: {} crashed {} times within {} ms; giving up: {}", shown(self, e.id),
                e.intensity.max_restarts() + 1, e.intensity.window().count(), escape_for_display(e.last_error));
  e.status = pool_entry_status::failed;
  fail_waiters(e, make_error(errc::spawn_failed, e.name + ": " + e.last_error));
  auto id = e.id;
  auto name = e.name;
  auto last_error = e.last_error;
  auto known_tail = e.stderr_tail;
  remove_entry(self, e.id);
  retire(self, old, [self, id, name, last_error, known_tail](std::vector<std::string> tail) {
    publish_failed(self, id, name, last_error, tail.empty() ? known_tail : std::move(tail));
  });
}

std::string transport_name(const server_config& cfg) {
  return to_string(cfg.transport());
}

void on_reserve_reply(self_ptr self, const std::string& id, uint64_t serial, const std::string& name,
                      reserve_reply r) {
  auto& st = self->state;
  if (r == reserve_reply::reserved) st.held.insert(name);
  auto e = find(self, id, serial);
  if (!e) {
    // Torn down (drained) while the reservation was in flight.
    release_slot_if_last(self, name);
    return;
  }
  // The budget already settled the refusal record (reserve with transport).
  if (r != reserve_reply::refused) {
    spawn_conn(self, *e);
    return;
  }
  auto ws = std::move(e->waiters);
  e->waiters.clear();
  e->status = pool_entry_status::failed;
  remove_entry(self, id);
  // Only an enforcing budget refuses, and it refuses only when full: it
  // never reserves past its size, so at the refusal reserved == budget.
  auto exhausted = [name](uint64_t budget) {
    return make_error(errc::budget_exhausted, name + ": budget " + std::to_string(budget) + " exhausted ("
                                                + std::to_string(budget) + " reserved)");
  };
  if (st.budget_limit) {
    auto err = exhausted(*st.budget_limit);
    for (auto& w : ws)
      w.rp.deliver(err);
    return;
  }
  // First refusal: learn the budget's size once.
  auto pending = std::make_shared<std::vector<waiter>>(std::move(ws));
  auto fail_all = [pending](const caf::error& err) {
    for (auto& w : *pending)
      w.rp.deliver(err);
  };
  self->request(st.budget, std::chrono::seconds(5), atom::snapshot_v)
    .then(
      [self, fail_all, exhausted](budget_snapshot& b) {
        if (b.limited) self->state.budget_limit = b.budget;
        fail_all(exhausted(b.budget));
      },
      [fail_all, name](caf::error&) { fail_all(make_error(errc::budget_exhausted, name + ": budget exhausted")); });
}

pool_entry_info info_of(const entry& e) {
  pool_entry_info i;
  i.id = e.id;
  i.name = e.name;
  i.refs = e.refs;
  i.status = e.status;
  i.connection = e.conn_status;
  i.pid = e.pid;
  i.restarts = e.restarts;
  i.generation = e.generation;
  i.transport = e.transport;
  i.last_error = e.last_error;
  i.stderr_tail = e.stderr_tail;
  return i;
}

struct drain_progress {
  caf::typed_response_promise<drain_result> rp;
  drain_result result;
  std::size_t pending = 0;

  void done() {
    if (--pending == 0) rp.deliver(std::move(result));
  }
};

/// Drops one handle of `session` on entry `id`; false if it held none.
bool release_handle(self_ptr self, session_id session, const std::string& id) {
  auto e = find(self, id);
  if (!e) return false;
  if (auto h = e->holders.find(session); h != e->holders.end()) {
    if (--h->second == 0) detach_holder(self->state, *e, h);
    --e->refs;
    if (e->refs == 0 && e->status == pool_entry_status::active) start_drain(self, *e);
    return true;
  }
  // Released before the connection was ready: the waiting acquire fails.
  auto& ws = e->waiters;
  auto i = std::find_if(ws.begin(), ws.end(), [&](const waiter& w) { return w.session == session; });
  if (i == ws.end()) return false;
  auto w = std::move(*i);
  ws.erase(i);
  w.rp.deliver(make_error(errc::not_connected, e->name + ": released before the connection was ready"));
  return true;
}

/// Attaches a session to an existing entry: at once when it is live (its
/// reservation already covers the slot), else with the entry's waiters.
/// `id` is the entry's id for the handle; a caller that owns a copy of it
/// moves it in, so that a live attach allocates nothing.
caf::result<pool_handle> join(self_ptr self, entry& e, session_id session, std::string id) {
  if (e.status == pool_entry_status::active || e.status == pool_entry_status::draining) {
    attach(self->state, e, session);
    // Ends a drain; its timer (if any) lapses when it finds the entry
    // active again.
    e.status = pool_entry_status::active;
    return pool_handle{std::move(id), e.conn, e.generation};
  }
  auto rp = self->make_response_promise<pool_handle>();
  e.waiters.push_back({session, rp});
  return rp;
}

void on_drain_timer(self_ptr self, const std::string& id, uint64_t token);
void on_idle_timer(self_ptr self, const std::string& id, uint64_t token);
void on_restart_timer(self_ptr self, const std::string& id, uint64_t token);

pool_actor::behavior_type pool(self_ptr self, connection_factory make, budget_actor budget,
                               event_bus_actor bus, pool_options opts) {
  auto& st = self->state;
  st.make = std::move(make);
  st.budget = std::move(budget);
  st.bus = std::move(bus);
  const milliseconds min_drain = std::chrono::seconds(1);
  const milliseconds max_drain = std::chrono::minutes(10);
  opts.drain_delay = std::clamp(opts.drain_delay, min_drain, max_drain);
  st.opts = opts;
  self->set_down_handler([self](caf::down_msg& dm) {
    for (auto& [id, e] : self->state.entries) {
      if (e.conn && e.conn.address() == dm.source) {
        on_failure(self, e, "connection actor exited: " + to_string(dm.reason));
        return;
      }
    }
  });
  return {
    [self](pool_acquire& a) -> caf::result<pool_handle> {
      auto& st = self->state;
      auto session = a.session;
      auto& cfg = a.config;
      if (st.draining) return make_error(errc::pool_draining, "pool is draining; refusing acquire of " + cfg.name);
      // The parsed config carries its id: no copy, no hashing per acquire.
      std::string computed;
      if (cfg.connection_id_cache.empty()) computed = compute_connection_id(cfg);
      const std::string& id = cfg.connection_id_cache.empty() ? computed : cfg.connection_id_cache;
      if (auto e = find(self, id)) return join(self, *e, session, e->id);
      auto& e = st.entries[id];
      e.serial = st.next_serial++;
      e.id = id;
      e.name = cfg.name;
      e.transport = transport_name(cfg);
      e.cfg = std::move(cfg);
      e.intensity = restart_intensity(st.opts.max_restarts, st.opts.restart_window);
      auto rp = self->make_response_promise<pool_handle>();
      e.waiters.push_back({session, rp});
      if (!st.budget) {
        spawn_conn(self, e);
        return rp;
      }
      // Not `id`: it may refer into the config just moved into the entry.
      auto serial = e.serial;
      auto name = e.name;
      self->request(st.budget, caf::infinite, atom::reserve_v, name, e.transport)
        .then([self, id = e.id, serial, name](reserve_reply r) { on_reserve_reply(self, id, serial, name, r); },
              [self, id = e.id, serial](caf::error& err) {
                if (auto p = find(self, id, serial)) {
                  fail_waiters(*p, err);
                  remove_entry(self, id);
                }
              });
      return rp;
    },
    // Taken mutable: the request's own string becomes the reply's, so
    // attaching to a live entry allocates nothing.
    [self](pool_attach& a) -> caf::result<pool_handle> {
      if (self->state.draining)
        return make_error(errc::pool_draining, "pool is draining; refusing acquire of " + a.connection_id);
      if (auto e = find(self, a.connection_id)) return join(self, *e, a.session, std::move(a.connection_id));
      return make_error(errc::not_connected, a.connection_id + ": no pool entry; acquire it with its config");
    },
    [self](const pool_detach& d) { release_handle(self, d.session, d.connection_id); },

    [self](atom::release_session, session_id session) -> uint64_t {
      uint64_t n = 0;
      for (auto& [id, e] : self->state.entries) {
        if (auto h = e.holders.find(session); h != e.holders.end()) {
          n += h->second;
          e.refs -= h->second;
          detach_holder(self->state, e, h);
          if (e.refs == 0 && e.status == pool_entry_status::active) start_drain(self, e);
        }
        auto keep = std::partition(e.waiters.begin(), e.waiters.end(),
                                   [&](const waiter& w) { return w.session != session; });
        for (auto i = keep; i != e.waiters.end(); ++i)
          i->rp.deliver(make_error(errc::not_connected, e.name + ": released before the connection was ready"));
        e.waiters.erase(keep, e.waiters.end());
      }
      return n;
    },
    [self](const pool_restart& pr) -> caf::result<std::vector<restart_result>> {
      auto& st = self->state;
      auto& name = pr.server;
      std::vector<restart_result> results;
      if (st.draining) return results;
      auto req = std::make_shared<restart_request>();
      auto now = self->clock().now();
      std::vector<entry*> matching;
      for (auto& [id, e] : st.entries)
        if (e.name == name) matching.push_back(&e);
      std::sort(matching.begin(), matching.end(), [](const entry* a, const entry* b) { return a->id < b->id; });
      for (auto* match : matching) {
        auto& e = *match;
        restart_result r;
        r.id = e.id;
        if (e.status == pool_entry_status::spawning) {
          r.reason = "still starting";
          req->results.push_back(std::move(r));
          continue;
        }
        req->results.push_back(std::move(r));
        auto old = std::move(e.conn);
        e.conn = nullptr;
        retire(self, old);
        e.status = pool_entry_status::restarting;
        e.drain_token = 0;   // re-armed once it is connected, if still idle
        e.restart_token = 0; // a pending crash restart happens now instead
        ++e.restarts;
        spawn_conn(self, e);
        e.restart_waiters.push_back({req, req->results.size() - 1, now});
        ++req->pending;
        publish(self, event_kind::pool_entry_restarted,
                {{"id", e.id}, {"name", e.name}, {"generation", e.generation}, {"restarts", e.restarts},
                 {"last_error", e.last_error}, {"reason", "manual"}});
      }
      if (req->pending == 0) return std::move(req->results);
      req->rp = self->make_response_promise<std::vector<restart_result>>();
      return req->rp;
    },
    [self](const pool_lookup& l) -> caf::result<pool_handle> {
      auto& id = l.connection_id;
      auto e = find(self, id);
      if (!e || !e->conn) return make_error(errc::not_connected, id + ": no live connection in the pool");
      return pool_handle{e->id, e->conn, e->generation};
    },
    [self](atom::snapshot) {
      pool_snapshot s;
      s.draining = self->state.draining;
      for (auto& [id, e] : self->state.entries) {
        s.entries.push_back(info_of(e));
        if (e.transport == "stdio" && e.conn && e.conn_status == connection_status::connected)
          ++s.subprocess_count;
      }
      std::sort(s.entries.begin(), s.entries.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
      return s;
    },
    [self](atom::drain, bool force, caf::timespan timeout) -> caf::result<drain_result> {
      auto& st = self->state;
      st.draining = true;
      if (timeout <= caf::timespan::zero()) timeout = std::chrono::hours(24);
      auto progress = std::make_shared<drain_progress>();
      progress->pending = 1; // released below, after every stop was sent
      auto entries = std::move(st.entries);
      st.entries.clear();
      for (auto& [id, e] : entries) {
        fail_waiters(e, make_error(errc::pool_draining, e.name + ": pool is draining"));
        finish_restart_waiters(self, e, false, "pool is draining");
        e.status = pool_entry_status::closed;
        if (!e.conn) {
          ++progress->result.drained;
          continue;
        }
        ++progress->pending;
        auto conn = e.conn;
        auto eid = id;
        self->request(conn, timeout, atom::stop_v)
          .then(
            [progress](bool) {
              ++progress->result.drained;
              progress->done();
            },
            [self, progress, conn, eid, force](caf::error& err) {
              if (err == caf::sec::request_receiver_down) {
                ++progress->result.drained; // already gone
              } else if (err == caf::sec::request_timeout && force) {
                self->send_exit(conn, caf::exit_reason::kill);
                ++progress->result.forced;
              } else {
                progress->result.errors.push_back(eid + ": " + to_string(err));
              }
              progress->done();
            });
      }
      // Every entry is gone: every slot this pool holds goes back.
      if (st.budget)
        for (auto& name : st.held)
          self->request(st.budget, caf::infinite, atom::release_v, name).then([](bool) {}, [](caf::error&) {});
      st.held.clear();
      progress->rp = self->make_response_promise<drain_result>();
      auto rp = progress->rp;
      progress->done();
      return rp;
    },
    [self](client_update& u) {
      auto e = find(self, u.connection_id);
      if (!e || !e->conn || u.generation != e->generation) return; // superseded or retired
      e->pid = u.pid;
      e->conn_status = u.status;
      switch (u.status) {
        case connection_status::connecting:
          break;
        case connection_status::connected:
          if (e->status == pool_entry_status::spawning || e->status == pool_entry_status::restarting)
            on_connected(self, *e);
          break;
        case connection_status::error:
          on_failure(self, *e, u.error);
          break;
        case connection_status::disconnected:
          // The pool supersedes a connection before stopping it, so a
          // disconnect of the current one was not caused by us.
          on_failure(self, *e, u.error.empty() ? "connection closed unexpectedly" : u.error);
          break;
      }
    },
    [self](const pool_timer& t) {
      switch (t.kind) {
        case pool_timer_kind::drain: return on_drain_timer(self, t.connection_id, t.token);
        case pool_timer_kind::idle: return on_idle_timer(self, t.connection_id, t.token);
        case pool_timer_kind::restart: return on_restart_timer(self, t.connection_id, t.token);
      }
    },
  };
}

void on_drain_timer(self_ptr self, const std::string& id, uint64_t token) {
      auto e = find(self, id);
      if (!e || e->drain_token != token) return;
      e->drain_token = 0;
      if (e->status != pool_entry_status::draining || e->refs > 0) return; // in use again: lapses
      auto now = self->clock().now();
      if (now < e->drain_deadline) {
        // Re-attached and released again since this timer was set.
        arm_drain_timer(self, *e, e->drain_deadline - now);
        return;
      }
      close_entry(self, *e, "drain_timer");
}

void on_idle_timer(self_ptr self, const std::string& id, uint64_t token) {
      auto e = find(self, id);
      if (!e || e->idle_token != token || !e->idle_armed) return;
      if (e->refs == 0 && e->waiters.empty() && e->status == pool_entry_status::draining) {
        close_entry(self, *e, "max_idle");
        return;
      }
      // In use at this moment: the next idle period starts a fresh limit.
      e->idle_armed = false;
}

void on_restart_timer(self_ptr self, const std::string& id, uint64_t token) {
      auto e = find(self, id);
      if (!e || e->restart_token != token || e->status != pool_entry_status::restarting || e->conn) return;
      ++e->restarts;
      spawn_conn(self, *e);
      publish(self, event_kind::pool_entry_restarted,
              {{"id", e->id}, {"name", e->name}, {"generation", e->generation}, {"restarts", e->restarts},
               {"last_error", e->last_error}, {"reason", "crash"}});
}

// -- shards ---------------------------------------------------------------------------

// A server's entries all live in one shard, chosen by the server's name: the
// slot of a name, its sibling entries and its restarts are then shard-local,
// so every shard is a whole pool for the names it owns, and acquires of
// different servers run in parallel.

std::size_t shard_of(std::string_view server, std::size_t shards) {
  return std::hash<std::string_view>{}(server) % shards;
}

std::string_view server_of(const std::string& id) {
  return server_of_connection_id(id);
}

bool has_atom(const caf::type_erased_tuple& msg, caf::atom_value a) {
  return msg.size() > 0 && msg.match_element<caf::atom_value>(0) && msg.get_as<caf::atom_value>(0) == a;
}

/// The shard that handles `msg`, or nullopt for the requests that concern
/// every shard (snapshot, release_session, drain).
std::optional<std::size_t> route(const caf::type_erased_tuple& msg, std::size_t shards) {
  // The hot path first: attach and detach, by type_info address, which
  // spares the name comparison (strcmp) a mismatched check costs. Where a
  // type has two type_info objects (two shared libraries), match_element
  // still decides.
  if (msg.size() == 1) {
    auto by_id = [&](const std::string& id) { return shard_of(server_of(id), shards); };
    auto rtti = msg.type(0).second;
    if (rtti == &typeid(pool_attach)) return by_id(msg.get_as<pool_attach>(0).connection_id);
    if (rtti == &typeid(pool_detach)) return by_id(msg.get_as<pool_detach>(0).connection_id);
    if (msg.match_element<pool_attach>(0)) return by_id(msg.get_as<pool_attach>(0).connection_id);
    if (msg.match_element<pool_detach>(0)) return by_id(msg.get_as<pool_detach>(0).connection_id);
  }
  auto key = [&](auto* type) -> std::optional<std::size_t> {
    using T = std::remove_pointer_t<decltype(type)>;
    if (msg.match_elements<T>()) return shard_of(shard_key(msg.get_as<T>(0)), shards);
    return std::nullopt;
  };
  for (auto r : {key((pool_acquire*) nullptr), key((pool_restart*) nullptr), key((pool_lookup*) nullptr),
                 key((client_update*) nullptr), key((pool_timer*) nullptr)})
    if (r) return r;
  if (has_atom(msg, atom::snapshot::value) || has_atom(msg, atom::release_session::value)
      || has_atom(msg, atom::drain::value))
    return std::nullopt;
  return 0; // anything else: one shard answers (typically with an error)
}

/// Asks every shard the same request, merges the answers with `merge` and
/// answers the original requester once; then quits.
template <class T, class Merge, class... Ts>
caf::result<T> ask_every_shard(caf::event_based_actor* self, const std::vector<pool_actor>& shards, Merge merge,
                               const Ts&... xs) {
  struct progress {
    T value;
    std::size_t pending = 0;
    caf::error first_error;
    caf::typed_response_promise<T> rp;
  };
  auto p = std::make_shared<progress>();
  p->pending = shards.size();
  p->rp = self->make_response_promise<T>();
  auto done = [self, p] {
    if (--p->pending != 0) return;
    if (p->first_error)
      p->rp.deliver(std::move(p->first_error));
    else
      p->rp.deliver(std::move(p->value));
    self->quit();
  };
  for (auto& shard : shards)
    self->request(shard, caf::infinite, xs...)
      .then([p, merge, done](T& part) { merge(p->value, part); done(); },
            [p, done](caf::error& e) {
              if (!p->first_error) p->first_error = std::move(e);
              done();
            });
  return p->rp;
}

/// A one-shot actor that answers one request concerning every shard.
caf::behavior every_shard(caf::event_based_actor* self, std::vector<pool_actor> shards) {
  return {
    [self, shards](atom::snapshot) {
      return ask_every_shard<pool_snapshot>(
        self, shards,
        [](pool_snapshot& all, pool_snapshot& part) {
          // Each shard answers sorted by id: merging keeps the whole sorted.
          auto& xs = all.entries;
          auto mid = static_cast<std::ptrdiff_t>(xs.size());
          xs.insert(xs.end(), std::make_move_iterator(part.entries.begin()), std::make_move_iterator(part.entries.end()));
          std::inplace_merge(xs.begin(), xs.begin() + mid, xs.end(),
                             [](const auto& a, const auto& b) { return a.id < b.id; });
          all.subprocess_count += part.subprocess_count;
          all.draining = all.draining || part.draining;
        },
        atom::snapshot_v);
    },
    [self, shards](atom::release_session, session_id session) {
      return ask_every_shard<uint64_t>(
        self, shards, [](uint64_t& all, uint64_t part) { all += part; }, atom::release_session_v, session);
    },
    [self, shards](atom::drain, bool force, caf::timespan timeout) {
      return ask_every_shard<drain_result>(
        self, shards,
        [](drain_result& all, drain_result& part) {
          all.drained += part.drained;
          all.forced += part.forced;
          all.errors.insert(all.errors.end(), part.errors.begin(), part.errors.end());
        },
        atom::drain_v, force, timeout);
    },
  };
}

caf::actor fan_out(caf::actor_system& sys, const std::vector<caf::actor>& workers) {
  std::vector<pool_actor> shards;
  for (auto& w : workers)
    shards.push_back(caf::actor_cast<pool_actor>(w));
  return sys.spawn(every_shard, std::move(shards));
}

} // namespace

pool_actor spawn_pool(caf::actor_system& sys, connection_factory make, budget_actor budget, event_bus_actor bus,
                      pool_options opts) {
  // More shards than scheduler workers would add routing cost, no parallelism.
  auto shards = opts.shards > 0 ? opts.shards : std::max<std::size_t>(1, sys.scheduler().num_workers());
  if (shards == 1) return sys.spawn(pool, std::move(make), std::move(budget), std::move(bus), opts);
  std::vector<caf::actor> workers;
  for (std::size_t i = 0; i < shards; ++i)
    workers.push_back(caf::actor_cast<caf::actor>(sys.spawn(pool, make, budget, bus, opts)));
  return caf::actor_cast<pool_actor>(spawn_shard_router(sys, std::move(workers), route, fan_out));
}

} // namespace mcprt
