#include "mcprt/gateway.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <future>
#include <limits>
#include <set>
#include <utility>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/io_thread_jobs.hpp"
#include "core/gateway_session.hpp"
#include "core/untrusted_text.hpp"
#include "mcprt/runtime.hpp"
#include "messages/unavailable_error.hpp"

// The gateway refresher's timers and the end of a rebuild.
CAF_ADD_ATOM(mcprt, mcprt::atom, rebuild_due, "gw_due")
CAF_ADD_ATOM(mcprt, mcprt::atom, rebuilt, "gw_built")
CAF_ADD_ATOM(mcprt, mcprt::atom, idle_sweep, "gw_sweep")

namespace mcprt {

using nlohmann::json;
using clock_type = std::chrono::steady_clock;

namespace {

std::string random_session_id() {
  // 128 bits: a session id is the only thing tying a POST to its session.
  std::random_device rd;
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 4; ++i) {
    auto x = rd();
    for (int j = 0; j < 8; ++j, x >>= 4)
      out += hex[x & 15];
  }
  return out;
}

std::string key_of(const json& id) {
  return id.dump();
}

int level_rank(const std::string& level) {
  static const char* levels[] = {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"};
  for (int i = 0; i < 8; ++i)
    if (level == levels[i]) return i;
  return 0;
}

bool is(const caf::error& e, errc x) {
  return e.category() == caf::atom("mcprt") && e.code() == static_cast<uint8_t>(x);
}

std::string message_of(caf::actor_system& sys, const caf::error& e) {
  if (e.category() == caf::atom("mcprt")) {
    auto& ctx = e.context();
    if (!ctx.empty() && ctx.match_element<std::string>(0)) return ctx.get_as<std::string>(0);
  }
  return sys.render(e);
}

json tool_error_result(const std::string& text) {
  return json{{"content", json::array({json{{"type", "text"}, {"text", text}}})}, {"isError", true}};
}

/// The answer of a 2026-07-28 request: under the id of the request that is
/// waiting now (a retry may use another than the request it continues),
/// with `resultType` and caching hints.
class modern_reply final : public mcprt::gateway_channel {
public:
  modern_reply(std::shared_ptr<mcprt::gateway_channel> inner, json id, std::string method)
    : inner_(std::move(inner)), id_(std::move(id)), method_(std::move(method)) {}

  void send(const json& msg, bool last) override {
    if (!last || !msg.is_object() || !msg.contains("id")) {
      inner_->send(msg, last);
      return;
    }
    json out = msg;
    out["id"] = id_;
    if (auto r = out.find("result"); r != out.end())
      *r = mcprt::gateway_session::modern_result(method_, std::move(*r));
    inner_->send(out, last);
  }
  void send_error(const json& msg, int status) override {
    json out = msg;
    out["id"] = id_;
    inner_->send_error(out, status);
  }
  bool open() const override { return inner_->open(); }
  void close() override { inner_->close(); }

private:
  std::shared_ptr<mcprt::gateway_channel> inner_;
  json id_;
  std::string method_;
};

} // namespace

// -- state ------------------------------------------------------------------------

struct gateway_rebuild;

struct gateway::impl : std::enable_shared_from_this<gateway::impl> {
  struct pending_request {
    std::shared_ptr<gateway_channel> reply;
    std::string call_id; // tools/call, prompts/get, resources/read: ours, for cancel and the server's requests
    std::uint64_t call_number = 0; // the order the gateway sent those in
    std::string wire;    // tools/call: the connection's, for the server's logs
    std::string server;
    std::string method;
    std::string uri; // resources/subscribe and unsubscribe
    json id;          // the client's
    std::string name; // 2026-07-28: what a retry must name again (params.name or uri)
  };

  struct session {
    std::string id;
    std::string runtime_session; // "" until opened
    std::string set;             // the tool set it opened with; "" for the whole catalog
    gateway_session engine;
    std::shared_ptr<gateway_channel> stream;
    std::deque<json> backlog;
    std::map<std::string, pending_request> requests; // by key_of(id)
    struct outbound {
      host_responder responder;
      std::string request_id; // the runtime's server_request id
      std::string method;     // 2026-07-28: asked for in an InputRequiredResult
      json params;
      std::string input_key;  // a 2026-07-28 server's name for it, if it has one
      std::string asked_as;   // its key in the InputRequiredResult that asked for it
    };
    bool modern = false; // 2026-07-28: one request (and its retries), no client session
    // 2026-07-28 subscriptions/listen: what its stream carries.
    std::optional<gateway_effects::listen_request> listen;
    std::string request_state; // 2026-07-28: the InputRequiredResult it waits on a retry of
    std::size_t round_seen = 0; // inputs of a 2026-07-28 server's round come so far
    std::map<std::uint64_t, outbound> outbound;
    std::set<std::pair<std::string, std::string>> subscriptions; // (server, uri)
    clock_type::time_point last_active = clock_type::now();
    std::chrono::system_clock::time_point opened = std::chrono::system_clock::now();
    std::chrono::system_clock::time_point last_active_wall = opened;

    explicit session(gateway_session::options o) : engine(std::move(o)) {}
  };

  runtime& rt;
  caf::actor_system& sys;
  gateway_options opts;

  mutable std::mutex mtx;
  std::map<std::string, std::shared_ptr<session>> sessions;
  // Tool calls in flight: the runtime's call id -> (session, request key).
  std::map<std::string, std::pair<std::string, std::string>> calls;
  // The same calls by the id their connection knows them by (server logs).
  std::map<std::string, std::pair<std::string, std::string>> wires;
  // Wires of calls that just ended, and their session: a log the server
  // sent during the call may come after its answer (the bus and the answer
  // travel apart). The newest 256.
  std::deque<std::pair<std::string, std::string>> ended_wires;
  void wire_ended(const std::string& wire, const std::string& sid) {
    wires.erase(wire);
    ended_wires.emplace_back(wire, sid);
    if (ended_wires.size() > 256) ended_wires.pop_front();
  }
  std::string session_of_ended_wire(const std::string& wire) const {
    for (auto it = ended_wires.rbegin(); it != ended_wires.rend(); ++it)
      if (it->first == wire) return it->second;
    return {};
  }
  // Upstream resource subscriptions, shared by sessions: one subscribe per
  // (server, uri), one unsubscribe when the last session lets go.
  std::map<std::pair<std::string, std::string>, std::set<std::string>> subscribers;
  std::shared_ptr<const gateway_catalog> catalog = std::make_shared<gateway_catalog>(gateway_catalog::build({}));
  // The settings' tool sets and their catalogs, from the same rebuild as
  // `catalog`. A session of a set that is gone sees an empty catalog.
  std::map<std::string, tool_set> tool_sets;
  std::map<std::string, std::shared_ptr<const gateway_catalog>> set_catalogs;
  std::shared_ptr<const gateway_catalog> empty_catalog = catalog;
  // Under mtx.
  const gateway_catalog& catalog_of(const session& s) const {
    if (s.set.empty()) return *catalog;
    auto c = set_catalogs.find(s.set);
    return c == set_catalogs.end() ? *empty_catalog : *c->second;
  }
  // Under mtx: the session `id`, when it belongs to `set`.
  std::shared_ptr<session> find_in(const std::string& id, const std::string& set) const {
    auto s = find(id);
    // A 2026-07-28 request's state is no session a client can name.
    return s && s->set == set && !s->modern ? s : nullptr;
  }
  uint64_t next_call = 1;
  bool stopping = false;
  // 2026-07-28 requests in flight, waiting on a retry or listening: they
  // share the daemon's runtime session, so --max-gateway-sessions (which
  // bounds the runtime sessions clients open) does not count them.
  std::size_t modern_sessions = 0;
  static constexpr std::size_t max_modern_sessions = 4096;
  // 2026-07-28 requests waiting on a retry: requestState -> session.
  std::map<std::string, std::string> parked;
  // Under mtx: a 2026-07-28 session with nothing left in flight is gone.
  void drop_if_done(const session& s) {
    if (!s.modern || s.listen || !s.requests.empty()) return;
    if (!s.request_state.empty()) parked.erase(s.request_state);
    --modern_sessions;
    sessions.erase(s.id);
  }
  void ask_for_input(session& s);
  post_result listen_modern(const std::shared_ptr<session>& s, gateway_effects::listen_request l,
                            std::shared_ptr<gateway_channel> stream);
  post_result resume(const gateway_effects::input_retry& retry, std::shared_ptr<gateway_channel> reply,
                     const std::string& set);

  // Servers whose prompt and resource lists may have changed since they
  // were fetched (an update of their connection, a list_changed).
  std::mutex refresh_mtx;
  std::set<std::string> stale_lists; // guarded by refresh_mtx
  // The lists fetched per server, for the connection they came from: a
  // rebuild asks again only the servers that changed.
  struct fetched_lists {
    std::string connection; // connection id and generation
    std::vector<json> prompts, resources, resource_templates;
  };
  std::map<std::string, fetched_lists> lists_cache;
  // Takes the events and times the rebuilds (gateway_refresher).
  caf::actor subscriber;

  impl(runtime& r, caf::actor_system& s, gateway_options o) : rt(r), sys(s), opts(std::move(o)) {}

  std::shared_ptr<session> find(const std::string& id) const {
    auto it = sessions.find(id);
    return it == sessions.end() ? nullptr : it->second;
  }

  // Under mtx: a message not tied to a request.
  void send_unrelated(session& s, json msg) {
    if (s.modern) {
      // Only a listen stream takes them, and only what its filter names.
      if (!s.listen || !(s.stream && s.stream->open())) return;
      auto& l = *s.listen;
      const auto& m = msg.value("method", std::string{});
      bool wanted = (m == "notifications/tools/list_changed" && l.tools) ||
                    (m == "notifications/prompts/list_changed" && l.prompts) ||
                    (m == "notifications/resources/list_changed" && l.resources) ||
                    (m == "notifications/resources/updated" && msg.contains("params") &&
                     std::find(l.uris.begin(), l.uris.end(), msg["params"].value("uri", std::string{})) != l.uris.end());
      if (!wanted) return;
      if (!msg["params"].is_object()) msg["params"] = json::object();
      msg["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] = l.id;
      s.stream->send(msg, false);
      return;
    }
    if (s.stream && s.stream->open()) {
      s.stream->send(msg, false);
      return;
    }
    s.backlog.push_back(std::move(msg));
    while (s.backlog.size() > opts.backlog)
      s.backlog.pop_front();
  }

  // Under mtx: a message tied to request `key` when it is still open, else
  // the session's stream.
  void send_related(session& s, const std::string& key, json msg) {
    auto r = s.requests.find(key);
    if (r != s.requests.end() && r->second.reply && r->second.reply->open()) r->second.reply->send(msg, false);
    else send_unrelated(s, std::move(msg));
  }

  void finish(const std::string& sid, const std::string& key, json answer) {
    std::shared_ptr<gateway_channel> reply;
    {
      std::lock_guard<std::mutex> guard{mtx};
      auto s = find(sid);
      if (!s) return;
      auto r = s->requests.find(key);
      if (r == s->requests.end()) return;
      reply = std::move(r->second.reply);
      if (!r->second.call_id.empty()) calls.erase(r->second.call_id);
      if (!r->second.wire.empty()) wire_ended(r->second.wire, sid);
      s->requests.erase(r);
      if (s->modern) {
        // Inputs still asked for are of a call that needs them no more.
        for (auto& [id, out] : s->outbound)
          out.responder.fail(gateway_error::internal, "the call ended");
        s->outbound.clear();
        drop_if_done(*s);
      }
    }
    if (reply) reply->send(answer, true);
  }

  void dispatch(const std::shared_ptr<session>& s, const std::string& runtime_session, gateway_dispatch d);
  void stale_call(const std::string& sid, const std::string& key, const gateway_dispatch& d);
  void answered(session& s, std::uint64_t id, const json& msg);
  void close_session(const std::string& sid);
  /// Handles one event; true when the catalog must be rebuilt.
  bool on_event(const event& ev);
  /// Closes the sessions idle for longer than `idle_timeout`.
  void close_idle_sessions();
  void rebuild(std::function<void()> finished);
  void rebuild_views(const std::shared_ptr<gateway_rebuild>& b);
  void rebuild_lists(const std::shared_ptr<gateway_rebuild>& b);
  void rebuild_done(const std::shared_ptr<gateway_rebuild>& b);
  void rebuild_and_wait();
  /// Runs one step of a rebuild; a step that throws ends the rebuild (the
  /// catalog stays as it was), never the refresher.
  void rebuild_step(const std::shared_ptr<gateway_rebuild>& b,
                    void (impl::*step)(const std::shared_ptr<gateway_rebuild>&));
};

// -- requests upstream -------------------------------------------------------------------

void gateway::impl::dispatch(const std::shared_ptr<session>& s, const std::string& runtime_session,
                             gateway_dispatch d) {
  auto key = key_of(d.id);
  std::weak_ptr<impl> weak = shared_from_this();
  auto sid = s->id;
  if (d.method == "tools/call" && d.stale) {
    stale_call(sid, key, d);
    return;
  }
  call_options o;
  o.wait_connecting = opts.wait_connecting;
  // A tool call, and the other requests a 2026-07-28 server may answer
  // with input_required, get an id of ours: cancel, and the requests and
  // inputs the server sends during them, name the request and so the
  // session.
  if (d.method == "tools/call" || d.method == "prompts/get" || d.method == "resources/read") {
    std::lock_guard<std::mutex> guard{mtx};
    auto number = next_call++;
    o.call_id = "gw-" + sid.substr(0, 8) + "-" + std::to_string(number);
    auto r = s->requests.find(key);
    if (r != s->requests.end()) {
      r->second.call_id = o.call_id;
      r->second.call_number = number;
    }
    calls[o.call_id] = {sid, key};
  }
  if (d.method == "tools/call") {
    o.timeout = opts.call_timeout;
    if (d.progress_token) {
      auto token = *d.progress_token;
      o.progress = [weak, sid, key, token](const tool_call_progress& p) {
        auto self = weak.lock();
        if (!self) return;
        json params{{"progressToken", token}, {"progress", p.progress}};
        if (p.total) params["total"] = *p.total;
        if (!p.message.empty()) params["message"] = p.message;
        std::lock_guard<std::mutex> guard{self->mtx};
        if (auto s = self->find(sid))
          self->send_related(*s, key, gateway_session::notification("notifications/progress", std::move(params)));
      };
    }
    // Known before the call goes out: a log the server sends during it
    // finds its session however fast the call ends.
    o.on_wire = [this, sid, key, call_id = o.call_id](const std::string& wire) {
      std::lock_guard<std::mutex> guard{mtx};
      auto s = find(sid);
      if (!s) return;
      auto r = s->requests.find(key);
      if (r != s->requests.end() && r->second.call_id == call_id) {
        r->second.wire = wire;
        wires[wire] = {sid, key};
      }
    };
    auto id = d.id;
    rt.call_tool_async(
      runtime_session, d.server, d.name, std::move(d.params),
      [weak, sid, key, id](caf::expected<json> r) {
        auto self = weak.lock();
        if (!self) return;
        if (r) {
          self->finish(sid, key, gateway_session::result(id, std::move(*r)));
        } else if (is(r.error(), errc::cancelled)) {
          self->finish(sid, key, gateway_session::error(id, -32800, "Request cancelled"));
        } else {
          auto text = message_of(self->sys, r.error());
          if (auto u = unavailability_of(r.error()))
            text = "server is not available: " + u->reason + (u->remedy.empty() ? "" : " (" + u->remedy + ")");
          self->finish(sid, key, gateway_session::result(id, tool_error_result(text)));
        }
      },
      std::move(o));
    return;
  }
  // Subscriptions are the connection's, shared by sessions: counted here.
  if (d.method == "resources/subscribe" || d.method == "resources/unsubscribe") {
    auto uri = d.params.value("uri", std::string{});
    std::pair<std::string, std::string> sub{d.server, uri};
    bool upstream = true;
    {
      std::lock_guard<std::mutex> guard{mtx};
      auto& who = subscribers[sub];
      if (d.method == "resources/subscribe") {
        upstream = who.empty();
        who.insert(sid);
        s->subscriptions.insert(sub);
      } else {
        who.erase(sid);
        s->subscriptions.erase(sub);
        upstream = who.empty();
        if (who.empty()) subscribers.erase(sub);
      }
    }
    if (!upstream) {
      finish(sid, key, gateway_session::result(d.id, json::object()));
      return;
    }
  }
  auto id = d.id;
  auto method = d.method;
  rt.mcp_request_async(
    runtime_session, d.server, d.method, std::move(d.params),
    [weak, sid, key, id, method](caf::expected<json> r) {
      auto self = weak.lock();
      if (!self) return;
      if (r) {
        self->finish(sid, key, gateway_session::result(id, std::move(*r)));
        return;
      }
      int code = gateway_error::internal;
      if (is(r.error(), errc::not_advertised)) code = gateway_error::method_not_found;
      else if (is(r.error(), errc::bad_request)) code = gateway_error::invalid_params;
      auto text = message_of(self->sys, r.error());
      if (auto u = unavailability_of(r.error()))
        text = "server is not available: " + u->reason + (u->remedy.empty() ? "" : " (" + u->remedy + ")");
      self->finish(sid, key, gateway_session::error(id, code, escape_for_display(text)));
    },
    std::move(o));
}

void gateway::impl::stale_call(const std::string& sid, const std::string& key, const gateway_dispatch& d) {
  if (d.server.empty()) {
    finish(sid, key, gateway_session::error(d.id, gateway_error::invalid_params,
                                            "Unknown tool: " + escape_for_display(d.name.substr(0, 128))));
    return;
  }
  std::string text = "the tool '" + escape_for_display(d.name.substr(0, 128)) + "' of server '" + d.server
                     + "' is not available";
  std::weak_ptr<impl> weak = shared_from_this();
  rt.unavailable_reason_async(d.server, [weak, sid, key, id = d.id, text](caf::expected<unavailability> u) mutable {
    auto self = weak.lock();
    if (!self) return;
    if (u && !u->reason.empty()) {
      text += ": " + u->reason;
      if (!u->remedy.empty()) text += " — " + u->remedy;
    } else {
      text += ": the server does not list it now (connecting, restarting, or the tool is gone)";
    }
    self->finish(sid, key, gateway_session::result(id, tool_error_result(text)));
  });
}

// -- requests of servers for the client ---------------------------------------------------

bool gateway::forward(const server_request& req, const host_responder& responder) {
  auto& p = *impl_;
  std::unique_lock<std::mutex> guard{p.mtx};
  // The runtime names the call when it can tell (one call of that tool in
  // flight); otherwise the gateway's tool calls in flight on that server
  // tell it when they all belong to one session: the request goes out on
  // the stream of the oldest of them (a client takes a server's request on
  // any of its session's streams).
  std::optional<std::pair<std::string, std::string>> owner;
  if (req.call) {
    auto c = p.calls.find(req.call->call_id);
    if (c == p.calls.end()) return false;
    owner = c->second;
  } else {
    // Only when every call in flight to that server is a gateway call of
    // one session: a call from elsewhere (the HTTP API, another host
    // session) may have caused it, and then nobody gets it.
    //
    // A 2026-07-28 call whose input the gateway has asked for and not yet
    // had is waiting on that answer, not asking again: it is left out.
    auto waiting = [](const impl::session& x) { return x.modern && !x.outbound.empty() && !x.request_state.empty(); };
    std::string only;
    for (auto& id : req.in_flight_calls) {
      auto c = p.calls.find(id);
      if (c == p.calls.end()) return false;
      auto cs = p.find(c->second.first);
      if (cs && waiting(*cs)) continue;
      if (!only.empty() && only != c->second.first) return false;
      only = c->second.first;
    }
    std::uint64_t oldest = 0;
    for (auto& [sid, sess] : p.sessions)
      for (auto& [key, r] : sess->requests)
        if (!r.call_id.empty() && r.server == req.server && !waiting(*sess)) {
          if (owner && owner->first != sid) return false; // several sessions: whose it is cannot be told
          if (owner && r.call_number > oldest) continue;
          owner = std::make_pair(sid, key);
          oldest = r.call_number;
        }
    if (!owner) return false;
  }
  auto s = p.find(owner->first);
  if (!s) return false;
  auto& e = s->engine;
  bool sampling = req.method == "sampling/createMessage";
  bool roots = req.method == "roots/list";
  // A 2026-07-28 server's inputs of one round come one by one; its client
  // is asked for them together, once the last has come. Each exit below
  // settles this input (forwarded, or answered here) and counts it.
  auto settled = [&] {
    if (s->modern && req.input_round > 0) {
      if (++s->round_seen < req.input_round) return true;
      s->round_seen = 0;
    }
    p.ask_for_input(*s);
    return true;
  };
  if (roots && !e.client_can("roots")) {
    // The runtime answers with the workspace's roots.
    responder.fail(-32601, "the client of this request did not declare roots");
    return settled();
  }
  if (sampling && s->modern && !e.client_can("sampling") && !s->requests.empty()) {
    // 2026-07-28: the request needs a capability its client did not
    // declare; the client learns which, and the call upstream ends.
    auto& r = s->requests.begin()->second;
    if (auto reply = std::move(r.reply))
      reply->send_error(gateway_session::error(r.id, gateway_error::missing_capability,
                                               "the server asked this request's client for sampling, which it did "
                                               "not declare in io.modelcontextprotocol/clientCapabilities",
                                               json{{"requiredCapabilities", {{"sampling", json::object()}}}}),
                        400);
    auto call_id = r.call_id;
    s->round_seen = 0;
    responder.fail(-1, "the client of this call does not support sampling");
    guard.unlock(); // the runtime is not called into under the gateway's lock
    if (!call_id.empty()) p.rt.cancel_call(call_id);
    return true;
  }
  if (sampling && !e.client_can("sampling")) {
    responder.fail(-1, "the client of this call does not support sampling");
    return settled();
  }
  // The server's params: a mode that is not a string is the default.
  std::string mode = "form";
  if (req.params.is_object())
    if (auto m = req.params.find("mode"); m != req.params.end() && m->is_string()) mode = m->get<std::string>();
  if (!sampling && !roots) {
    if (!e.client_elicits(mode)) {
      responder.answer(json{{"action", "decline"}});
      return settled();
    }
  }
  json params = req.params;
  // A 2026 server's URL-mode input carries no elicitationId, which a 2025
  // client's URL mode requires: one of the gateway's, never completed (the
  // server's retry, not a notification, ends it).
  if (!s->modern && !sampling && !roots && mode == "url" && params.is_object() && !params.contains("elicitationId"))
    params["elicitationId"] = "mcprt-" + random_session_id();
  auto [id, msg] = e.request(req.method, std::move(params));
  if (s->modern) {
    // A 2026-07-28 client is not listening for requests: the call's
    // answer so far is an InputRequiredResult, and its retry brings this.
    e.forget_request(id);
    s->outbound.insert_or_assign(
      id, decltype(s->outbound)::mapped_type{responder, req.id, req.method, req.params, req.input_key, {}});
    return settled();
  }
  s->outbound.insert_or_assign(id, decltype(s->outbound)::mapped_type{responder, req.id, req.method, nullptr, {}, {}});
  p.send_related(*s, owner->second, std::move(msg));
  return true;
}

void gateway::withdraw(const std::string& request_id) {
  auto& p = *impl_;
  std::lock_guard<std::mutex> guard{p.mtx};
  for (auto& [sid, s] : p.sessions)
    for (auto it = s->outbound.begin(); it != s->outbound.end(); ++it)
      if (it->second.request_id == request_id) {
        auto id = it->first;
        s->outbound.erase(it);
        s->engine.forget_request(id);
        p.send_unrelated(*s, gateway_session::notification("notifications/cancelled",
                                                           {{"requestId", id}, {"reason", "withdrawn by the server"}}));
        return;
      }
}

// Under mtx: the inputs the session's request waits for, as its answer
// (an InputRequiredResult) when a client is waiting for one.
void gateway::impl::ask_for_input(session& s) {
  if (s.requests.empty() || s.outbound.empty()) return;
  auto& r = s.requests.begin()->second;
  if (!r.reply) return; // asked already: the retry brings the answers
  json requests = json::object();
  for (auto& [id, out] : s.outbound) {
    json q{{"method", out.method}};
    q["params"] = out.params.is_object() ? out.params : json::object();
    // A 2026-07-28 server's own name, which its client may know it by; a
    // 2025 server's request has none.
    out.asked_as = out.input_key;
    if (out.asked_as.empty() || requests.contains(out.asked_as)) out.asked_as = "input-" + std::to_string(id);
    requests[out.asked_as] = std::move(q);
  }
  // A fresh state each round: an old one cannot be replayed.
  if (!s.request_state.empty()) parked.erase(s.request_state);
  s.request_state = random_session_id() + random_session_id();
  parked[s.request_state] = s.id;
  s.last_active = clock_type::now();
  auto reply = std::move(r.reply);
  reply->send(gateway_session::result(r.id, json{{"resultType", "input_required"},
                                                 {"inputRequests", std::move(requests)},
                                                 {"requestState", s.request_state}}),
              true);
}

namespace {

// Whether `answer` has the shape of a result of the client's `method`: one
// that has not is asked for again.
bool answers_input(const std::string& method, const json& answer) {
  if (!answer.is_object()) return false;
  if (method == "elicitation/create") {
    auto a = answer.find("action");
    return a != answer.end() && (*a == "accept" || *a == "decline" || *a == "cancel");
  }
  if (method == "sampling/createMessage") return answer.contains("content") && answer.contains("role");
  if (method == "roots/list") return answer.contains("roots") && answer["roots"].is_array();
  return true;
}

} // namespace

gateway::post_result gateway::impl::resume(const gateway_effects::input_retry& retry,
                                           std::shared_ptr<gateway_channel> reply, const std::string& set) {
  auto refuse = [&](int code, const std::string& why) {
    post_result r;
    r.status = 400;
    r.answer = gateway_session::error(retry.id, code, why);
    return r;
  };
  std::lock_guard<std::mutex> guard{mtx};
  auto it = parked.find(retry.request_state);
  std::shared_ptr<session> s = it == parked.end() ? nullptr : find(it->second);
  if (!s || s->set != set || s->requests.empty() || s->requests.begin()->second.reply)
    return refuse(gateway_error::invalid_params,
                  "requestState is not one this gateway gave out, or its request has ended or was retried "
                  "already (each is good for one retry)");
  auto& r = s->requests.begin()->second;
  if (r.method != retry.method || r.name != retry.name)
    return refuse(gateway_error::invalid_params,
                  "this requestState belongs to another request: retry the same method and name");
  parked.erase(it);
  s->request_state.clear();
  for (auto o = s->outbound.begin(); o != s->outbound.end();) {
    auto a = retry.input_responses.find(o->second.asked_as);
    if (a != retry.input_responses.end() && answers_input(o->second.method, *a)) {
      o->second.responder.answer(*a);
      o = s->outbound.erase(o);
    } else {
      ++o;
    }
  }
  r.reply = std::make_shared<modern_reply>(std::move(reply), retry.id, retry.method);
  s->last_active = clock_type::now();
  ask_for_input(*s); // what is still missing, at once
  return {};
}

gateway::post_result gateway::impl::listen_modern(const std::shared_ptr<session>& s,
                                                  gateway_effects::listen_request l,
                                                  std::shared_ptr<gateway_channel> stream) {
  std::vector<std::pair<std::string, std::string>> subscribe; // upstream, first of their kind
  json agreed = json::object();
  {
    std::lock_guard<std::mutex> guard{mtx};
    if (modern_sessions >= max_modern_sessions) return {503, "", "too many 2026-07-28 requests in flight"};
    auto& c = catalog_of(*s);
    std::vector<std::string> uris;
    auto servers = c.servers_with("resources.subscribe");
    for (auto& uri : l.uris) {
      // Only resources a server of the catalog serves and lets subscribe.
      auto server = c.resource_server(uri);
      if (!server) continue;
      if (std::find(servers.begin(), servers.end(), *server) == servers.end()) continue;
      std::pair<std::string, std::string> sub{*server, uri};
      auto& who = subscribers[sub];
      if (who.empty()) subscribe.push_back(sub);
      who.insert(s->id);
      s->subscriptions.insert(sub);
      uris.push_back(uri);
    }
    l.uris = std::move(uris);
    if (l.tools) agreed["toolsListChanged"] = true;
    if (l.prompts) agreed["promptsListChanged"] = true;
    if (l.resources) agreed["resourcesListChanged"] = true;
    if (!l.uris.empty()) agreed["resourceSubscriptions"] = l.uris;
    s->stream = std::make_shared<modern_reply>(stream, l.id, "subscriptions/listen");
    s->listen = std::move(l);
    sessions[s->id] = s;
    ++modern_sessions;
    // First on the stream, before anything the filter lets through.
    s->stream->send(gateway_session::notification(
                      "notifications/subscriptions/acknowledged",
                      json{{"_meta", {{"io.modelcontextprotocol/subscriptionId", s->listen->id}}},
                           {"notifications", agreed}}),
                    false);
  }
  for (auto& [server, uri] : subscribe)
    rt.mcp_request_async(s->runtime_session, server, "resources/subscribe", json{{"uri", uri}},
                         [](caf::expected<json>) {});
  return {};
}

// Under mtx.
void gateway::impl::answered(session& s, std::uint64_t id, const json& msg) {
  auto it = s.outbound.find(id);
  if (it == s.outbound.end()) return;
  auto out = std::move(it->second);
  s.outbound.erase(it);
  auto result = msg.find("result");
  if (result != msg.end() && result->is_object()) {
    // Roots that are not a list are no answer: the workspace's stand.
    if (out.method == "roots/list" && !answers_input(out.method, *result))
      out.responder.fail(gateway_error::invalid_params, "not a ListRootsResult");
    else out.responder.answer(*result);
    return;
  }
  auto err = msg.find("error");
  int code = gateway_error::internal;
  std::string text = "the client answered with an error";
  if (err != msg.end() && err->is_object()) {
    if (err->contains("code") && (*err)["code"].is_number_integer()) code = (*err)["code"].get<int>();
    if (err->contains("message") && (*err)["message"].is_string())
      text = replace_invalid_utf8((*err)["message"].get<std::string>().substr(0, 1024));
  }
  out.responder.fail(code, text);
}

// -- sessions ------------------------------------------------------------------------------

gateway::gateway(runtime& rt, caf::actor_system& sys, gateway_options opts)
  : impl_(std::make_shared<impl>(rt, sys, std::move(opts))) {}

gateway::~gateway() {
  stop();
}

gateway::post_result gateway::post(const std::string& sid, json msg, std::shared_ptr<gateway_channel> reply,
                                   const std::string& set) {
  auto& p = *impl_;
  bool is_request = msg.is_object() && msg.contains("method") && msg.contains("id");
  if (sid.empty()) {
    if (!is_request || msg["method"] != "initialize")
      return {400, "", "no Mcp-Session-Id: the first request of a session must be initialize"};
    auto s = std::make_shared<impl::session>(gateway_session::options{"mcprt", p.opts.version, {}});
    s->id = random_session_id();
    s->set = set;
    {
      std::lock_guard<std::mutex> guard{p.mtx};
      if (p.stopping) return {503, "", "the gateway is stopping"};
      if (!set.empty() && !p.tool_sets.count(set))
        return {404, "",
                "no tool set '" + escape_for_display(set.substr(0, 64))
                  + "' in the settings (mcp.toolSets; mcprt status --json lists gateway.sets)"};
      if (p.sessions.size() >= p.opts.max_sessions) return {503, "", "too many open sessions"};
      p.sessions[s->id] = s;
    }
    std::weak_ptr<impl> weak = impl_;
    auto id = s->id;
    // The runtime's session comes through a callback: nothing here waits
    // for it (a remote runtime asks its node).
    p.rt.open_session_async({}, [weak, id, msg = std::move(msg), reply](std::string rs) {
      auto self = weak.lock();
      if (!self) return;
      gateway_effects fx;
      {
        std::lock_guard<std::mutex> guard{self->mtx};
        auto s = self->find(id);
        if (!s) { // closed while it opened
          if (!rs.empty()) self->rt.close_session_async(rs, [] {});
          return;
        }
        s->runtime_session = rs;
        fx = s->engine.on_message(msg, self->catalog_of(*s));
      }
      for (auto& m : fx.send)
        reply->send(m, true);
      spdlog::info("gateway: session {} opened", id.substr(0, 8));
    });
    return {200, s->id, ""};
  }
  std::shared_ptr<impl::session> s;
  gateway_effects fx;
  std::string runtime_session;
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    s = p.find_in(sid, set);
    if (!s) return {404, "", "no such session (it ended, or the daemon restarted): initialize again"};
    s->last_active = clock_type::now();
    s->last_active_wall = std::chrono::system_clock::now();
    fx = s->engine.on_message(msg, p.catalog_of(*s));
    runtime_session = s->runtime_session;
    // An id already in flight in this session would cross the two
    // answers: the second request is refused, the first goes on.
    std::vector<gateway_dispatch> admitted;
    for (auto& d : fx.dispatch) {
      auto key = key_of(d.id);
      if (s->requests.count(key)) {
        fx.send.push_back(gateway_session::error(
          d.id, gateway_error::invalid_request, "a request with this id is still in flight in this session"));
        continue;
      }
      impl::pending_request pr;
      pr.reply = reply;
      pr.server = d.server;
      pr.method = d.method;
      s->requests[key] = std::move(pr);
      admitted.push_back(std::move(d));
    }
    fx.dispatch = std::move(admitted);
    for (auto& [id, m] : fx.answers)
      p.answered(*s, id, m);
    // Clients' roots are not asked for: the pool's connections are shared,
    // so one client's roots would become what every client's servers may
    // reach. Servers get the roots of the owner's settings.
  }
  for (auto& m : fx.send)
    if (reply) reply->send(m, true);
  for (auto& d : fx.dispatch)
    p.dispatch(s, runtime_session, std::move(d));
  for (auto& id : fx.cancelled) {
    std::string call_id;
    {
      std::lock_guard<std::mutex> guard{p.mtx};
      auto r = s->requests.find(key_of(id));
      if (r != s->requests.end()) call_id = r->second.call_id;
    }
    if (!call_id.empty()) p.rt.cancel_call(call_id);
  }
  if (fx.log_level) {
    // Every server that logs, at the most verbose level any session asked for.
    auto level = *fx.log_level;
    std::vector<std::string> servers;
    {
      std::lock_guard<std::mutex> guard{p.mtx};
      for (auto& [id, other] : p.sessions)
        if (auto l = other->engine.log_level(); l && level_rank(*l) < level_rank(level)) level = *l;
      servers = p.catalog->servers_with("logging");
    }
    for (auto& server : servers)
      p.rt.mcp_request_async(runtime_session, server, "logging/setLevel", json{{"level", level}},
                             [](caf::expected<json>) {});
  }
  return {is_request ? 200 : 202, "", ""};
}

gateway::post_result gateway::post_modern(json msg, const modern_headers& headers,
                                          std::shared_ptr<gateway_channel> reply, const std::string& set) {
  auto& p = *impl_;
  auto s = std::make_shared<impl::session>(gateway_session::options{"mcprt", p.opts.version, {}});
  s->id = "m" + random_session_id();
  s->set = set;
  s->modern = true;
  // Stateless requests share the daemon's own runtime session: there is
  // no client session for one of their own to follow.
  s->runtime_session = p.opts.catalog_session;
  gateway_effects fx;
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    if (p.stopping) return {503, "", "the gateway is stopping", std::nullopt};
    if (!set.empty() && !p.tool_sets.count(set))
      return {404, "",
              "no tool set '" + escape_for_display(set.substr(0, 64))
                + "' in the settings (mcp.toolSets; mcprt status --json lists gateway.sets)",
              std::nullopt};
    fx = s->engine.on_modern_message(msg, headers, p.catalog_of(*s));
  }
  if (fx.retry) return p.resume(*fx.retry, std::move(reply), set);
  if (fx.listen && reply) return p.listen_modern(s, std::move(*fx.listen), std::move(reply));
  if (fx.dispatch.empty() || !reply) {
    post_result r;
    r.status = fx.status;
    if (!fx.send.empty()) r.answer = std::move(fx.send.front());
    return r;
  }
  auto d = std::move(fx.dispatch.front());
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    if (p.modern_sessions >= impl::max_modern_sessions)
      return {503, "", "too many 2026-07-28 requests in flight", std::nullopt};
    impl::pending_request pr;
    pr.reply = std::make_shared<modern_reply>(reply, d.id, d.method);
    pr.server = d.server;
    pr.method = d.method;
    pr.id = d.id;
    auto& params = msg["params"];
    auto name = params.find(d.method == "resources/read" ? "uri" : "name");
    if (name != params.end() && name->is_string()) pr.name = name->get<std::string>();
    s->requests[key_of(d.id)] = std::move(pr);
    p.sessions[s->id] = s;
    ++p.modern_sessions;
  }
  p.dispatch(s, s->runtime_session, std::move(d));
  return {};
}

bool gateway::listen(const std::string& sid, std::shared_ptr<gateway_channel> stream, const std::string& set) {
  auto& p = *impl_;
  std::shared_ptr<gateway_channel> previous;
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    auto s = p.find_in(sid, set);
    if (!s) return false;
    previous = std::exchange(s->stream, stream);
    s->last_active = clock_type::now();
    while (!s->backlog.empty()) {
      stream->send(s->backlog.front(), false);
      s->backlog.pop_front();
    }
  }
  if (previous) previous->close();
  return true;
}

void gateway::impl::close_session(const std::string& sid) {
  std::shared_ptr<session> s;
  std::vector<std::string> cancels;
  std::vector<std::pair<std::string, std::string>> unsubscribe;
  {
    std::lock_guard<std::mutex> guard{mtx};
    auto it = sessions.find(sid);
    if (it == sessions.end()) return;
    s = it->second;
    sessions.erase(it);
    if (s->modern) --modern_sessions;
    if (!s->request_state.empty()) parked.erase(s->request_state);
    for (auto& [key, r] : s->requests) {
      if (!r.call_id.empty()) {
        cancels.push_back(r.call_id);
        calls.erase(r.call_id);
      }
      if (!r.wire.empty()) wires.erase(r.wire);
    }
    for (auto& sub : s->subscriptions) {
      auto w = subscribers.find(sub);
      if (w == subscribers.end()) continue;
      w->second.erase(sid);
      if (w->second.empty()) {
        subscribers.erase(w);
        unsubscribe.push_back(sub);
      }
    }
    for (auto& [id, out] : s->outbound)
      out.responder.fail(gateway_error::internal, "the client's session ended");
    s->outbound.clear();
  }
  for (auto& c : cancels)
    rt.cancel_call(c);
  for (auto& [key, r] : s->requests)
    if (r.reply) r.reply->close();
  if (s->listen && s->stream && s->stream->open()) {
    // A listen stream the gateway ends gets its request's answer first.
    s->stream->send(gateway_session::result(
                      s->listen->id,
                      json{{"resultType", "complete"},
                           {"_meta", {{"io.modelcontextprotocol/subscriptionId", s->listen->id}}}}),
                    true);
  }
  if (s->stream) s->stream->close();
  auto rs = s->runtime_session;
  for (auto& [server, uri] : unsubscribe)
    if (!rs.empty()) rt.mcp_request_async(rs, server, "resources/unsubscribe", json{{"uri", uri}}, [](caf::expected<json>) {});
  if (s->modern) return; // its runtime session is the daemon's
  if (!rs.empty()) rt.close_session_async(rs, [] {});
  spdlog::info("gateway: session {} closed", sid.substr(0, 8));
}

bool gateway::close(const std::string& sid, const std::string& set) {
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    if (!impl_->find_in(sid, set)) return false;
  }
  impl_->close_session(sid);
  return true;
}

bool gateway::has_session(const std::string& sid) const {
  std::lock_guard<std::mutex> guard{impl_->mtx};
  return impl_->find(sid) != nullptr;
}

std::string gateway::protocol(const std::string& sid) const {
  std::lock_guard<std::mutex> guard{impl_->mtx};
  auto s = impl_->find(sid);
  return s ? s->engine.protocol() : std::string{};
}

// -- events and the catalog -------------------------------------------------------------

bool gateway::impl::on_event(const event& ev) {
  switch (ev.kind) {
    case event_kind::client_update:
    case event_kind::resource_list_changed: {
      std::lock_guard<std::mutex> guard{refresh_mtx};
      if (auto* u = std::get_if<events::client_update>(&ev.payload)) stale_lists.insert(u->server);
      if (auto* r = std::get_if<events::resource_list_changed>(&ev.payload)) stale_lists.insert(r->server);
      return true;
    }
    case event_kind::reconcile_finished:
    case event_kind::pending_approval_changed:
    case event_kind::settings_changed: // tool sets live in the settings
      return true;
    case event_kind::resource_updated: {
      auto& u = std::get<events::resource_updated>(ev.payload);
      std::lock_guard<std::mutex> guard{mtx};
      auto w = subscribers.find({u.server, u.uri});
      if (w == subscribers.end()) return false;
      for (auto& sid : w->second)
        if (auto s = find(sid))
          send_unrelated(*s, gateway_session::notification("notifications/resources/updated", {{"uri", u.uri}}));
      return false;
    }
    case event_kind::server_log: {
      auto& l = std::get<events::server_log>(ev.payload);
      json params{{"level", l.level}, {"data", l.data.value}};
      params["logger"] = l.logger.empty() ? l.server : l.logger;
      auto note = gateway_session::notification("notifications/message", params);
      std::lock_guard<std::mutex> guard{mtx};
      // A log goes to the one session whose calls were all that was in
      // flight on the server when it logged; when that cannot be told (no
      // call, calls of several sessions, a call from outside the gateway)
      // it goes to nobody, so one client never reads what another's call
      // made a server say.
      std::shared_ptr<session> owner;
      std::string related;
      for (auto& wire : l.call_ids) {
        auto c = wires.find(wire);
        auto s = find(c != wires.end() ? c->second.first : session_of_ended_wire(wire));
        if (!s || (owner && owner != s)) return false;
        if (!owner && c != wires.end()) related = c->second.second;
        owner = s;
      }
      if (!owner) return false;
      auto want = owner->engine.log_level();
      if (want && level_rank(l.level) < level_rank(*want)) return false;
      if (owner->modern && !want) return false; // 2026-07-28: only when its _meta asks
      send_related(*owner, related, note);
      return false;
    }
    default: return false;
  }
}

/// One rebuild of the catalog in flight. Its answers come on the runtime's
/// threads, at once for every server: a slow server costs the rebuild its
/// own time, not the sum, and no thread waits for any of them.
struct gateway_rebuild {
  std::mutex mtx;
  int pending = 0;
  std::set<std::string> stale;
  std::optional<gating_snapshot> gating;
  std::optional<session_snapshot> state;
  std::vector<gateway_server_view> views;
  std::vector<std::optional<connection_info>> infos; // by view
  struct fetch {
    std::size_t view;
    std::string connection;
    gateway::impl::fetched_lists lists;
    bool complete = true; // every list answered: worth keeping
  };
  std::vector<fetch> fetches;
  std::set<std::string> present;
  std::function<void()> finished;

  /// Counts `n` answers to come, plus one held while they are asked for:
  /// `arrive()` after each, `arrive()` once more when all were asked.
  void expect(int n) {
    std::lock_guard<std::mutex> guard{mtx};
    pending = n + 1;
  }
  bool arrive() {
    std::lock_guard<std::mutex> guard{mtx};
    return --pending == 0;
  }
};

void gateway::impl::rebuild(std::function<void()> finished) {
  auto b = std::make_shared<gateway_rebuild>();
  {
    std::lock_guard<std::mutex> guard{refresh_mtx};
    b->stale.swap(stale_lists);
  }
  b->finished = std::move(finished);
  auto self = shared_from_this();
  b->expect(2);
  auto arrived = [self, b] {
    if (b->arrive()) self->rebuild_step(b, &impl::rebuild_views);
  };
  rt.gating_state_async([b, arrived](caf::expected<gating_snapshot> g) {
    if (g) {
      std::lock_guard<std::mutex> guard{b->mtx};
      b->gating = std::move(*g);
    }
    arrived();
  });
  rt.session_state_async(opts.catalog_session, [b, arrived](caf::expected<session_snapshot> st) {
    if (st) {
      std::lock_guard<std::mutex> guard{b->mtx};
      b->state = std::move(*st);
    }
    arrived();
  });
  arrived();
}

void gateway::impl::rebuild_views(const std::shared_ptr<gateway_rebuild>& b) {
  std::map<std::string, connection_status> live;
  if (b->state)
    for (auto& s : b->state->servers)
      live[s.name] = s.status;
  std::vector<std::size_t> ask;
  if (b->gating)
    for (auto& g : b->gating->servers) {
      gateway_server_view v;
      v.name = g.name;
      v.prefix = g.prefix;
      v.project = g.scope == "project";
      auto l = live.find(g.name);
      if (g.admitted && l != live.end() && l->second == connection_status::connected) ask.push_back(b->views.size());
      b->views.push_back(std::move(v));
    }
  b->infos.resize(b->views.size());
  b->expect(static_cast<int>(ask.size()));
  auto self = shared_from_this();
  auto arrived = [self, b] {
    if (b->arrive()) self->rebuild_step(b, &impl::rebuild_lists);
  };
  for (auto i : ask)
    rt.server_info_async(opts.catalog_session, b->views[i].name, [b, i, arrived](caf::expected<connection_info> info) {
      if (info) {
        std::lock_guard<std::mutex> guard{b->mtx};
        b->infos[i] = std::move(*info);
      }
      arrived();
    });
  arrived();
}

void gateway::impl::rebuild_lists(const std::shared_ptr<gateway_rebuild>& b) {
  for (std::size_t i = 0; i < b->views.size(); ++i) {
    auto& info = b->infos[i];
    if (!info) continue;
    auto& v = b->views[i];
    v.available = true;
    v.capabilities = info->capabilities.value.is_object() ? info->capabilities.value : json::object();
    for (auto& t : info->tools) {
      if (t.raw.value.is_object() && !t.raw.value.empty()) {
        v.tools.push_back(t.raw.value);
      } else {
        json tool{{"name", t.name}, {"inputSchema", t.input_schema.value}};
        if (!t.description.empty()) tool["description"] = t.description;
        v.tools.push_back(std::move(tool));
      }
    }
    v.held_tools = info->held_tools;
    b->present.insert(v.name);
    auto connection = info->connection_id + "#" + std::to_string(info->generation);
    auto cached = lists_cache.find(v.name);
    if (cached != lists_cache.end() && cached->second.connection == connection && !b->stale.count(v.name)) {
      v.prompts = cached->second.prompts;
      v.resources = cached->second.resources;
      v.resource_templates = cached->second.resource_templates;
    } else {
      b->fetches.push_back({i, std::move(connection), {}, true});
    }
  }
  // The lists of every changed server are asked for at once.
  struct list_request {
    std::size_t fetch;
    const char* method;
    const char* key;
    std::vector<json> fetched_lists::*out;
  };
  std::vector<list_request> requests;
  for (std::size_t k = 0; k < b->fetches.size(); ++k) {
    auto& caps = b->views[b->fetches[k].view].capabilities;
    if (caps.contains("prompts")) requests.push_back({k, "prompts/list", "prompts", &fetched_lists::prompts});
    if (caps.contains("resources")) {
      requests.push_back({k, "resources/list", "resources", &fetched_lists::resources});
      requests.push_back({k, "resources/templates/list", "resourceTemplates", &fetched_lists::resource_templates});
    }
  }
  b->expect(static_cast<int>(requests.size()));
  auto self = shared_from_this();
  auto arrived = [self, b] {
    if (b->arrive()) self->rebuild_step(b, &impl::rebuild_done);
  };
  call_options o;
  o.timeout = std::chrono::seconds(10);
  for (auto& r : requests)
    rt.mcp_request_async(
      opts.catalog_session, b->views[b->fetches[r.fetch].view].name, r.method, json::object(),
      [b, r, arrived](caf::expected<json> answer) {
        {
          std::lock_guard<std::mutex> guard{b->mtx};
          auto& f = b->fetches[r.fetch];
          if (!answer || !answer->is_object() || !answer->contains(r.key) || !(*answer)[r.key].is_array()) {
            f.complete = false;
          } else {
            for (auto& x : (*answer)[r.key])
              (f.lists.*(r.out)).push_back(x);
          }
        }
        arrived();
      },
      o);
  arrived();
}

void gateway::impl::rebuild_done(const std::shared_ptr<gateway_rebuild>& b) {
  auto& views = b->views;
  for (auto& f : b->fetches) {
    auto& v = views[f.view];
    v.prompts = f.lists.prompts;
    v.resources = f.lists.resources;
    v.resource_templates = f.lists.resource_templates;
    // An unanswered list is asked again at the next rebuild.
    if (f.complete) {
      f.lists.connection = f.connection;
      lists_cache[v.name] = std::move(f.lists);
    } else {
      lists_cache.erase(v.name);
    }
  }
  for (auto it = lists_cache.begin(); it != lists_cache.end();)
    it = b->present.count(it->first) ? std::next(it) : lists_cache.erase(it);
  // Without a gating answer the sets stay as they were.
  std::map<std::string, tool_set> sets;
  bool sets_known = b->gating.has_value();
  if (sets_known)
    for (auto& set : b->gating->tool_sets)
      sets.emplace(set.name, set);
  std::map<std::string, std::shared_ptr<const gateway_catalog>> next_sets;
  {
    std::lock_guard<std::mutex> guard{mtx};
    if (!sets_known) sets = tool_sets;
  }
  for (auto& [name, set] : sets)
    next_sets[name] = std::make_shared<gateway_catalog>(gateway_catalog::build(views, {}, &set));
  auto next = std::make_shared<gateway_catalog>(gateway_catalog::build(std::move(views)));
  {
    std::lock_guard<std::mutex> guard{mtx};
    std::map<std::string, gateway_list_changes> changes;
    changes[""] = gateway_catalog::diff(*catalog, *next);
    for (auto& [name, c] : next_sets) {
      auto before = set_catalogs.find(name);
      changes[name] = gateway_catalog::diff(before == set_catalogs.end() ? *empty_catalog : *before->second, *c);
    }
    for (auto& [name, c] : set_catalogs)
      if (!next_sets.count(name)) changes[name] = gateway_catalog::diff(*c, *empty_catalog);
    catalog = std::move(next);
    set_catalogs = std::move(next_sets);
    tool_sets = std::move(sets);
    for (auto& [sid, s] : sessions) {
      auto ch = changes.find(s->set);
      if (!s->engine.initialized() || ch == changes.end() || !ch->second.any()) continue;
      if (ch->second.tools) send_unrelated(*s, gateway_session::notification("notifications/tools/list_changed"));
      if (ch->second.prompts)
        send_unrelated(*s, gateway_session::notification("notifications/prompts/list_changed"));
      if (ch->second.resources)
        send_unrelated(*s, gateway_session::notification("notifications/resources/list_changed"));
    }
  }
  if (auto f = std::exchange(b->finished, nullptr)) f();
}

/// Rebuilds the catalog and waits for it (a test's thread, through
/// refresh()): its requests go out at once and answer on the runtime's threads.
void gateway::impl::rebuild_and_wait() {
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  before_blocking_wait();
  rebuild([done] { done->set_value(); });
  finished.wait();
}

void gateway::impl::rebuild_step(const std::shared_ptr<gateway_rebuild>& b,
                                 void (impl::*step)(const std::shared_ptr<gateway_rebuild>&)) {
  try {
    (this->*step)(b);
  } catch (const std::exception& e) {
    spdlog::error("gateway: cannot rebuild the catalog: {}", escape_for_display(e.what()));
    if (auto f = std::exchange(b->finished, nullptr)) f();
  }
}

void gateway::impl::close_idle_sessions() {
  std::vector<std::string> idle;
  {
    std::lock_guard<std::mutex> guard{mtx};
    auto now = clock_type::now();
    for (auto& [sid, s] : sessions)
      if (s->modern && s->listen ? !(s->stream && s->stream->open())
          : s->modern            ? !s->request_state.empty() && now - s->last_active >= opts.input_wait
                    : s->requests.empty() && !(s->stream && s->stream->open())
                        && now - s->last_active >= opts.idle_timeout)
        idle.push_back(sid);
  }
  for (auto& sid : idle) {
    spdlog::info("gateway: session {} idle for {} s: closed", sid.substr(0, 8),
                 std::chrono::duration_cast<std::chrono::seconds>(opts.idle_timeout).count());
    close_session(sid);
  }
}

namespace {

/// How often sessions are looked at for idleness.
constexpr auto idle_sweep_interval = std::chrono::seconds(30);

struct gateway_refresher_state {
  static inline const char* name = "mcprt.gateway_refresher";
  bool dirty = true; // the first catalog is built at start
  bool scheduled = false;
  bool rebuilding = false;
};

/// The gateway's events arrive here, and its rebuilds are timed here, on
/// actor timers: a burst of changes (a reconcile pass, then each
/// connection's update) waits out `coalesce` and gets one rebuild; one
/// rebuild at a time, and one more after it when something changed
/// meanwhile; the idle sweep every 30 s. No thread waits for any of it.
caf::behavior gateway_refresher(caf::stateful_actor<gateway_refresher_state>* self,
                                std::weak_ptr<gateway::impl> gw, caf::timespan coalesce) {
  auto schedule = [self, coalesce] {
    auto& st = self->state;
    if (!st.dirty || st.scheduled || st.rebuilding) return;
    st.scheduled = true;
    self->delayed_send(self, coalesce, atom::rebuild_due_v);
  };
  schedule();
  self->delayed_send(self, idle_sweep_interval, atom::idle_sweep_v);
  return {
    [self, gw, schedule](const event& ev) {
      auto g = gw.lock();
      if (!g) return;
      try {
        if (g->on_event(ev)) {
          self->state.dirty = true;
          schedule();
        }
      } catch (const std::exception& e) {
        spdlog::error("gateway: an event was not handled: {}", escape_for_display(e.what()));
      }
    },
    [self, gw](atom::rebuild_due) {
      auto& st = self->state;
      st.scheduled = false;
      auto g = gw.lock();
      if (!g) {
        self->quit(); // the gateway is gone
        return;
      }
      if (!st.dirty) return;
      st.dirty = false;
      st.rebuilding = true;
      auto me = caf::actor_cast<caf::actor>(self);
      try {
        g->rebuild([me] { caf::anon_send(me, atom::rebuilt_v); });
      } catch (const std::exception& e) {
        spdlog::error("gateway: cannot rebuild the catalog: {}", escape_for_display(e.what()));
        st.rebuilding = false;
      }
    },
    [self, schedule](atom::rebuilt) {
      self->state.rebuilding = false;
      schedule();
    },
    [self, gw](atom::idle_sweep) {
      auto g = gw.lock();
      if (!g) {
        self->quit(); // the gateway is gone
        return;
      }
      g->close_idle_sessions();
      self->delayed_send(self, idle_sweep_interval, atom::idle_sweep_v);
    },
  };
}

} // namespace

void gateway::refresh() {
  impl_->rebuild_and_wait();
}

bool gateway::start() {
  auto& p = *impl_;
  std::weak_ptr<impl> weak = impl_;
  p.subscriber = p.sys.spawn(gateway_refresher, weak, caf::timespan{p.opts.coalesce});
  auto sink = caf::actor_cast<event_subscriber_actor>(p.subscriber);
  auto subscribed = p.rt.subscribe(sink, {event_kind::reconcile_finished, event_kind::client_update,
                                          event_kind::resource_list_changed, event_kind::pending_approval_changed,
                                          event_kind::resource_updated, event_kind::server_log,
                                          event_kind::settings_changed});
  return static_cast<bool>(subscribed);
}

void gateway::stop() {
  auto& p = *impl_;
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    if (p.stopping) return;
    p.stopping = true;
    for (auto& [sid, s] : p.sessions)
      ids.push_back(sid);
  }
  for (auto& sid : ids)
    p.close_session(sid);
  if (p.subscriber) {
    p.rt.unsubscribe(caf::actor_cast<event_subscriber_actor>(p.subscriber));
    caf::anon_send_exit(p.subscriber, caf::exit_reason::user_shutdown);
  }
}

json gateway::snapshot() const {
  auto& p = *impl_;
  auto epoch_ms = [](std::chrono::system_clock::time_point t) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
    return ms;
  };
  std::lock_guard<std::mutex> guard{p.mtx};
  json sessions = json::array();
  for (auto& [sid, s] : p.sessions)
    sessions.push_back({{"id", sid.substr(0, 8)},
                        {"set", s->set},
                        {"client", {{"name", s->engine.client_name()}, {"version", s->engine.client_version()}}},
                        {"protocol", s->engine.protocol()},
                        {"opened_ms", epoch_ms(s->opened)},
                        {"last_active_ms", epoch_ms(s->last_active_wall)},
                        {"in_flight", s->requests.size()},
                        {"stream", s->stream && s->stream->open()}});
  auto left_of = [](const gateway_catalog& c, std::size_t max) {
    json left = json::array();
    for (auto& l : c.left_out()) {
      if (left.size() == max) break;
      json e{{"server", l.server}, {"kind", l.kind}, {"name", l.name}, {"exposed", l.exposed}, {"reason", l.reason},
             {"kept_by", l.kept_by}};
      if (!l.rule.empty()) e["rule"] = l.rule;
      left.push_back(std::move(e));
    }
    return left;
  };
  auto renamed_of = [](const gateway_catalog& c) {
    json out = json::array();
    for (auto& r : c.renamed())
      out.push_back({{"server", r.server}, {"name", r.name}, {"full", r.full}, {"exposed", r.exposed}});
    return out;
  };
  auto count = [](const json& j, const char* key) { return j.contains(key) ? j[key].size() : 0; };
  auto counts_of = [&](const gateway_catalog& c) {
    return json{{"tools", count(c.tools_list(), "tools")},
                {"prompts", count(c.prompts_list(), "prompts")},
                {"resources", count(c.resources_list(), "resources")},
                {"resource_templates", count(c.resource_templates_list(), "resourceTemplates")}};
  };
  // A set is for a client to read whole: its tools by name, and what it
  // leaves out, bounded as the catalog is.
  constexpr std::size_t max_listed = 1000;
  json sets = json::array();
  for (auto& [name, set] : p.tool_sets) {
    auto c = p.set_catalogs.find(name);
    const gateway_catalog& cat = c == p.set_catalogs.end() ? *p.empty_catalog : *c->second;
    json tools = json::array();
    auto listed = cat.tools_list();
    for (auto& t : listed["tools"]) {
      if (tools.size() == max_listed) break;
      tools.push_back(t["name"]);
    }
    std::size_t open_sessions = 0;
    for (auto& [sid, s] : p.sessions)
      open_sessions += s->set == name;
    sets.push_back({{"name", name},
                    {"description", set.description},
                    {"path", "/mcp/" + name},
                    {"source", set.source},
                    {"scope", set.scope},
                    {"servers", set.servers},
                    {"tools_patterns", set.tools},
                    {"exclude", set.exclude},
                    {"catalog", counts_of(cat)},
                    {"tools", std::move(tools)},
                    {"left_out", left_of(cat, max_listed)},
                    {"sessions", open_sessions}});
  }
  return json{{"sessions", sessions},
              {"left_out", left_of(*p.catalog, std::numeric_limits<std::size_t>::max())},
              {"renamed", renamed_of(*p.catalog)},
              {"catalog", counts_of(*p.catalog)},
              {"sets", std::move(sets)}};
}

} // namespace mcprt
