// The pool supervisor: an actor shell over core/pool_table, which holds the
// rules (and their design notes). Each handler turns its message into one
// table event and carries out the effects the table asks for: budget
// requests, spawning and stopping connections, timers, answers, holder
// notifications, events and log lines. The shell keeps only what the table
// cannot: actor handles (connections by the table's index, holders by
// session) and response promises (by the table's waiter tokens).

#include "pool/pool_supervisor.hpp"

#include <algorithm>
#include <memory>
#include <random>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/overloaded.hpp"
#include "core/pool_table.hpp"
#include "core/untrusted_text.hpp"
#include "pool/connection_stop.hpp"
#include "pool/pool_fan_out.hpp"

namespace mcprt {

namespace {

/// How long a retired connection gets to hand over its stderr tail and to
/// stop before it is killed.
constexpr auto info_timeout = std::chrono::seconds(2);
constexpr auto stop_timeout = std::chrono::seconds(60);

// The table's enums mirror the contract's one to one.
static_assert(int(pool_state::restarting) == int(pool_entry_status::restarting));
static_assert(int(pool_link::error) == int(connection_status::error));
static_assert(int(pool_link::needs_auth) == int(connection_status::needs_auth));
static_assert(int(pool_release::changed) == int(release_reason::changed));
static_assert(int(pool_change::closed) == int(pool_entry_event::closed));
static_assert(int(pool_timer_type::restart) == int(pool_timer_kind::restart));

struct connection_record {
  connection_actor actor;
  std::string id;
  uint64_t generation = 0;
};

struct pool_state {
  static inline const char* name = "mcprt.pool";

  connection_factory make;
  budget_actor budget;
  event_bus_actor bus;
  std::optional<pool_table> table;
  /// By the table's connection index.
  std::vector<connection_record> connections;
  std::unordered_map<uint64_t, caf::typed_response_promise<pool_handle>> waiters;
  std::unordered_map<uint64_t, caf::typed_response_promise<std::vector<restart_result>>> restarts;
  std::unordered_map<session_id, pool_holder_actor> holders;
  /// The budget's size, learned at its first refusal (it is fixed).
  std::optional<uint64_t> budget_size;
  uint64_t next_token = 1;
  std::vector<pool_effect> batch;
  connection_stopper stopper;

  // However the pool ends, its connections (and their servers) go with it.
  ~pool_state() {
    for (auto& c : connections)
      if (c.actor) caf::anon_send_exit(c.actor, caf::exit_reason::user_shutdown);
  }
};

using pool_self = pool_actor::stateful_pointer<pool_state>;

pool_time now(pool_self self) {
  return self->clock().now();
}

caf::error error_of(pool_error code, const std::string& message) {
  switch (code) {
    case pool_error::not_connected: return make_error(errc::not_connected, message);
    case pool_error::pool_draining: return make_error(errc::pool_draining, message);
    case pool_error::budget_exhausted: return make_error(errc::budget_exhausted, message);
    case pool_error::spawn_failed: return make_error(errc::spawn_failed, message);
    case pool_error::needs_auth: return make_error(errc::needs_auth, message);
  }
  return make_error(errc::not_connected, message);
}

void publish_pool_event(pool_self self, const pool_event& ev) {
  if (ev.what == pool_event::kind::failed)
    mcprt::publish(self, self->state.bus, events::pool_entry_failed{ev.id, ev.name, ev.last_error, ev.stderr_tail});
  else
    mcprt::publish(self, self->state.bus,
                   events::pool_entry_restarted{ev.id, ev.name, ev.generation, ev.restarts, ev.last_error, ev.reason});
}

void run(pool_self self);

void request_reservation(pool_self self, const pool_reserve_effect& r) {
  auto answer = [self, r](reserve_result result) {
    self->state.table->reserve_answered(r.id, r.serial, r.name, result, self->state.budget_size, now(self));
    run(self);
  };
  self->request(self->state.budget, caf::infinite, atom::reserve_v, r.name, r.transport)
    .then(
      [self, answer](reserve_reply reply) {
        if (reply != reserve_reply::refused || self->state.budget_size)
          return answer(static_cast<reserve_result>(reply));
        // First refusal: learn the budget's size once, for the error text.
        self->request(self->state.budget, std::chrono::seconds(5), atom::snapshot_v)
          .then(
            [self, answer](budget_snapshot& b) {
              if (b.limited) self->state.budget_size = b.budget;
              answer(reserve_result::refused);
            },
            [answer](caf::error&) { answer(reserve_result::refused); });
      },
      [self, r](caf::error& err) {
        self->state.table->reserve_failed(r.id, r.serial, pool_error::not_connected, self->system().render(err));
        run(self);
      });
}

void stop_entry(pool_self self, pool_stop_effect& s) {
  auto conn = std::move(self->state.connections[s.connection].actor);
  self->state.connections[s.connection] = {};
  self->state.stopper.hold(conn);
  auto stop_now = [self, conn] { self->state.stopper.stop(self, conn, stop_timeout); };
  if (!s.ask_tail || !conn) {
    if (s.failed) self->state.table->stderr_tail(s.id, s.serial, std::move(s.failed), {});
    return stop_now();
  }
  auto with_tail = [self, id = s.id, serial = s.serial, failed = std::move(s.failed)](std::vector<std::string> tail) {
    self->state.table->stderr_tail(id, serial, failed, std::move(tail));
    run(self);
  };
  self->request(conn, info_timeout, atom::info_v)
    .then([with_tail, stop_now](connection_info& ci) { with_tail(std::move(ci.stderr_tail)), stop_now(); },
          [with_tail, stop_now](caf::error&) { with_tail({}), stop_now(); });
}

void spawn(pool_self self, pool_spawn_effect& s, std::vector<pool_spawn_effect>& failed) {
  auto& st = self->state;
  connection_config cc;
  cc.server = std::move(s.config);
  cc.generation = s.generation;
  cc.subscribers.push_back(caf::actor_cast<event_sink_actor>(self));
  if (st.connections.size() <= s.connection) st.connections.resize(s.connection + 1);
  auto conn = st.make(self->home_system(), std::move(cc));
  if (conn) self->monitor(conn);
  st.connections[s.connection] = {conn, s.id, s.generation};
  if (!conn) failed.push_back(std::move(s));
}

void apply_effect(pool_self self, pool_effect& effect, std::vector<pool_spawn_effect>& failed_spawns) {
  auto& st = self->state;
  std::visit(
    overloaded{
      [&](pool_reserve_effect& r) { request_reservation(self, r); },
      [&](pool_release_slot_effect& r) {
        if (st.budget)
          self->request(st.budget, caf::infinite, atom::release_v, r.name).then([](bool) {}, [name = r.name](caf::error& e) {
            spdlog::warn("pool: releasing slot of {} failed: {}", escape_for_display(name), escape_for_display(to_string(e)));
          });
      },
      [&](pool_spawn_effect& s) { spawn(self, s, failed_spawns); },
      [&](pool_stop_effect& s) { stop_entry(self, s); },
      [&](pool_timer_effect& t) {
        self->delayed_send(self, t.delay, pool_timer{static_cast<pool_timer_kind>(t.kind), std::move(t.id), t.token});
      },
      [&](pool_reply_effect& r) {
        if (auto w = st.waiters.extract(r.waiter))
          w.mapped().deliver(pool_handle{std::move(r.id), st.connections[r.connection].actor, r.generation});
      },
      [&](pool_fail_effect& f) {
        if (auto w = st.waiters.extract(f.waiter)) w.mapped().deliver(error_of(f.code, f.message));
      },
      [&](pool_restart_done_effect& d) {
        auto rp = st.restarts.extract(d.request);
        if (!rp) return;
        std::vector<restart_result> results;
        for (auto& r : d.results)
          results.push_back({std::move(r.id), r.restarted, r.duration_ms, std::move(r.reason)});
        rp.mapped().deliver(std::move(results));
      },
      [&](pool_notify_effect& n) {
        if (auto h = st.holders.find(n.session); h != st.holders.end() && h->second)
          self->send(h->second, pool_entry_changed{std::move(n.id), std::move(n.server),
                                                   static_cast<pool_entry_event>(n.what), n.generation, std::move(n.error)});
      },
      [&](pool_publish_effect& p) { publish_pool_event(self, p.event); },
      [&](pool_log_effect& l) {
        using level = pool_log_effect::level;
        auto lvl = l.severity == level::debug  ? spdlog::level::debug
                   : l.severity == level::info ? spdlog::level::info
                   : l.severity == level::warn ? spdlog::level::warn
                                               : spdlog::level::err;
        spdlog::log(lvl, "{}", l.text);
      },
    },
    effect);
}

/// Carries out what the table asked for. An effect calls back into the
/// table only to hand over what it already knows (a stopped connection
/// without a tail); those effects, and a connection that could not even be
/// started (reported after the batch), run in the next round.
void run(pool_self self) {
  auto& st = self->state;
  std::vector<pool_spawn_effect> failed_spawns;
  while (!st.table->effects().empty()) {
    st.batch.swap(st.table->effects());
    for (auto& effect : st.batch)
      apply_effect(self, effect, failed_spawns);
    st.batch.clear();
    for (auto& s : failed_spawns)
      st.table->connection_down(s.id, s.generation, "the connection could not be started", now(self));
    failed_spawns.clear();
  }
}

/// The answer to an acquire or attach; `id` is the id for a ready handle.
caf::result<pool_handle> answer(pool_self self, pool_join& j, uint64_t token, std::string id) {
  auto& st = self->state;
  switch (j.result) {
    case pool_join::outcome::ready:
      return pool_handle{std::move(id), st.connections[j.connection].actor, j.generation};
    case pool_join::outcome::waiting: {
      ++st.next_token;
      auto rp = self->make_response_promise<pool_handle>();
      st.waiters.emplace(token, rp);
      run(self);
      return rp;
    }
    case pool_join::outcome::refused:
      break;
  }
  return error_of(j.code, j.message);
}

pool_entry_info entry_info_of(pool_entry_view& v) {
  return {std::move(v.id),        std::move(v.name),       v.refs,     static_cast<pool_entry_status>(v.state),
          static_cast<connection_status>(v.link), v.pid,    v.restarts, v.generation,
          std::move(v.transport), std::move(v.last_error), std::move(v.stderr_tail)};
}

caf::result<drain_result> drain_all(pool_self self, bool force, caf::timespan timeout) {
  auto& st = self->state;
  auto plan = st.table->drain_all(now(self));
  run(self);
  std::vector<std::pair<std::string, connection_actor>> conns;
  for (auto& s : plan.to_stop) {
    conns.emplace_back(std::move(s.id), std::move(st.connections[s.connection].actor));
    st.connections[s.connection] = {};
  }
  return st.stopper.stop_all(self, std::move(conns), plan.already_stopped, force, timeout);
}

pool_actor::behavior_type pool(pool_self self, connection_factory make, budget_actor budget, event_bus_actor bus,
                               pool_options opts) {
  auto& st = self->state;
  st.make = std::move(make);
  st.budget = std::move(budget);
  st.bus = std::move(bus);
  opts.table.budget = static_cast<bool>(st.budget);
  if (opts.table.seed == 0) opts.table.seed = std::random_device{}();
  st.table.emplace(std::move(opts.table));
  self->set_down_handler([self](caf::down_msg& dm) {
    for (auto& c : self->state.connections)
      if (c.actor && c.actor.address() == dm.source) {
        self->state.table->connection_down(c.id, c.generation, "connection actor exited: " + to_string(dm.reason),
                                           now(self));
        return run(self);
      }
  });
  return {
    [self](pool_acquire& a) -> caf::result<pool_handle> {
      auto& st = self->state;
      if (a.holder) st.holders[a.session] = std::move(a.holder);
      auto token = st.next_token;
      auto j = st.table->acquire(a.session, std::move(a.config), token);
      return answer(self, j, token, j.id ? *j.id : std::string{});
    },
    // Taken mutable: the request's own string becomes the reply's, so
    // attaching to a live entry allocates nothing.
    [self](pool_attach& a) -> caf::result<pool_handle> {
      auto token = self->state.next_token;
      auto j = self->state.table->attach(a.session, a.connection_id, token);
      return answer(self, j, token, std::move(a.connection_id));
    },
    [self](const pool_detach& d) {
      self->state.table->detach(d.session, d.connection_id, static_cast<pool_release>(d.reason), now(self));
      run(self);
    },
    [self](pool_restart& r) -> caf::result<std::vector<restart_result>> {
      auto& st = self->state;
      auto token = st.next_token++;
      auto rp = self->make_response_promise<std::vector<restart_result>>();
      st.restarts.emplace(token, rp);
      st.table->restart(r.server, token, now(self));
      run(self);
      return rp;
    },
    [self](const pool_lookup& l) -> caf::result<pool_handle> {
      std::size_t index = 0;
      uint64_t generation = 0;
      if (auto id = self->state.table->live_id(l.connection_id, index, generation))
        return pool_handle{*id, self->state.connections[index].actor, generation};
      return make_error(errc::not_connected, l.connection_id + ": no live connection in the pool");
    },
    [self](const client_update& u) {
      self->state.table->connection_update(u.connection_id, u.generation, static_cast<pool_link>(u.status), u.pid,
                                           u.error, now(self));
      run(self);
    },
    [self](const pool_timer& t) {
      self->state.table->timer_fired(static_cast<pool_timer_type>(t.kind), t.connection_id, t.token, now(self));
      run(self);
    },
    [self](atom::release_session, session_id session) -> uint64_t {
      auto n = self->state.table->release_session(session, now(self));
      self->state.holders.erase(session);
      run(self);
      return n;
    },
    [self](atom::snapshot) {
      pool_snapshot s;
      s.draining = self->state.table->draining();
      s.subprocess_count = self->state.table->live_subprocesses();
      for (auto& v : self->state.table->entries())
        s.entries.push_back(entry_info_of(v));
      return s;
    },
    [self](atom::drain, bool force, caf::timespan timeout) { return drain_all(self, force, timeout); },
  };
}

} // namespace

const shard_route pool_route = route_by_key<pool_actor, atom::release_session, atom::snapshot, atom::drain>();

pool_actor spawn_pool(caf::actor_system& sys, connection_factory make, budget_actor budget, event_bus_actor bus,
                      pool_options opts) {
  // More shards than scheduler workers would add routing cost, no parallelism.
  auto shards = opts.shards > 0 ? opts.shards : std::max<std::size_t>(1, sys.scheduler().num_workers());
  if (shards == 1) return sys.spawn(pool, std::move(make), std::move(budget), std::move(bus), opts);
  std::vector<caf::actor> workers;
  for (std::size_t i = 0; i < shards; ++i)
    workers.push_back(caf::actor_cast<caf::actor>(sys.spawn(pool, make, budget, bus, opts)));
  return caf::actor_cast<pool_actor>(spawn_shard_router(sys, std::move(workers), pool_route, pool_fan_out));
}

} // namespace mcprt
