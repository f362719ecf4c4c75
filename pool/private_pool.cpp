#include "pool/private_pool.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "core/fingerprint.hpp"
#include "pool/connection_stop.hpp"

namespace mcprt {

namespace {

constexpr auto private_stop_timeout = std::chrono::seconds(10);

struct entry {
  /// Never reused, so a budget reply for a released entry cannot touch its
  /// successor under the same id.
  uint64_t serial = 0;
  std::string id;
  std::string name;
  std::string transport;
  server_config cfg;
  connection_actor conn;
  uint64_t generation = 0;
  connection_status status = connection_status::connecting;
  int32_t pid = -1;
  bool connected = false;
  uint64_t refs = 0;
  std::vector<caf::typed_response_promise<pool_handle>> waiters;
  std::string last_error;
};

struct private_pool_state {
  static inline const char* name = "mcprt.private_pool";

  connection_factory make;
  budget_actor budget;
  std::map<std::string, entry> entries;
  /// Names whose slot this pool reserved; given back once no entry of the
  /// name is left.
  std::set<std::string> held;
  std::map<session_id, pool_holder_actor> holders;
  uint64_t next_serial = 1;
  uint64_t next_generation = 1;
  bool draining = false;
  connection_stopper stopper;

  private_pool_state() = default;
  private_pool_state(const private_pool_state&) = delete;
  private_pool_state& operator=(const private_pool_state&) = delete;

  ~private_pool_state() {
    for (auto& [id, e] : entries)
      if (e.conn) caf::anon_send_exit(e.conn, caf::exit_reason::user_shutdown);
  }
};

using private_pool_self = pool_actor::stateful_pointer<private_pool_state>;

entry* find(private_pool_self self, const std::string& id, uint64_t serial = 0) {
  auto i = self->state.entries.find(id);
  if (i == self->state.entries.end() || (serial != 0 && i->second.serial != serial)) return nullptr;
  return &i->second;
}

void report_live_count(private_pool_self self) {
  auto& st = self->state;
  if (!st.budget) return;
  uint64_t n = 0;
  for (auto& [id, e] : st.entries)
    n += e.status == connection_status::connected ? 1 : 0;
  self->send(st.budget, atom::live_count_v, n);
}

void fail_waiters(entry& e, const caf::error& err) {
  auto ws = std::move(e.waiters);
  e.waiters.clear();
  for (auto& w : ws)
    w.deliver(err);
}

/// Removes an entry, stops its connection and gives its slot back when it
/// was the last of its name.
void close_entry(private_pool_self self, const std::string& id) {
  auto& st = self->state;
  auto i = st.entries.find(id);
  if (i == st.entries.end()) return;
  auto conn = std::move(i->second.conn);
  auto name = i->second.name;
  st.entries.erase(i);
  st.stopper.stop(self, conn, private_stop_timeout);
  auto sibling = std::any_of(st.entries.begin(), st.entries.end(), [&](const auto& kv) { return kv.second.name == name; });
  if (st.budget && !sibling && st.held.erase(name) > 0)
    self->request(st.budget, caf::infinite, atom::release_v, name).then([](bool) {}, [](caf::error&) {});
  report_live_count(self);
}

void spawn_conn(private_pool_self self, entry& e) {
  auto& st = self->state;
  connection_config cc;
  cc.server = e.cfg;
  cc.generation = st.next_generation++;
  cc.subscribers.push_back(caf::actor_cast<event_sink_actor>(self));
  e.generation = cc.generation;
  e.conn = st.make(self->home_system(), std::move(cc));
  if (!e.conn) {
    fail_waiters(e, make_error(errc::spawn_failed, e.name + ": the connection could not be started"));
    close_entry(self, e.id);
    return;
  }
  self->monitor(e.conn);
}

/// The connection of `e` failed: before it connected, its acquire fails;
/// after, its holder is told and acquires it again after a backoff.
void on_failure(private_pool_self self, entry& e, std::string why, bool needs_auth = false) {
  e.last_error = why.empty() ? std::string("connection failed") : std::move(why);
  if (!e.connected) {
    fail_waiters(e, make_error(needs_auth ? errc::needs_auth : errc::spawn_failed, e.name + ": " + e.last_error));
  } else {
    for (auto& [session, holder] : self->state.holders)
      if (holder) self->send(holder, pool_entry_changed{e.id, e.name, pool_entry_event::failed, e.generation, e.last_error});
  }
  close_entry(self, e.id);
}

pool_handle handle_of(const entry& e) {
  return pool_handle{e.id, e.conn, e.generation};
}

caf::result<pool_handle> acquire(private_pool_self self, pool_acquire& a) {
  auto& st = self->state;
  if (st.draining) return make_error(errc::pool_draining, "the session is closing; refusing acquire of " + a.config.name);
  if (a.holder) st.holders[a.session] = a.holder;
  auto id = a.config.connection_id_cache.empty() ? compute_connection_id(a.config) : a.config.connection_id_cache;
  if (auto e = find(self, id)) {
    if (e->connected) {
      ++e->refs;
      return handle_of(*e);
    }
    auto rp = self->make_response_promise<pool_handle>();
    e->waiters.push_back(rp);
    return rp;
  }
  auto& e = st.entries[id];
  e.serial = st.next_serial++;
  e.id = id;
  e.name = a.config.name;
  e.transport = to_string(a.config.transport());
  e.cfg = std::move(a.config);
  auto rp = self->make_response_promise<pool_handle>();
  e.waiters.push_back(rp);
  if (!st.budget) {
    spawn_conn(self, e);
    return rp;
  }
  // The budget records the refusal (or clears an earlier one) itself.
  self->request(st.budget, caf::infinite, atom::reserve_v, e.name, e.transport)
    .then(
      [self, id, serial = e.serial, name = e.name](reserve_reply r) {
        if (r == reserve_reply::reserved) self->state.held.insert(name);
        auto e = find(self, id, serial);
        if (!e) {
          // Released while the reservation was in flight.
          if (r == reserve_reply::reserved) {
            self->state.held.erase(name);
            self->request(self->state.budget, caf::infinite, atom::release_v, name).then([](bool) {}, [](caf::error&) {});
          }
          return;
        }
        if (r == reserve_reply::refused) {
          fail_waiters(*e, make_error(errc::budget_exhausted, name + ": the session budget is full"));
          self->state.entries.erase(id);
          return;
        }
        spawn_conn(self, *e);
      },
      [self, id, serial = e.serial](caf::error& err) {
        if (auto e = find(self, id, serial)) {
          fail_waiters(*e, err);
          close_entry(self, id);
        }
      });
  return rp;
}

void detach(private_pool_self self, const pool_detach& d) {
  auto e = find(self, d.connection_id);
  if (!e) return;
  if (e->refs > 0 && --e->refs > 0) return;
  fail_waiters(*e, make_error(errc::not_connected, e->name + ": released before the connection was ready"));
  close_entry(self, e->id);
}

void on_update(private_pool_self self, const client_update& u) {
  auto e = find(self, u.connection_id);
  if (!e || !e->conn || u.generation != e->generation) return;
  e->pid = u.pid;
  e->status = u.status;
  switch (u.status) {
    case connection_status::connecting:
      break;
    case connection_status::connected:
      if (!e->connected) {
        e->connected = true;
        auto ws = std::move(e->waiters);
        e->waiters.clear();
        e->refs += ws.size();
        for (auto& w : ws)
          w.deliver(handle_of(*e));
      }
      report_live_count(self);
      break;
    case connection_status::error:
    case connection_status::disconnected:
    case connection_status::needs_auth:
      on_failure(self, *e, u.error.empty() ? "connection closed unexpectedly" : u.error,
                 u.status == connection_status::needs_auth);
      break;
  }
}

pool_snapshot pool_snapshot_of(const private_pool_state& st) {
  pool_snapshot s;
  s.draining = st.draining;
  for (auto& [id, e] : st.entries) {
    pool_entry_info i;
    i.id = e.id;
    i.name = e.name;
    i.refs = e.refs;
    i.status = e.connected ? pool_entry_status::active : pool_entry_status::spawning;
    i.connection = e.status;
    i.pid = e.pid;
    i.generation = e.generation;
    i.transport = e.transport;
    i.last_error = e.last_error;
    if (e.transport == "stdio" && e.conn && e.status == connection_status::connected) ++s.subprocess_count;
    s.entries.push_back(std::move(i));
  }
  return s;
}

caf::result<drain_result> drain(private_pool_self self, bool force, caf::timespan timeout) {
  auto& st = self->state;
  st.draining = true;
  auto entries = std::move(st.entries);
  st.entries.clear();
  std::vector<std::pair<std::string, connection_actor>> conns;
  for (auto& [id, e] : entries) {
    fail_waiters(e, make_error(errc::pool_draining, e.name + ": the session is closing"));
    conns.emplace_back(id, std::move(e.conn));
  }
  if (st.budget)
    for (auto& name : st.held)
      self->request(st.budget, caf::infinite, atom::release_v, name).then([](bool) {}, [](caf::error&) {});
  st.held.clear();
  return st.stopper.stop_all(self, std::move(conns), 0, force, timeout);
}

pool_actor::behavior_type private_pool(private_pool_self self, connection_factory make, budget_actor budget) {
  self->state.make = std::move(make);
  self->state.budget = std::move(budget);
  self->set_down_handler([self](caf::down_msg& dm) {
    for (auto& [id, e] : self->state.entries)
      if (e.conn && e.conn.address() == dm.source) {
        on_failure(self, e, "connection actor exited: " + to_string(dm.reason));
        return;
      }
  });
  return {
    [self](pool_acquire& a) { return acquire(self, a); },
    [self](const pool_attach& a) -> caf::result<pool_handle> {
      auto e = find(self, a.connection_id);
      if (!e || !e->connected) return make_error(errc::not_connected, a.connection_id + ": no live connection");
      ++e->refs;
      return handle_of(*e);
    },
    [self](const pool_detach& d) { detach(self, d); },
    [](const pool_restart&) { return std::vector<restart_result>{}; },
    [self](const pool_lookup& l) -> caf::result<pool_handle> {
      auto e = find(self, l.connection_id);
      if (!e || !e->conn || !e->connected)
        return make_error(errc::not_connected, l.connection_id + ": no live connection");
      return handle_of(*e);
    },
    [self](const client_update& u) { on_update(self, u); },
    [](const pool_timer&) {},
    // Answered once every connection has stopped: the session's close (and
    // the runtime's shutdown after it) must not outrun its servers.
    [self](atom::release_session, session_id session) -> caf::result<uint64_t> {
      auto& st = self->state;
      st.holders.erase(session);
      uint64_t n = 0;
      for (auto& [id, e] : st.entries)
        n += e.refs;
      auto rp = self->make_response_promise<uint64_t>();
      self->request(caf::actor_cast<pool_actor>(self), caf::infinite, atom::drain_v, true,
                    caf::timespan{private_stop_timeout})
        .then([self, rp, n](drain_result&) mutable {
                self->state.draining = false;
                rp.deliver(n);
              },
              [rp, n](caf::error&) mutable { rp.deliver(n); });
      return rp;
    },
    [self](atom::snapshot) { return pool_snapshot_of(self->state); },
    [self](atom::drain, bool force, caf::timespan timeout) { return drain(self, force, timeout); },
  };
}

} // namespace

pool_actor spawn_private_pool(caf::actor_system& sys, connection_factory make, budget_actor budget) {
  return sys.spawn(private_pool, std::move(make), std::move(budget));
}

} // namespace mcprt
