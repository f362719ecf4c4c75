#pragma once

// A fake connection for deterministic actor tests: it connects (or fails,
// or hangs) as its spec says and records every spawn and stop in a world the
// test inspects.
//
// Spec key "fake":
//   "ok" (default)   publishes connecting, then connected at once
//   "hang"           stays connecting until it gets `tick`
//   "fail"           publishes error before connecting (a failed spawn)
//   "fail_restarts"  connects the first time, fails every later spawn of its id
//   "stuck"          like ok, but never answers `stop`
//   "held"           like ok, but a call with a call id waits until it is
//                    cancelled (then fails with errc::cancelled)
// Spec key "tools": the names of the tools it lists.
// Triggers: `io_exit(desc)` = the server crashed (error), `http_gone` = a
// disconnect nobody asked for, `io_err(line)` = a stderr line.

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "actors/connection.hpp"
#include "core/fingerprint.hpp"
#include "pool/pool_supervisor.hpp"

namespace mcprt::testing {

// -- the fake connection ----------------------------------------------------------

struct fake_world {
  struct spawned {
    connection_config cfg;
    connection_actor conn;
  };
  std::vector<spawned> spawns;
  /// (connection id, generation) of every connection that got `stop`.
  std::vector<std::pair<std::string, uint64_t>> stopped;
  /// The tool of every call that reached a connection, in order.
  std::vector<std::string> calls;
  /// The call id of every cancel a connection got, in order.
  std::vector<std::string> cancels;
  int32_t next_pid = 1000;

  std::size_t spawns_of(const std::string& id) const {
    return static_cast<std::size_t>(std::count_if(spawns.begin(), spawns.end(), [&](const spawned& s) {
      return connection_id(s.cfg.server) == id;
    }));
  }
  bool was_stopped(const std::string& id, uint64_t gen) const {
    return std::find(stopped.begin(), stopped.end(), std::make_pair(id, gen)) != stopped.end();
  }
};

struct fake_state {
  static inline const char* name = "fake.connection";
  connection_config cfg;
  std::string id;
  std::string mode;
  connection_status status = connection_status::connecting;
  int32_t pid = -1;
  std::string last_error;
  std::vector<std::string> stderr_tail;
  std::shared_ptr<fake_world> world;
  std::map<std::string, caf::typed_response_promise<json_value>> held; // "held": calls by call id
};

using fake_ptr = connection_actor::stateful_pointer<fake_state>;

inline void fake_publish(fake_ptr self) {
  auto& st = self->state;
  client_update u;
  u.server = st.cfg.server.name;
  u.connection_id = st.id;
  u.generation = st.cfg.generation;
  u.status = st.status;
  u.pid = st.pid;
  u.error = st.last_error;
  for (auto& sub : st.cfg.subscribers)
    self->send(sub, u);
}

inline void fake_set(fake_ptr self, connection_status s, std::string error = {}) {
  auto& st = self->state;
  if (st.status == connection_status::error || st.status == connection_status::disconnected) return;
  st.status = s;
  st.last_error = std::move(error);
  if (s == connection_status::connected) st.pid = st.world->next_pid++;
  fake_publish(self);
}

inline connection_actor::behavior_type fake_connection(fake_ptr self, connection_config cfg,
                                                std::shared_ptr<fake_world> world) {
  auto& st = self->state;
  st.world = world;
  st.id = connection_id(cfg.server);
  st.mode = cfg.server.spec.value("fake", std::string("ok"));
  st.cfg = std::move(cfg);
  bool first = world->spawns_of(st.id) == 1; // the factory recorded this one already
  fake_publish(self); // connecting
  if (st.mode == "fail" || (st.mode == "fail_restarts" && !first)) {
    st.stderr_tail.push_back("fake: cannot start");
    fake_set(self, connection_status::error, "server exited (exit code 4)");
  } else if (st.mode != "hang") {
    fake_set(self, connection_status::connected);
  }
  return {
    [=](atom::info) {
      auto& st = self->state;
      connection_info ci;
      ci.server = st.cfg.server.name;
      ci.connection_id = st.id;
      ci.generation = st.cfg.generation;
      ci.status = st.status;
      ci.pid = st.pid;
      ci.stderr_tail = st.stderr_tail;
      ci.last_error = st.last_error;
      for (auto& t : st.cfg.server.spec.value("tools", nlohmann::json::array()))
        ci.tools.push_back(tool_info{t.get<std::string>(), "", json_value{nlohmann::json::object()}, json_value{}});
      return ci;
    },
    [=](atom::call, const std::string& tool, const json_value&) {
      self->state.world->calls.push_back(tool);
      return json_value{nlohmann::json::object()};
    },
    [=](atom::call, const std::string& tool, const json_value&, const std::string& call_id,
        const progress_sink_actor& sink) -> caf::result<json_value> {
      auto& st = self->state;
      st.world->calls.push_back(tool);
      // A caller that asked for progress gets one step before the answer.
      if (sink) self->send(sink, call_progress_update{st.cfg.server.name, call_id, 1, true, 2, "half way"});
      if (st.mode != "held") return json_value{nlohmann::json::object()};
      auto rp = self->make_response_promise<json_value>();
      st.held.emplace(call_id, rp);
      return rp;
    },
    [=](atom::cancel, const std::string& call_id) {
      self->state.world->cancels.push_back(call_id);
      auto& held = self->state.held;
      auto i = held.find(call_id);
      if (i == held.end()) return false;
      i->second.deliver(make_error(errc::cancelled, "call " + call_id + " was cancelled"));
      held.erase(i);
      return true;
    },
    [=](atom::subscribe, event_sink_actor sink) { self->state.cfg.subscribers.push_back(sink); },
    [=](atom::filter, const tool_filter_spec&) {},
    [=](atom::ping) { return int64_t{1}; },
    [=](atom::mcp_request, const std::string&, const json_value&) { return json_value{nlohmann::json::object()}; },
    [=](atom::mcp_request, const std::string&, const json_value&, const std::string&) {
      return json_value{nlohmann::json::object()};
    },
    [=](atom::stop) -> caf::result<bool> {
      auto& st = self->state;
      auto rp = self->make_response_promise<bool>();
      st.world->stopped.emplace_back(st.id, st.cfg.generation);
      if (st.mode == "stuck") return rp; // never answers
      if (st.status != connection_status::error) {
        st.status = connection_status::disconnected;
        fake_publish(self);
      }
      rp.deliver(true);
      self->quit();
      return rp;
    },
    [=](atom::io_out, const std::string&) {},
    [=](atom::io_err, const std::string& line) { self->state.stderr_tail.push_back(line); },
    [=](atom::io_exit, const std::string& how) { fake_set(self, connection_status::error, "server exited (" + how + ")"); },
    [=](atom::http_msg, const std::string&) {},
    [=](atom::http_gone) { fake_set(self, connection_status::disconnected, "transport closed"); },
    [=](atom::http_err, const std::string&) {},
    [=](atom::http_auth, const std::string&) {},
    [=](atom::http_closed) {},
    [=](atom::tick) {
      if (self->state.status == connection_status::connecting) fake_set(self, connection_status::connected);
    },
    [=](atom::roots, const std::vector<mcp_root>&) {},
  };
}

/// A connection factory spawning fake connections into `w`.
inline connection_factory fake_factory(std::shared_ptr<fake_world> w) {
  return [w](caf::actor_system& sys, connection_config cc) {
    w->spawns.push_back({cc, connection_actor{}});
    auto idx = w->spawns.size() - 1;
    auto conn = sys.spawn(fake_connection, std::move(cc), w);
    w->spawns[idx].conn = conn;
    return conn;
  };
}

} // namespace mcprt::testing
