#include "actors/call_broker.hpp"

#include <map>
#include <utility>

#include <caf/all.hpp>

#include "core/call_table.hpp"

namespace mcprt {

using nlohmann::json;

call_delivery::~call_delivery() {
  answer(make_error(errc::not_connected, "the runtime stopped before " + server_ + " answered"));
}

void call_delivery::answer(caf::expected<json> result) {
  done_fn cb;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!done_) return;
    cb = std::move(done_);
    done_ = nullptr;
    progress_ = nullptr;
  }
  try {
    cb(std::move(result));
  } catch (...) {
    // A host's callback must not take the broker down.
  }
}

void call_delivery::progress(const events::call_progress& step) {
  progress_fn cb;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!done_ || !progress_) return;
    cb = progress_;
  }
  try {
    cb(step);
  } catch (...) {
    // As for the answer's callback.
  }
}

namespace {

/// What the table does not keep of a call: where it goes and whom it answers.
struct brokered_call {
  reconciler_actor target;
  connection_actor conn; // once the session named it
  json_value arguments;
  call_delivery_ptr delivery;
  caf::typed_response_promise<json_value> rp;
  progress_sink_actor sink;
  bool progress_events = false;

  bool wants_progress() const { return sink || progress_events || (delivery && delivery->wants_progress()); }
};

struct call_broker_state {
  static inline const char* name = "mcprt.call_broker";
  call_table table{0};
  std::map<std::string, brokered_call> calls;
  event_bus_actor bus;
  workspace_node_actor node; // set: every call goes to this remote node
  caf::error closed; // set: drained, every call fails with it
  bool ticking = false;
  int idle_ticks = 0;
};

using broker_self = call_broker_actor::stateful_pointer<call_broker_state>;

constexpr auto broker_tick = std::chrono::milliseconds(50);

bool broker_not_connected(const caf::error& e) {
  return e.category() == caf::atom("mcprt") && e.code() == static_cast<uint8_t>(errc::not_connected);
}

void broker_answer(brokered_call& c, caf::expected<json_value> result) {
  if (c.delivery) {
    if (result) c.delivery->answer(std::move(result->value));
    else c.delivery->answer(std::move(result.error()));
    return;
  }
  if (!c.rp.pending()) return;
  if (result) c.rp.deliver(std::move(*result));
  else c.rp.deliver(std::move(result.error()));
}

/// The call leaves the broker with its answer.
void broker_finish(broker_self self, const std::string& key, caf::expected<json_value> result) {
  auto& st = self->state;
  st.table.remove(key);
  auto i = st.calls.find(key);
  if (i == st.calls.end()) return;
  auto c = std::move(i->second);
  st.calls.erase(i);
  broker_answer(c, std::move(result));
}

/// Calls in flight keep the tick going, and it stops a second after the
/// last one (a steady stream of short calls does not re-arm it each time).
void broker_arm_tick(broker_self self) {
  auto& st = self->state;
  st.idle_ticks = 0;
  if (std::exchange(st.ticking, true)) return;
  self->delayed_send(self, broker_tick, atom::tick_v);
}

void broker_attempt(broker_self self, const std::string& key);

void broker_failed(broker_self self, const std::string& key, uint64_t serial, caf::error e) {
  auto& st = self->state;
  auto* slot = st.table.find(key, serial);
  if (!slot) return; // answered, cancelled or given up on already
  auto retry_at = self->clock().now() + broker_tick;
  if (broker_not_connected(e) && retry_at < slot->connecting_deadline && retry_at < slot->deadline) {
    st.table.wait(*slot, retry_at);
    broker_arm_tick(self);
    return;
  }
  broker_finish(self, key, std::move(e));
}

/// Tells whoever holds the call that it is no longer wanted: the
/// connection, so that the server hears of it and its late answer goes
/// nowhere, or the remote node.
void broker_take_back(broker_self self, const call_slot& slot, const brokered_call& c) {
  if (!slot.method.empty() || slot.phase != call_phase::asking) return;
  if (self->state.node) caf::anon_send(self->state.node, atom::cancel_v, slot.session, slot.key);
  else if (c.conn) caf::anon_send(c.conn, atom::cancel_v, slot.key);
}

/// Where an attempt's answer goes: to the call, while `serial` is its attempt.
auto broker_answered(broker_self self, const std::string& key, uint64_t serial) {
  return [self, key, serial](json_value& r) {
    if (self->state.table.find(key, serial)) broker_finish(self, key, std::move(r));
  };
}

auto broker_refused(broker_self self, const std::string& key, uint64_t serial) {
  return [self, key, serial](caf::error& e) { broker_failed(self, key, serial, std::move(e)); };
}

/// The broker itself, when the caller wants the call's progress.
progress_sink_actor broker_sink(broker_self self, const brokered_call& call) {
  return call.wants_progress() ? caf::actor_cast<progress_sink_actor>(self) : progress_sink_actor{};
}

/// The call goes out on `conn`, under its key.
void broker_send(broker_self self, const std::string& key, uint64_t serial, connection_actor conn) {
  auto& st = self->state;
  auto* slot = st.table.find(key, serial);
  auto c = st.calls.find(key);
  if (!slot || c == st.calls.end()) return; // cancelled or given up on while its connection was looked up
  auto& call = c->second;
  call.conn = conn;
  if (slot->method.empty())
    self->request(conn, caf::infinite, atom::call_v, slot->tool, call.arguments, key, broker_sink(self, call))
      .then(broker_answered(self, key, serial), broker_refused(self, key, serial));
  else
    self->request(conn, caf::infinite, atom::mcp_request_v, slot->method, call.arguments, key)
      .then(broker_answered(self, key, serial), broker_refused(self, key, serial));
}

/// The remote node takes the whole call (runtime::connect).
void broker_send_to_node(broker_self self, const std::string& key, uint64_t serial) {
  auto& st = self->state;
  auto* slot = st.table.find(key);
  auto& call = st.calls.at(key);
  if (slot->method.empty())
    self->request(st.node, caf::infinite, atom::call_v, slot->session, slot->server, slot->tool, call.arguments, key,
                  broker_sink(self, call))
      .then(broker_answered(self, key, serial), broker_refused(self, key, serial));
  else
    self->request(st.node, caf::infinite, atom::mcp_request_v, slot->session, slot->server, slot->method,
                  call.arguments)
      .then(broker_answered(self, key, serial), broker_refused(self, key, serial));
}

// The session names the call's connection (once its server is up), and the
// call goes there. No timeout of its own: the call's deadline is the tick's.
void broker_attempt(broker_self self, const std::string& key) {
  auto& st = self->state;
  auto* slot = st.table.find(key);
  auto c = st.calls.find(key);
  if (!slot || c == st.calls.end()) return;
  auto serial = st.table.ask_again(*slot);
  c->second.conn = connection_actor{};
  if (st.node) {
    broker_send_to_node(self, key, serial);
    return;
  }
  self->request(c->second.target, caf::infinite, atom::lookup_v, slot->server, slot->tool)
    .then([self, key, serial](connection_actor& conn) { broker_send(self, key, serial, std::move(conn)); },
          [self, key, serial](caf::error& e) { broker_failed(self, key, serial, std::move(e)); });
}

caf::error broker_refusal(const call_refused& r) {
  return make_error(r.why == call_refusal::too_many_calls ? errc::too_many_calls : errc::bad_request, r.message);
}

void broker_take(broker_self self, call_request& r, brokered_call c) {
  auto& st = self->state;
  if (st.closed) {
    broker_answer(c, st.closed);
    return;
  }
  if (!r.target && !st.node) {
    broker_answer(c, make_error(errc::unknown_session, "no session " + r.session));
    return;
  }
  auto now = self->clock().now();
  call_slot slot;
  slot.owner = std::move(r.owner);
  slot.call_id = std::move(r.call_id);
  slot.session = std::move(r.session);
  slot.server = std::move(r.server);
  slot.tool = std::move(r.tool);
  slot.method = std::move(r.method);
  slot.deadline = now + r.timeout;
  slot.connecting_deadline = now + r.wait_connecting;
  auto admitted = st.table.admit(std::move(slot));
  if (admitted.refused) {
    broker_answer(c, broker_refusal(*admitted.refused));
    return;
  }
  auto& key = admitted.key;
  c.target = std::move(r.target);
  c.arguments = std::move(r.arguments);
  c.sink = std::move(r.progress_sink);
  c.progress_events = r.progress_events;
  st.calls.emplace(key, std::move(c));
  broker_arm_tick(self);
  broker_attempt(self, key);
}

void broker_on_tick(broker_self self) {
  auto& st = self->state;
  auto now = self->clock().now();
  for (auto& key : st.table.expired(now)) {
    auto* slot = st.table.find(key);
    auto c = st.calls.find(key);
    if (slot && c != st.calls.end()) broker_take_back(self, *slot, c->second);
    broker_finish(self, key, caf::make_error(caf::sec::request_timeout));
  }
  for (auto& key : st.table.due(now))
    broker_attempt(self, key);
  st.idle_ticks = st.table.empty() ? st.idle_ticks + 1 : 0;
  st.ticking = st.idle_ticks < 20;
  if (st.ticking) self->delayed_send(self, broker_tick, atom::tick_v);
}

void broker_on_progress(broker_self self, const call_progress_update& u) {
  auto& st = self->state;
  auto* slot = st.table.find(u.call_id);
  auto c = st.calls.find(u.call_id);
  if (!slot || c == st.calls.end()) return; // answered already: never after the answer
  events::call_progress step{slot->call_id, slot->session, slot->server, slot->tool, u.progress, std::nullopt,
                             u.message};
  if (u.has_total) step.total = u.total;
  auto& call = c->second;
  if (call.sink) {
    auto relayed = u;
    relayed.call_id = slot->call_id;
    self->send(call.sink, std::move(relayed));
  }
  if (call.delivery) call.delivery->progress(step);
  if (call.progress_events) publish(self, st.bus, std::move(step));
}

call_attribution_reply broker_attribution(broker_self self, const std::string& server, const std::string& tool) {
  auto a = self->state.table.attribute(server, tool);
  call_attribution_reply out;
  out.in_flight = std::move(a.in_flight);
  if (a.call) {
    out.found = true;
    out.session = a.call->session;
    out.server = a.call->server;
    out.tool = a.call->tool;
    out.call_id = a.call->key;
  }
  return out;
}

call_broker_actor::behavior_type call_broker(broker_self self, std::size_t max_per_server, event_bus_actor bus,
                                             std::shared_ptr<call_inbox> inbox, workspace_node_actor node) {
  close_on_exit(self, inbox);
  self->state.table = call_table{max_per_server};
  self->state.node = std::move(node);
  self->state.bus = std::move(bus);
  return {
    [self](call_request& r) -> caf::result<json_value> {
      brokered_call c;
      c.rp = self->make_response_promise<json_value>();
      auto rp = c.rp;
      broker_take(self, r, std::move(c));
      return rp;
    },
    [self, inbox](atom::run) {
      for (auto& call : inbox->take()) {
        brokered_call c;
        c.delivery = std::move(call.delivery);
        broker_take(self, call.request, std::move(c));
      }
    },
    [self](atom::cancel, const std::string& owner, const std::string& call_id) {
      if (call_id.empty()) return false;
      auto key = call_table::key_of(owner, call_id);
      auto& st = self->state;
      auto* slot = st.table.find(key);
      auto c = st.calls.find(key);
      if (!slot || c == st.calls.end()) return false;
      // Out on a connection, the server hears of it; waiting for its
      // connection or between two tries, it never goes out.
      broker_take_back(self, *slot, c->second);
      broker_finish(self, key, make_error(errc::cancelled, "call " + call_id + " was cancelled by the caller"));
      return true;
    },
    [self](atom::lookup, const std::string& server, const std::string& tool) {
      return broker_attribution(self, server, tool);
    },
    [self](atom::lookup, const std::string& key) {
      auto& st = self->state;
      call_attribution_reply out;
      if (auto* slot = st.table.find(key)) {
        out.found = true;
        out.session = slot->session;
        out.server = slot->server;
        out.tool = slot->tool;
        out.call_id = slot->key;
      }
      return out;
    },
    [self](const call_progress_update& u) { broker_on_progress(self, u); },
    [self](atom::drain, caf::error& why) {
      auto& st = self->state;
      if (!why) why = make_error(errc::not_connected, "the runtime stopped");
      st.closed = why;
      for (auto& key : st.table.keys())
        broker_finish(self, key, st.closed);
      return true;
    },
    [self](atom::tick) { broker_on_tick(self); },
  };
}

} // namespace

call_broker_actor spawn_call_broker(caf::actor_system& sys, std::size_t max_per_server, event_bus_actor bus,
                                    std::shared_ptr<call_inbox> inbox, workspace_node_actor node) {
  return sys.spawn(call_broker, max_per_server, std::move(bus), std::move(inbox), std::move(node));
}

} // namespace mcprt
