#include "cli/http_api.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "cli/event_stream.hpp"
#include "cli/host_requests.hpp"
#include "cli/mcp_http.hpp"
#include "core/http_rules.hpp"
#include "core/untrusted_text.hpp"
#include "mcprt/gateway.hpp"
#include "mcprt/runtime.hpp"
#include "messages/unavailable_error.hpp"

namespace mcprt::cli {

using nlohmann::json;
using clock_type = std::chrono::steady_clock;

json redact(json j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if ((it.key() == "env" || it.key() == "headers") && it.value().is_object()) {
        for (auto& v : it.value())
          v = "<redacted>";
      } else if (it.key() == "proxy" && it.value().is_string()
                 && it.value().get<std::string>().find('@') != std::string::npos) {
        // A proxy URL's user info is a credential.
        it.value() = "<redacted>";
      } else {
        it.value() = redact(std::move(it.value()));
      }
    }
  } else if (j.is_array()) {
    for (auto& v : j)
      v = redact(std::move(v));
  }
  return j;
}

namespace {

// -- responses ---------------------------------------------------------------------------

http_response json_response(int status, const json& body) {
  http_response r;
  r.status = status;
  r.body = dump_json(body) + "\n";
  return r;
}

http_response error_response(int status, const std::string& code, const std::string& message,
                             const json& extra = json::object()) {
  json body{{"error", code}, {"message", message}};
  for (auto& [k, v] : extra.items())
    body[k] = v;
  return json_response(status, body);
}

http_response refusal_response(const http::refusal& r) {
  return error_response(r.status, r.code, r.message);
}

/// An mcprt error as HTTP status, code and text (the text shown escaped).
struct http_error {
  int status = 500;
  std::string code;
  std::string message;
};

http_error classify(caf::actor_system& sys, const caf::error& e) {
  http_error out;
  if (e.category() == caf::atom("mcprt")) {
    auto x = static_cast<errc>(e.code());
    out.code = to_string(x);
    auto& context = e.context();
    out.message = !context.empty() && context.match_element<std::string>(0) ? context.get_as<std::string>(0) : out.code;
    switch (x) {
      case errc::unknown_server:
      case errc::unknown_session:
      case errc::unknown_tool: out.status = 404; break;
      case errc::unavailable:
      case errc::not_gated:
      case errc::budget_exhausted:
      case errc::pool_draining: out.status = 409; break;
      case errc::too_many_calls: out.status = 429; break;
      case errc::bad_request: out.status = 400; break;
      case errc::not_advertised: out.status = 501; break;
      case errc::not_connected: out.status = 503; break;
      case errc::cancelled: out.status = 409; break; // the caller cancelled the call
      case errc::timeout: out.status = 504; break;
      case errc::tool_error:
      case errc::protocol_error:
      case errc::spawn_failed:
      case errc::transport_not_supported:
      case errc::needs_auth: out.status = 502; break;
      default: out.status = 500;
    }
    return out;
  }
  if (e == caf::sec::request_timeout) {
    out.status = 504;
    out.code = "timeout";
  } else {
    out.status = 500;
    out.code = "internal_error";
  }
  out.message = sys.render(e);
  return out;
}

http_response runtime_error_response(caf::actor_system& sys, const caf::error& e, json extra) {
  auto c = classify(sys, e);
  if (auto u = unavailability_of(e)) {
    extra["reason"] = escape_for_display(u->reason);
    extra["remedy"] = escape_for_display(u->remedy);
  }
  auto r = error_response(c.status, c.code, escape_for_display(c.message), extra);
  if (c.status == 429) r.headers.emplace_back("Retry-After", "1");
  return r;
}

/// The request's allowed Origin (the CORS answer goes to it), if any.
std::optional<std::string> allowed_origin(const http_request& req, const std::vector<std::string>& allowed) {
  return http::check_origin(req.headers, allowed).allowed_origin;
}

void add_cors(http_response& r, const std::optional<std::string>& origin) {
  if (!origin) return;
  r.headers.emplace_back("Access-Control-Allow-Origin", *origin);
  r.headers.emplace_back("Vary", "Origin");
}

// -- event streams -------------------------------------------------------------------------

/// Fans bus events out to the streams.
class event_hub {
public:
  event_hub(std::size_t queue_limit, std::shared_ptr<stream_slots> slots)
    : limit_(queue_limit), slots_(std::move(slots)) {}

  std::shared_ptr<event_stream> add() {
    std::lock_guard<std::mutex> guard{mtx_};
    prune();
    if (stopping_) return nullptr;
    auto slot = slots_->take();
    if (!slot) return nullptr;
    auto s = std::make_shared<event_stream>(limit_);
    s->hold(std::move(slot));
    streams_.push_back(s);
    return s;
  }

  void publish(uint64_t seq, const frame_ptr& frame) {
    std::vector<std::shared_ptr<event_stream>> live;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      latest_ = std::max(latest_, seq);
      prune();
      for (auto& w : streams_)
        if (auto s = w.lock()) live.push_back(std::move(s));
    }
    for (auto& s : live)
      if (!s->push(seq, frame)) spdlog::warn("events: dropping a stream that fell {} events behind", limit_);
  }

  void keepalive() {
    for (auto& s : snapshot())
      s->keepalive();
  }

  void stop() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stopping_ = true;
    }
    for (auto& s : snapshot())
      s->close();
  }

  uint64_t latest() {
    std::lock_guard<std::mutex> guard{mtx_};
    return latest_;
  }

private:
  std::vector<std::shared_ptr<event_stream>> snapshot() {
    std::vector<std::shared_ptr<event_stream>> out;
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& w : streams_)
      if (auto s = w.lock()) out.push_back(std::move(s));
    return out;
  }

  void prune() {
    streams_.erase(std::remove_if(streams_.begin(), streams_.end(), [](auto& w) { return w.expired(); }),
                   streams_.end());
  }

  std::mutex mtx_;
  std::vector<std::weak_ptr<event_stream>> streams_; // a stream lives as long as its response
  bool stopping_ = false;
  uint64_t latest_ = 0;
  std::size_t limit_;
  std::shared_ptr<stream_slots> slots_;
};

std::string sse_frame(const event& ev) {
  return "id: " + std::to_string(ev.seq) + "\nevent: " + to_string(ev.kind) + "\ndata: " + dump_json(redact(ev.data.value))
         + "\n\n";
}

/// Tells a resuming client that events between its Last-Event-ID and
/// `next_id` are gone (no `id:`, so its Last-Event-ID stays): it should
/// fetch the snapshot again.
std::string gap_frame(uint64_t last_event_id, uint64_t next_id, const char* reason) {
  json data{{"last_event_id", last_event_id}, {"next_id", next_id}, {"reason", reason}};
  return "event: gap\ndata: " + data.dump() + "\n\n";
}

event_subscriber_actor::behavior_type hub_sink(event_subscriber_actor::pointer, std::shared_ptr<event_hub> hub) {
  return {
    [hub](event& ev) {
      try {
        hub->publish(ev.seq, std::make_shared<const std::string>(sse_frame(ev)));
      } catch (const std::exception& e) {
        spdlog::error("events: cannot forward event {}: {}", ev.seq, escape_for_display(e.what()));
      }
    },
  };
}

/// A few warnings a second at most: a page or a script hammering the API
/// must not flood the log.
class warn_limiter {
public:
  bool allow() {
    std::lock_guard<std::mutex> guard{mtx_};
    auto now = clock_type::now();
    if (now - window_ >= std::chrono::seconds(1)) {
      window_ = now;
      if (suppressed_ > 0) spdlog::warn("http: {} more refusals not logged", suppressed_);
      count_ = suppressed_ = 0;
    }
    if (++count_ <= 5) return true;
    ++suppressed_;
    return false;
  }

private:
  std::mutex mtx_;
  clock_type::time_point window_{};
  std::size_t count_ = 0, suppressed_ = 0;
};

} // namespace

// -- the API -----------------------------------------------------------------------------

struct http_api::impl {
  runtime& rt;
  caf::actor_system& sys;
  std::string session;
  http_api_options opts;
  std::shared_ptr<stream_slots> slots; // every kind of stream, one limit
  std::shared_ptr<event_hub> hub;
  event_subscriber_actor sink;
  /// What the listener answers to, worked out once it listens (read on
  /// the loop's thread, for every request).
  struct own_names {
    int port = 0;
    std::vector<std::string> hosts;   // allowed Host values
    std::vector<std::string> origins; // allowed Origin values: --allow-origin and the listener's own
  };
  std::shared_ptr<const own_names> names;
  /// What answers of the runtime that arrive on its actor threads may use
  /// of this api: only while it is open (stop() closes it and waits for
  /// the answers being handled).
  struct answer_gate {
    std::shared_mutex mtx;
    bool open = true;
  };
  std::shared_ptr<answer_gate> gate = std::make_shared<answer_gate>();
  /// Asks of the runtime in flight, reads and changes: each bounded.
  std::shared_ptr<std::atomic<std::size_t>> reads_in_flight = std::make_shared<std::atomic<std::size_t>>(0);
  std::shared_ptr<std::atomic<std::size_t>> changes_in_flight = std::make_shared<std::atomic<std::size_t>>(0);
  warn_limiter warnings;
  std::unique_ptr<mcp_http> mcp; // the gateway's routes, when it runs

  impl(runtime& r, caf::actor_system& s, std::string sess, http_api_options o)
    : rt(r), sys(s), session(std::move(sess)), opts(std::move(o)),
      slots(std::make_shared<stream_slots>(opts.max_streams)),
      hub(std::make_shared<event_hub>(opts.sse_queue, slots)) {
    if (opts.gateway) {
      mcp_http_options mo;
      mo.max_body = opts.max_body;
      mo.max_json_depth = opts.max_json_depth;
      mo.stream_queue = opts.sse_queue;
      mo.slots = slots;
      mcp = std::make_unique<mcp_http>(*opts.gateway, mo);
    }
  }

  std::optional<http_response> head_checks(const http_request& req);
  void route(const std::shared_ptr<http_exchange>& ex);
  void respond(const std::shared_ptr<http_exchange>& ex, http_response r) const {
    add_cors(r, allowed_origin(ex->request(), opts.allowed_origins));
    ex->respond(std::move(r));
  }

  /// A JSON object body (empty allowed when `optional`), or a 400 sent.
  std::optional<json> object_body(const std::shared_ptr<http_exchange>& ex, bool optional) const;

  /// Runs `ask(answer)` unless `in_flight` is at its bound (503); `answer`
  /// takes a callable that, under the gate, makes the response (a stopped
  /// api answers 503 instead), and sends it.
  using responder = std::function<void(std::function<http_response()>)>;
  void ask_runtime(const std::shared_ptr<http_exchange>& ex, const std::shared_ptr<std::atomic<std::size_t>>& in_flight,
                   const std::function<void(responder)>& ask) {
    if (in_flight->fetch_add(1) >= opts.lane_queue) {
      in_flight->fetch_sub(1);
      respond(ex, error_response(503, "unavailable", "the daemon is busy; try again"));
      return;
    }
    auto origin = allowed_origin(ex->request(), opts.allowed_origins);
    // Once per request, from an actor thread of the runtime.
    ask([ex, origin, in_flight, g = gate](std::function<http_response()> make) {
      http_response r;
      {
        std::shared_lock<std::shared_mutex> open{g->mtx};
        try {
          r = g->open ? make() : error_response(503, "unavailable", "the daemon is stopping; try again");
        } catch (const std::exception& e) {
          r = error_response(500, "internal_error", "the request failed: " + escape_for_display(e.what()));
        }
      }
      in_flight->fetch_sub(1);
      add_cors(r, origin);
      ex->respond(std::move(r));
    });
  }

  void events(const std::shared_ptr<http_exchange>& ex);
  void call(const std::shared_ptr<http_exchange>& ex);
  void mcp_request(const std::shared_ptr<http_exchange>& ex, const http::route_match& m);
  void answer_host(const std::shared_ptr<http_exchange>& ex, const http::route_match& m);
  void cancel_call(const std::shared_ptr<http_exchange>& ex, const std::string& call_id);
  // Call ids the daemon makes for calls without one.
  std::string call_id_prefix = [] {
    std::random_device rd;
    char buf[24];
    std::snprintf(buf, sizeof buf, "http-%08x%08x-", rd(), rd());
    return std::string{buf};
  }();
  std::atomic<uint64_t> next_call_id{1};
  void restart(const std::string& name, const responder& answer);
  void authorize(const std::string& name, const authorize_options& options, const responder& answer);
  void logout(const std::string& name, const responder& answer);
};

std::optional<http_response> http_api::impl::head_checks(const http_request& req) {
  auto refuse = [&](const http::refusal& r, bool warn) {
    if (warn && warnings.allow())
      spdlog::warn("http: refused {} {}: {}", escape_for_display(req.method.substr(0, 16)), http::shown(req.target),
                   r.message);
    auto resp = refusal_response(r);
    if (r.status == 401) resp.headers.emplace_back("WWW-Authenticate", "Bearer");
    return resp;
  };
  auto own = std::atomic_load(&names);
  if (!own) return error_response(503, "unavailable", "the daemon is starting");
  if (auto r = http::check_host(req.headers, {opts.host, own->port}, own->hosts)) return refuse(*r, r->status == 403);
  auto origin = http::check_origin(req.headers, own->origins);
  if (origin.refused) return refuse(*origin.refused, true);
  if (origin.allowed_origin) origin.allowed_origin = http::check_origin(req.headers, opts.allowed_origins).allowed_origin;
  if (req.method == "OPTIONS") {
    auto routing = http::resolve_route("GET", req.target);
    if (routing.allow.empty()) return refusal_response(*routing.refused);
    http_response r;
    r.status = origin.allowed_origin ? 204 : 405;
    r.content_type = "text/plain";
    r.headers.emplace_back("Allow", routing.allow + ", OPTIONS");
    if (origin.allowed_origin) {
      add_cors(r, origin.allowed_origin);
      r.headers.emplace_back("Access-Control-Allow-Methods", routing.allow);
      r.headers.emplace_back("Access-Control-Allow-Headers",
                             "Authorization, Content-Type, Last-Event-ID, Mcp-Session-Id, MCP-Protocol-Version");
      r.headers.emplace_back("Access-Control-Expose-Headers", "Mcp-Session-Id");
      r.headers.emplace_back("Access-Control-Max-Age", "600");
    } else {
      r = error_response(405, "method_not_allowed", "OPTIONS is only a CORS preflight of an allowed origin");
      r.headers.emplace_back("Allow", routing.allow);
    }
    return r;
  }
  if (auto r = http::check_bearer(req.headers, opts.token)) return refuse(*r, true);
  auto routing = http::resolve_route(req.method, req.target);
  if (routing.refused) {
    auto r = refusal_response(*routing.refused);
    if (routing.refused->status == 405) r.headers.emplace_back("Allow", routing.allow);
    add_cors(r, origin.allowed_origin);
    return r;
  }
  if (req.method == "POST")
    if (auto r = http::check_json_content_type(req.headers)) {
      auto resp = refuse(*r, false);
      add_cors(resp, origin.allowed_origin);
      return resp;
    }
  return std::nullopt;
}

std::optional<json> http_api::impl::object_body(const std::shared_ptr<http_exchange>& ex, bool optional) const {
  auto& body = ex->request().body;
  if (body.empty()) {
    if (optional) return json::object();
    respond(ex, error_response(400, "bad_request", "expected a JSON object body"));
    return std::nullopt;
  }
  json_limits lim;
  lim.max_bytes = opts.max_body;
  lim.max_depth = opts.max_json_depth;
  auto parsed = parse_bounded_json(body, lim);
  if (!parsed.ok()) {
    respond(ex, error_response(400, "bad_request",
                               "the body is not valid JSON: " + parsed.error->message + " (at byte "
                                 + std::to_string(parsed.error->offset) + ")"));
    return std::nullopt;
  }
  if (!parsed.value.is_object()) {
    respond(ex, error_response(400, "bad_request", "expected a JSON object body"));
    return std::nullopt;
  }
  return std::move(parsed.value);
}

void http_api::impl::route(const std::shared_ptr<http_exchange>& ex) {
  auto& req = ex->request();
  auto routing = http::resolve_route(req.method, req.target);
  if (!routing.match) {
    respond(ex, refusal_response(routing.refused ? *routing.refused : http::refusal{404, "not_found", "no route"}));
    return;
  }
  auto& m = *routing.match;
  switch (m.id) {
    case http::route_id::healthz: respond(ex, json_response(200, {{"ok", true}, {"instance", opts.instance}})); return;
    case http::route_id::snapshot:
      ask_runtime(ex, reads_in_flight, [this](responder answer) {
        // Taken here, on the server's thread: the gateway's lock is never
        // waited for on an actor thread.
        std::optional<std::size_t> pending;
        if (opts.asks) pending = opts.asks->pending();
        std::optional<json> gateway;
        if (opts.gateway) gateway = opts.gateway->snapshot();
        rt.snapshot_async([answer, pending, gateway = std::move(gateway)](json snap) mutable {
          answer([&] {
            snap = redact(std::move(snap));
            if (pending) snap["pending_host_requests"] = *pending;
            if (gateway) snap["gateway"] = std::move(*gateway);
            return json_response(200, snap);
          });
        });
      });
      return;
    case http::route_id::events: events(ex); return;
    case http::route_id::call: call(ex); return;
    case http::route_id::mcp_post:
    case http::route_id::mcp_get:
    case http::route_id::mcp_delete:
    case http::route_id::legacy_sse:
    case http::route_id::legacy_messages: {
      if (!mcp) {
        respond(ex, error_response(404, "not_found", "the gateway is off (--no-gateway)"));
        return;
      }
      http_response cors;
      add_cors(cors, allowed_origin(req, opts.allowed_origins));
      if (!cors.headers.empty()) cors.headers.emplace_back("Access-Control-Expose-Headers", "Mcp-Session-Id");
      mcp->handle(ex, m.id, cors.headers, m.server);
      return;
    }
    case http::route_id::reload:
      if (!object_body(ex, true)) return;
      ask_runtime(ex, changes_in_flight, [this](responder answer) {
        rt.reload_async([answer, s = &sys](caf::expected<bool> r) {
          answer([&] {
            if (!r) return runtime_error_response(*s, r.error(), json::object());
            return json_response(202, {{"reload", "accepted"}});
          });
        });
      });
      return;
    case http::route_id::approve:
    case http::route_id::reject: {
      if (!object_body(ex, true)) return;
      bool approve = m.id == http::route_id::approve;
      ask_runtime(ex, changes_in_flight, [this, name = m.server, approve](responder answer) {
        auto done = [answer, name, approve, s = &sys](caf::expected<bool> r) {
          answer([&] {
            if (!r) return runtime_error_response(*s, r.error(), {{"server", name}});
            spdlog::info("{} {} over HTTP", approve ? "approved" : "rejected", escape_for_display(name));
            return json_response(200, {{"server", name}, {"approval", approve ? "approved" : "rejected"}});
          });
        };
        if (approve) rt.approve_async(name, done);
        else rt.reject_async(name, done);
      });
      return;
    }
    case http::route_id::restart:
      if (!object_body(ex, true)) return;
      ask_runtime(ex, changes_in_flight, [this, name = m.server](responder answer) { restart(name, answer); });
      return;
    case http::route_id::resources:
    case http::route_id::resource_templates:
    case http::route_id::resource_read:
    case http::route_id::resource_subscribe:
    case http::route_id::resource_unsubscribe:
    case http::route_id::prompt_get:
    case http::route_id::complete:
    case http::route_id::prompts: mcp_request(ex, m); return;
    case http::route_id::elicitation_answer:
    case http::route_id::sampling_answer: answer_host(ex, m); return;
    case http::route_id::call_cancel:
      if (!object_body(ex, true)) return;
      cancel_call(ex, m.server);
      return;
    case http::route_id::auth: {
      auto body = object_body(ex, true);
      if (!body) return;
      // `mcprt auth --timeout-ms`: the whole flow shares the caller's deadline.
      authorize_options ao;
      if (auto t = body->find("timeout_ms"); t != body->end() && t->is_number_unsigned() && t->get<std::uint64_t>() > 0) {
        auto ms = std::chrono::milliseconds(std::min<std::uint64_t>(t->get<std::uint64_t>(), 3600000));
        ao.url_timeout = ao.callback_timeout = ms;
        ao.deadline = std::chrono::steady_clock::now() + ms;
      }
      ask_runtime(ex, changes_in_flight, [this, name = m.server, ao](responder answer) { authorize(name, ao, answer); });
      return;
    }
    case http::route_id::auth_logout:
      ask_runtime(ex, changes_in_flight, [this, name = m.server](responder answer) { logout(name, answer); });
      return;
  }
}

// -- answers to servers' requests for the host -----------------------------

void http_api::impl::answer_host(const std::shared_ptr<http_exchange>& ex, const http::route_match& m) {
  auto kind = m.id == http::route_id::elicitation_answer ? host_request_kind::elicitation : host_request_kind::sampling;
  if (!opts.asks) {
    respond(ex, error_response(404, "unknown_request",
                               "this daemon does not ask its client (start it with --elicitation ask or --sampling ask)"));
    return;
  }
  auto body = object_body(ex, false);
  if (!body) return;
  // Quick (a lock and a message to the connection): answered on the loop.
  auto out = opts.asks->answer(kind, m.server, *body);
  switch (out.status) {
    case host_requests::answer_status::answered:
      respond(ex, json_response(200, {{"id", m.server}, {"answered", true}}));
      return;
    case host_requests::answer_status::unknown:
      respond(ex, error_response(404, "unknown_request", out.message));
      return;
    case host_requests::answer_status::already_ended:
      respond(ex, error_response(409, "already_ended", out.message));
      return;
    case host_requests::answer_status::bad_body:
      respond(ex, error_response(400, "bad_request", out.message));
      return;
  }
}

// -- cancel of a tool call ----------------------------------------------------

void http_api::impl::cancel_call(const std::shared_ptr<http_exchange>& ex, const std::string& call_id) {
  if (!is_valid_call_id(call_id)) {
    respond(ex, error_response(400, "bad_request",
                               "a call id is 1 to 128 ASCII letters, digits, '-', '_', '.' or ':'"));
    return;
  }
  // Only sends: the call's own response answers with 409 "cancelled".
  if (!rt.cancel_call(call_id)) {
    respond(ex, error_response(404, "unknown_call", "no tool call with id " + call_id + " is in flight",
                               {{"call_id", call_id}}));
    return;
  }
  spdlog::info("call {} cancelled over HTTP", call_id);
  respond(ex, json_response(200, {{"call_id", call_id}, {"cancelled", true}}));
}

// -- resources, prompts and completion ---------------------------------------

void http_api::impl::mcp_request(const std::shared_ptr<http_exchange>& ex, const http::route_match& m) {
  std::string method;
  std::vector<const char*> keys; // what the body may hand on; the session checks each
  switch (m.id) {
    case http::route_id::resources: method = "resources/list"; break;
    case http::route_id::resource_templates: method = "resources/templates/list"; break;
    case http::route_id::resource_read: method = "resources/read", keys = {"uri"}; break;
    case http::route_id::resource_subscribe: method = "resources/subscribe", keys = {"uri"}; break;
    case http::route_id::resource_unsubscribe: method = "resources/unsubscribe", keys = {"uri"}; break;
    case http::route_id::prompt_get: method = "prompts/get", keys = {"name", "arguments"}; break;
    case http::route_id::complete: method = "completion/complete", keys = {"ref", "argument", "context"}; break;
    case http::route_id::prompts: method = "prompts/list"; break;
    default: return;
  }
  json params = json::object();
  if (ex->request().method == "POST") {
    auto body = object_body(ex, false);
    if (!body) return;
    for (auto key : keys)
      if (auto i = body->find(key); i != body->end() && !i->is_null()) params[key] = std::move(*i);
  }
  call_options co;
  co.timeout = opts.call_timeout;
  co.wait_connecting = opts.connect_wait;
  auto origin = allowed_origin(ex->request(), opts.allowed_origins);
  auto* s = &sys;
  rt.mcp_request_async(
    session, m.server, method, std::move(params),
    [ex, origin, s, server = m.server, method](caf::expected<json> r) {
      http_response resp = r ? json_response(200, *r)
                             : runtime_error_response(*s, r.error(), {{"server", server}, {"method", method}});
      add_cors(resp, origin);
      ex->respond(std::move(resp));
    },
    co);
}

void http_api::impl::restart(const std::string& name, const responder& answer) {
  auto show = [answer, name](std::vector<restart_result> rs) {
    answer([&] {
      json results = json::array();
      for (auto& x : rs)
        results.push_back({{"id", x.id}, {"restarted", x.restarted}, {"duration_ms", x.duration_ms},
                           {"reason", x.reason.empty() ? json(nullptr) : json(x.reason)}});
      spdlog::info("restart {}: {} entries", escape_for_display(name), rs.size());
      return json_response(200, {{"server", name}, {"results", results}});
    });
  };
  rt.restart_async(name, [rt = &rt, answer, name, show, s = &sys](caf::expected<std::vector<restart_result>> r) {
    if (!r) {
      answer([&] { return runtime_error_response(*s, r.error(), {{"server", name}}); });
      return;
    }
    if (!r->empty()) {
      show(std::move(*r));
      return;
    }
    // No pool entry: say whether the server exists at all. The runtime
    // outlives the api's answers (it stops after the server).
    rt->snapshot_async([answer, name, show](json snap) {
      bool known = false;
      for (auto& s : snap["servers"])
        known = known || s.value("name", "") == name;
      if (known) show({});
      else
        answer([&] {
          return error_response(404, "unknown_server", "no MCP server named " + http::shown(name) + " is configured",
                                {{"server", name}});
        });
    });
  });
}

// -- OAuth ------------------------------------------------------------------

// The daemon serves the redirect itself (a loopback listener of its own per
// authorization); the caller opens the URL. Nobody else learns the tokens.
void http_api::impl::authorize(const std::string& name, const authorize_options& options, const responder& answer) {
  rt.authorize_async(name, options, [answer, name, s = &sys](caf::expected<std::string> url) {
    answer([&] {
      if (!url) return runtime_error_response(*s, url.error(), {{"server", name}});
      spdlog::info("authorization of {} started", escape_for_display(name));
      return json_response(200, {{"server", name}, {"authorization_url", url->empty() ? json(nullptr) : json(*url)}});
    });
  });
}

void http_api::impl::logout(const std::string& name, const responder& answer) {
  rt.forget_authorization_async(name, [answer, name, s = &sys](caf::expected<bool> forgot) {
    answer([&] {
      if (!forgot) return runtime_error_response(*s, forgot.error(), {{"server", name}});
      spdlog::info("OAuth credentials of {} {}", escape_for_display(name), *forgot ? "forgotten" : "were not stored");
      return json_response(200, {{"server", name}, {"forgotten", *forgot}});
    });
  });
}

void http_api::impl::call(const std::shared_ptr<http_exchange>& ex) {
  auto body = object_body(ex, false);
  if (!body) return;
  auto& b = *body;
  for (auto key : {"server", "tool"}) {
    if (!b.contains(key) || !b[key].is_string() || !http::is_plain_name(b[key].get<std::string>())) {
      respond(ex, error_response(400, "bad_request",
                                 std::string("\"") + key
                                   + "\" must be a name: a non-empty string without control characters"));
      return;
    }
  }
  json args = json::object();
  if (b.contains("arguments") && !b["arguments"].is_null()) {
    if (!b["arguments"].is_object()) {
      respond(ex, error_response(400, "bad_request", "\"arguments\" must be an object"));
      return;
    }
    args = std::move(b["arguments"]);
  }
  auto server = b["server"].get<std::string>();
  auto tool = b["tool"].get<std::string>();
  call_options co;
  co.timeout = opts.call_timeout;
  co.wait_connecting = opts.connect_wait;
  // a call id the client chose asks for progress on the event
  // stream under that id, and names the call for its cancel route.
  if (b.contains("call_id") && !b["call_id"].is_null()) {
    if (!b["call_id"].is_string() || !is_valid_call_id(b["call_id"].get<std::string>())) {
      respond(ex, error_response(400, "bad_request",
                                 "\"call_id\" must be 1 to 128 ASCII letters, digits, '-', '_', '.' or ':'"));
      return;
    }
    co.call_id = b["call_id"].get<std::string>();
    co.progress_events = true;
  } else {
    // Unguessable, so it does not collide with a client's chosen id.
    co.call_id = call_id_prefix + std::to_string(next_call_id.fetch_add(1));
  }
  auto origin = allowed_origin(ex->request(), opts.allowed_origins);
  // Runs on an actor thread, possibly after this api is gone: it holds
  // only what it uses (the actor system outlives every actor).
  auto* s = &sys;
  rt.call_tool_async(
    session, server, tool, std::move(args),
    [ex, origin, s, server, tool, call_id = co.call_id](caf::expected<json> r) {
      http_response resp = r ? json_response(200, *r)
                             : runtime_error_response(*s, r.error(),
                                                      {{"server", server}, {"tool", tool}, {"call_id", call_id}});
      resp.headers.emplace_back("Mcprt-Call-Id", call_id);
      add_cors(resp, origin);
      ex->respond(std::move(resp));
    },
    co);
}

void http_api::impl::events(const std::shared_ptr<http_exchange>& ex) {
  auto& req = ex->request();
  std::optional<uint64_t> after;
  auto ids = http::header_values(req.headers, "last-event-id");
  if (!ids.empty()) {
    after = ids.size() == 1 ? http::parse_event_id(ids.front()) : std::nullopt;
    if (!after) {
      respond(ex, error_response(400, "bad_request", "Last-Event-ID must be an event id (a decimal number)"));
      return;
    }
  }
  auto stream_head = [](http_response& r) {
    r.content_type = "text/event-stream";
    r.headers.emplace_back("X-Accel-Buffering", "no");
  };
  if (req.method == "HEAD") {
    http_response r;
    stream_head(r);
    respond(ex, std::move(r));
    return;
  }
  auto stream = hub->add();
  if (!stream) {
    respond(ex, error_response(503, "unavailable",
                               "too many streams (at most " + std::to_string(opts.max_streams)
                                 + " of every kind together, --max-streams), or the daemon is stopping"));
    return;
  }
  // Registered first, then replayed: nothing falls in between; what is in
  // both is skipped by sequence number.
  auto open = [stream, stream_head](std::string head, uint64_t last) {
    stream->set_initial(std::move(head), last);
    http_response r;
    stream_head(r);
    r.stream = stream;
    return r;
  };
  if (!after) {
    respond(ex, open(": mcprt events\n\n", 0));
    return;
  }
  ask_runtime(ex, reads_in_flight, [this, after = *after, open, hub = hub](responder answer) {
    // `last`: the id the stream counts from, before the frames replayed.
    auto replayed_from = [open, answer](std::vector<event> replayed, std::string head, uint64_t last) {
      for (auto& ev : replayed) {
        head += sse_frame(ev);
        last = std::max(last, ev.seq);
      }
      answer([&] { return open(std::move(head), last); });
    };
    rt.replay_async(after, [rt = &rt, after, hub, replayed_from](std::vector<event> replayed) {
      std::string head = ": mcprt events\n\n";
      auto latest = std::max(hub->latest(), replayed.empty() ? 0 : replayed.back().seq);
      if (after > latest) {
        // An id this daemon never sent: from an earlier run of it. The
        // client missed everything; it gets the whole ring.
        rt->replay_async(0, [latest, replayed_from, head, after](std::vector<event> all) mutable {
          head += gap_frame(after, all.empty() ? latest + 1 : all.front().seq, "unknown_id");
          replayed_from(std::move(all), std::move(head), 0);
        });
        return;
      }
      if (!replayed.empty() && replayed.front().seq > after + 1) head += gap_frame(after, replayed.front().seq, "evicted");
      replayed_from(std::move(replayed), std::move(head), after);
    });
  });
}

// -- the handler ------------------------------------------------------------------------

http_api::http_api(runtime& rt, caf::actor_system& sys, std::string session, http_api_options opts)
  : impl_(std::make_unique<impl>(rt, sys, std::move(session), std::move(opts))) {}

http_api::~http_api() {
  stop();
  if (impl_->sink) {
    impl_->rt.unsubscribe(impl_->sink);
    caf::anon_send_exit(impl_->sink, caf::exit_reason::user_shutdown);
  }
}

void http_api::stop() {
  impl_->hub->stop();
  if (impl_->mcp) impl_->mcp->stop();
  {
    // Answers still on their way find the api closed.
    std::unique_lock<std::shared_mutex> closing{impl_->gate->mtx};
    impl_->gate->open = false;
  }
}

bool http_api::install(http_server& server) {
  auto& p = *impl_;
  p.sink = p.sys.spawn(hub_sink, p.hub);
  if (!p.rt.subscribe(p.sink)) return false;
  auto hub = p.hub;
  server.every(p.opts.keepalive, [hub] { hub->keepalive(); });
  if (auto* mcp = p.mcp.get()) server.every(p.opts.keepalive, [mcp] { mcp->keepalive(); });
  return true;
}

void http_api::listening_on(int port) {
  auto own = std::make_shared<impl::own_names>();
  own->port = port;
  own->hosts = http::allowed_hosts({impl_->opts.host, port});
  // The listener's own origin is not a cross-site page (only a page the
  // daemon served could send it, and it serves none), so it passes too:
  // clients that send Origin on every request, as browsers' fetch does,
  // work without --allow-origin. No CORS headers for it: it needs none.
  own->origins = impl_->opts.allowed_origins;
  for (auto& h : own->hosts)
    own->origins.push_back("http://" + h);
  std::atomic_store(&impl_->names, std::shared_ptr<const impl::own_names>(std::move(own)));
}

std::optional<http_response> http_api::on_head(const http_request& head) {
  return impl_->head_checks(head);
}

void http_api::on_request(std::shared_ptr<http_exchange> ex) {
  impl_->route(ex);
}

void http_api::on_answered(const http_request& req, int status) {
  spdlog::debug("{} {} -> {}", escape_for_display(req.method.substr(0, 16)), http::shown(req.target), status);
}

} // namespace mcprt::cli
