// A runtime on the workspace of a remote node (`runtime::connect`): the
// node's facade answers, local views of its bus, gating actor, watcher and
// sessions stand in for the actors a host would otherwise talk to, and the
// link tells when the node goes away.

#include <atomic>
#include <chrono>
#include <set>

#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/openssl/manager.hpp>

#include "actors/io_thread_jobs.hpp"
#include "core/event_payload.hpp"
#include "mcprt/remote_link.hpp"
#include "mcprt/runtime_impl.hpp"
#include "messages/remote.hpp"

namespace mcprt {

using nlohmann::json;

namespace {

/// A remote runtime's link to its node (runtime::connect).
struct remote_state {
  std::string address; // HOST:PORT as the host gave it
  workspace_node_actor node;
  remote_host_actor link;
  /// False once the node went away (set under `mtx`, with `reason`): a
  /// call that starts later fails at once, and the broker fails the ones
  /// in flight.
  std::atomic<bool> up{true};
  std::mutex mtx;
  std::string reason;
  /// The sinks this host subscribed: each gets the last event.
  std::vector<event_subscriber_actor> sinks;

  caf::error gone() {
    std::lock_guard<std::mutex> guard{mtx};
    return make_error(errc::disconnected, "the workspace node at " + address + " went away (" + reason +
                                            "): runtime::connect again once it is back");
  }
};

/// The remote node went away (on the link's thread): every call in flight
/// fails now, later ones fail as they start, and each subscriber gets the
/// last event.
void node_gone(const std::shared_ptr<remote_state>& r, const call_broker_actor& broker, const std::string& why) {
  std::vector<event_subscriber_actor> sinks;
  {
    std::lock_guard<std::mutex> guard{r->mtx};
    r->reason = why;
    sinks = r->sinks;
    r->up = false;
  }
  spdlog::warn("runtime: the workspace node at {} went away ({})", escape_for_display(r->address),
               escape_for_display(why));
  // Every call in flight fails now, and every later one as it comes.
  caf::anon_send(broker, atom::drain_v, r->gone());
  event ev;
  ev.kind = event_kind::disconnected;
  ev.payload = events::disconnected{r->address, why};
  ev.timestamp_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  json data;
  events::to_json(data, ev.payload);
  make_payload_safe(data);
  ev.data.value = std::move(data);
  for (auto& sink : sinks)
    caf::anon_send(sink, ev);
}

using session_entry = runtime::impl::session_entry;

/// A remote node's workspace: the node's facade answers what only its
/// runtime object can (sessions, the snapshot, restarts, authorizations).
class remote_side final : public runtime::impl::side {
public:
  explicit remote_side(std::shared_ptr<remote_state> r) : r_(std::move(r)) {}

  bool remote() const override { return true; }

  std::optional<caf::error> lost() const override {
    if (r_->up) return std::nullopt;
    return r_->gone();
  }

  void open_session(runtime::impl& p, std::vector<server_config> servers,
                    std::function<void(std::string)> done) override {
    auto remote = r_;
    p.ask_async<std::string>(
      remote->node, std::chrono::seconds(30),
      [&p, remote, done = std::move(done)](caf::expected<std::string> id) {
        if (!id || id->empty()) {
          if (!id)
            spdlog::warn("runtime: the node at {} opened no session: {}", escape_for_display(remote->address),
                         escape_for_display(p.sys.render(id.error())));
          done({});
          return;
        }
        session_entry entry;
        entry.reconciler = spawn_remote_session(p.sys, remote->node, *id);
        p.add_session(*id, entry);
        done(std::move(*id));
      },
      atom::open_v, remote->link, std::move(servers));
  }

  void close_session(runtime::impl& p, const std::string& id, const session_entry& s,
                     std::function<void()> done) override {
    // The node closes it; a node that went away closed it already.
    caf::anon_send_exit(s.reconciler, caf::exit_reason::user_shutdown);
    p.ask_async<bool>(r_->node, std::chrono::seconds(30), [done = std::move(done)](caf::expected<bool>) { done(); },
                      atom::close_v, id);
  }

  void snapshot(runtime::impl& p, std::function<void(json)> done) override {
    p.ask_async<json_value>(
      r_->node, std::chrono::seconds(10),
      [done = std::move(done), address = r_->address, &sys = p.sys](caf::expected<json_value> r) {
        if (r) done(std::move(r->value));
        else done(json{{"v", 1}, {"node", address}, {"error", sys.render(r.error())}});
      },
      atom::snapshot_v);
  }

  void restart(runtime::impl& p, const std::string& server,
               std::function<void(caf::expected<std::vector<restart_result>>)> done) override {
    p.ask_async<std::vector<restart_result>>(r_->node, std::chrono::seconds(70), std::move(done), atom::restart_v,
                                             server);
  }

  void authorize(runtime::impl& p, const std::string& server, authorize_options options,
                 std::function<void(caf::expected<std::string>)> done) override {
    if (!options.browser_command.empty()) {
      done(make_error(errc::bad_request, "a remote workspace node opens no browser: show the URL yourself"));
      return;
    }
    p.ask_async<std::string>(r_->node, options.url_timeout + std::chrono::seconds(5), std::move(done),
                             atom::authorize_v, server, static_cast<uint64_t>(options.callback_timeout.count()),
                             static_cast<uint64_t>(options.url_timeout.count()));
  }

  void forget_authorization(runtime::impl& p, const std::string& server,
                            std::function<void(caf::expected<bool>)> done) override {
    p.ask_async<bool>(r_->node, std::chrono::seconds(10), std::move(done), atom::forget_v, server);
  }

  // A remote node's clients run on the node: nothing of this process to keep them from.
  void set_own_listeners(runtime::impl&, std::vector<listen_endpoint>) override {}

  void set_roots(runtime::impl&, std::vector<mcp_root>) override {
    // The node's connections offer the node owner's roots, which no host
    // changes for the node's other clients.
    spdlog::warn("runtime: set_roots does nothing on a remote workspace node's runtime");
  }

  void subscribed(const event_subscriber_actor& sink) override {
    std::lock_guard<std::mutex> guard{r_->mtx};
    r_->sinks.push_back(sink);
  }

  void unsubscribed(const event_subscriber_actor& sink) override {
    std::lock_guard<std::mutex> guard{r_->mtx};
    r_->sinks.erase(std::remove(r_->sinks.begin(), r_->sinks.end(), sink), r_->sinks.end());
  }

  drain_result shutdown(runtime::impl& p, std::chrono::milliseconds) override {
    // This host's sessions close at the node, the local views of its
    // facade end, and the link's end tells the node the host has gone.
    auto kill = [](const auto& h) {
      if (h) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
    };
    p.close_all_sessions();
    kill(p.watcher);
    kill(p.gating);
    kill(p.broker);
    p.close_asker();
    kill(p.bus);
    kill(r_->link);
    return {};
  }

private:
  std::shared_ptr<remote_state> r_;
};

} // namespace

caf::expected<std::unique_ptr<runtime>> runtime::connect(caf::actor_system& sys, const std::string& host,
                                                         uint16_t port, connect_options co) {
  auto address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  if (auto err = check_middleman(sys, co.tls, "runtime::connect")) return err;
  auto mm = co.tls ? sys.openssl_manager().actor_handle() : sys.middleman().actor_handle();
  before_blocking_wait();
  caf::scoped_actor self{sys};
  workspace_node_actor node;
  caf::error err;
  self->request(mm, co.timeout, caf::connect_atom::value, host, port)
    .receive(
      [&](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>& ifs) {
        if (!ptr)
          err = make_error(errc::not_connected, "no actor is published at " + address);
        else if (!sys.assignable<workspace_node_actor>(ifs))
          err = make_error(errc::protocol_error,
                           address + " is not an mcprt workspace node (mcprt serve --caf-port)");
        else
          node = caf::actor_cast<workspace_node_actor>(std::move(ptr));
      },
      [&](caf::error& e) { err = make_error(errc::not_connected, "cannot connect to " + address + ": " + sys.render(e)); });
  if (!node) return err;
  auto p = std::make_unique<impl>(sys);
  auto r = std::make_shared<remote_state>();
  r->address = address;
  r->node = node;
  p->ws = std::make_unique<remote_side>(r);
  // Weak: the link actor lives as long as its handle in `r`, and a strong
  // reference back would keep both alive forever.
  p->broker = spawn_call_broker(sys, runtime_options{}.max_calls_per_server, event_bus_actor{}, p->host_call_inbox, node);
  p->asker = sys.spawn(runtime_asker, p->asker_jobs);
  r->link = spawn_remote_link(sys, node, [weak = std::weak_ptr<remote_state>(r), broker = p->broker](const std::string& why) {
    if (auto r = weak.lock()) node_gone(r, broker, why);
  });
  caf::expected<workspace_info> h{caf::error{}};
  self->request(node, co.timeout, atom::hello_v, r->link)
    .receive([&](workspace_info& x) { h = std::move(x); }, [&](caf::error& e) { h = std::move(e); });
  if (!h) {
    caf::anon_send_exit(r->link, caf::exit_reason::user_shutdown);
    return make_error(errc::not_connected, address + " did not answer: " + sys.render(h.error()));
  }
  auto& o = p->opts;
  o.workspace = h->workspace;
  o.profile = h->profile;
  o.trusted = h->trusted;
  o.pool = h->pool;
  if (h->limited) o.budget = h->budget;
  o.mode = parse_budget_mode(h->mode).value_or(budget_mode::off);
  o.watch = false; // the node watches
  // The node hands out no actor of its own: the runtime's actors here are
  // local views of its facade. No pool or budget: those stay the node's.
  p->bus = spawn_remote_bus(sys, node);
  p->gating = spawn_remote_gating(sys, node);
  p->watcher = spawn_remote_watcher(sys, node);
  p->show_id = [&sys, r](const std::string& id) -> std::string {
    if (!r->up) return {};
    before_blocking_wait();
    caf::scoped_actor asker{sys};
    std::string out;
    asker->request(r->node, std::chrono::seconds(10), atom::shown_id_v, id)
      .receive([&](std::string& x) { out = std::move(x); }, [](caf::error&) {});
    return out;
  };
  spdlog::info("runtime: connected to the workspace node at {} ({}, mcprt {})", escape_for_display(address),
               escape_for_display(h->workspace), escape_for_display(h->version));
  return std::unique_ptr<runtime>(new runtime(std::move(p)));
}

} // namespace mcprt
