#include "actors/fleet_link.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/openssl/manager.hpp>
#include <spdlog/spdlog.h>

namespace mcprt {

namespace {

using fleet_link_impl = fleet_link_actor::extend<caf::reacts_to<atom::tick>>;

struct fleet_link_state {
  static inline const char* name = "mcprt.fleet_link";

  fleet_link_options opts;
  fleet_budget_actor server;
  bool connecting = false;
  /// connecting | connected | unreachable
  std::string state = "connecting";
  std::string error;
  std::set<std::string> held;
  /// Names whose reserve is at the budget server, unanswered. A renewal
  /// sent meanwhile names them apart from `held`: the server answers the
  /// reserve before it reads the renewal, so the renewal must neither give
  /// such a slot back nor claim it.
  std::map<std::string, int> asking;
  fleet_info info;
  bool informed = false;
  /// Renewals sent and not yet answered on the current connection. A slow
  /// answer does not hold the next renewal back (a renewal is a level, so
  /// two in flight say the same), or a few slow round trips would let the
  /// lease run out while the node is alive; a budget server that does not
  /// answer at all gets no more than `max_renewals_in_flight`.
  int renewals_in_flight = 0;
  /// Counts connections, so that an answer from before a reconnect is
  /// told apart from one of the current connection.
  uint64_t epoch = 0;
  std::vector<fleet_listener_actor> listeners;
  /// Reserves made before the first connection was up: they wait for it
  /// rather than fail while the node starts.
  std::vector<std::pair<std::string, caf::typed_response_promise<fleet_grant>>> waiting;
};

using fleet_link_self = fleet_link_impl::stateful_pointer<fleet_link_state>;

std::string address(const fleet_link_options& o) {
  return o.host + ":" + std::to_string(o.port);
}

void tell_listeners(fleet_link_self self) {
  for (auto& l : self->state.listeners)
    self->send(l, atom::fleet_free_v);
}

void lost(fleet_link_self self, std::string why) {
  auto& st = self->state;
  for (auto& [name, rp] : st.waiting)
    rp.deliver(fleet_grant::unreachable);
  st.waiting.clear();
  if (st.state == "connected") spdlog::warn("fleet budget {}: unreachable ({})", address(st.opts), why);
  if (st.server) self->demonitor(st.server.address());
  st.server = nullptr;
  st.state = "unreachable";
  st.error = std::move(why);
  st.renewals_in_flight = 0;
  ++st.epoch;
}

void ask_server(fleet_link_self self, const std::string& name, caf::typed_response_promise<fleet_grant> rp) {
  auto& st = self->state;
  auto server = st.server;
  ++st.asking[name];
  auto answered = [self, name] {
    auto& asking = self->state.asking;
    if (auto i = asking.find(name); i != asking.end() && --i->second <= 0) asking.erase(i);
  };
  self->request(server, st.opts.timeout, atom::reserve_v, st.opts.node, name)
    .then(
      [self, rp, name, answered](fleet_grant g) mutable {
        answered();
        if (g == fleet_grant::reserved || g == fleet_grant::already_held) self->state.held.insert(name);
        rp.deliver(g);
      },
      [self, rp, server, answered](caf::error& err) mutable {
        answered();
        if (self->state.server == server) lost(self, "reserve failed: " + self->system().render(err));
        rp.deliver(fleet_grant::unreachable);
      });
}

constexpr int max_renewals_in_flight = 3;

void renew(fleet_link_self self) {
  auto& st = self->state;
  if (!st.server || st.renewals_in_flight >= max_renewals_in_flight) return;
  ++st.renewals_in_flight;
  std::vector<std::string> held(st.held.begin(), st.held.end());
  std::vector<std::string> asking;
  for (auto& [name, n] : st.asking)
    asking.push_back(name);
  auto server = st.server;
  auto epoch = st.epoch;
  self
    ->request(server, st.opts.timeout, atom::renew_v, st.opts.node, std::move(held), std::move(asking),
              caf::actor_cast<fleet_listener_actor>(self))
    .then(
      [self, epoch](fleet_info& info) {
        auto& st = self->state;
        if (st.epoch != epoch) return;
        --st.renewals_in_flight;
        st.info = std::move(info);
        st.informed = true;
        if (st.state != "connected") {
          spdlog::info("fleet budget {}: connected ({} of {} slots reserved)", address(st.opts),
                       st.info.reserved_count, st.info.limited ? std::to_string(st.info.budget) : "unlimited");
          st.state = "connected";
          st.error.clear();
          for (auto& [name, rp] : std::exchange(st.waiting, {}))
            ask_server(self, name, std::move(rp));
          // What was refused while the server was away may fit now.
          tell_listeners(self);
        }
      },
      [self, epoch](caf::error& err) {
        if (self->state.epoch == epoch) lost(self, "renewal failed: " + self->system().render(err));
      });
}

void connect(fleet_link_self self) {
  auto& st = self->state;
  if (st.server || st.connecting) return;
  st.connecting = true;
  auto mm = st.opts.tls ? self->system().openssl_manager().actor_handle() : self->system().middleman().actor_handle();
  self->request(mm, st.opts.timeout, caf::connect_atom::value, st.opts.host, st.opts.port)
    .then(
      [self](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>& ifs) {
        auto& st = self->state;
        st.connecting = false;
        if (!ptr) {
          lost(self, "no actor is published at " + address(st.opts));
          return;
        }
        if (!self->system().assignable<fleet_budget_actor>(ifs)) {
          lost(self, address(st.opts) + " is not an mcprt budget server");
          return;
        }
        st.server = caf::actor_cast<fleet_budget_actor>(std::move(ptr));
        self->monitor(st.server);
        // The renewal is the node's claim: it goes first, before any new
        // reserve, on the same connection.
        renew(self);
      },
      [self](caf::error& err) {
        auto& st = self->state;
        st.connecting = false;
        lost(self, "cannot connect: " + self->system().render(err));
      });
}

fleet_link_impl::behavior_type fleet_link_behavior(fleet_link_self self, fleet_link_options opts) {
  self->state.opts = std::move(opts);
  self->set_down_handler([self](caf::down_msg& dm) {
    if (self->state.server && dm.source == self->state.server.address())
      lost(self, "the budget server went away");
  });
  connect(self);
  self->delayed_send(self, self->state.opts.retry, atom::tick_v);
  return {
    [self](atom::reserve, const std::string& name) -> caf::result<fleet_grant> {
      auto& st = self->state;
      if (st.held.count(name) != 0) return fleet_grant::already_held;
      if (st.state == "connecting") {
        auto rp = self->make_response_promise<fleet_grant>();
        st.waiting.emplace_back(name, rp);
        return rp;
      }
      if (!st.server || st.state != "connected") {
        if (st.informed && st.info.mode == "warn") {
          spdlog::warn("fleet budget {} is unreachable: {} starts uncounted (warn mode)", address(st.opts), name);
          st.held.insert(name);
          return fleet_grant::reserved;
        }
        return fleet_grant::unreachable;
      }
      auto rp = self->make_response_promise<fleet_grant>();
      ask_server(self, name, rp);
      return rp;
    },
    [self](atom::release, const std::string& name) {
      auto& st = self->state;
      if (st.held.erase(name) == 0) return;
      // Without a server the next renewal states the holding.
      if (st.server) self->send(st.server, atom::release_v, st.opts.node, name);
    },
    [self](atom::fleet_free) { tell_listeners(self); },
    [self](atom::drain) -> caf::result<bool> {
      auto& st = self->state;
      st.held.clear();
      if (!st.server) return false;
      auto rp = self->make_response_promise<bool>();
      self
        ->request(st.server, st.opts.timeout, atom::renew_v, st.opts.node, std::vector<std::string>{},
                  std::vector<std::string>{}, caf::actor_cast<fleet_listener_actor>(self))
        .then([rp](const fleet_info&) mutable { rp.deliver(true); },
              [rp](const caf::error&) mutable { rp.deliver(false); });
      return rp;
    },
    [self](atom::subscribe, fleet_listener_actor& l) {
      if (l) self->state.listeners.push_back(std::move(l));
    },
    [self](atom::tick) {
      auto& st = self->state;
      auto lease = std::chrono::milliseconds(st.informed ? st.info.lease_ms : 3000);
      if (!st.server) connect(self);
      else renew(self);
      // Connected, a tick is a renewal, every third of the lease: no
      // wake-ups between.
      auto next = st.state == "connected" ? std::max<std::chrono::milliseconds>(lease / 3, st.opts.retry) : st.opts.retry;
      self->delayed_send(self, next, atom::tick_v);
    },
    [self](atom::snapshot) {
      auto& st = self->state;
      fleet_status s;
      s.address = address(st.opts);
      s.node = st.opts.node;
      s.state = st.state;
      s.held = st.held.size();
      s.fleet = st.info;
      s.error = st.error;
      return s;
    },
  };
}

} // namespace

std::string make_fleet_node_id() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::random_device rd;
  char suffix[9];
  std::snprintf(suffix, sizeof(suffix), "%08x", static_cast<unsigned>(rd()));
  std::string h(host);
  // '@' separates a slot's server name from its node at the budget server.
  std::replace(h.begin(), h.end(), '@', '-');
  return (h.empty() ? "node" : h) + "-" + std::to_string(getpid()) + "-" + suffix;
}

fleet_link_actor spawn_fleet_link(caf::actor_system& sys, fleet_link_options opts) {
  return caf::actor_cast<fleet_link_actor>(sys.spawn(fleet_link_behavior, std::move(opts)));
}

} // namespace mcprt
