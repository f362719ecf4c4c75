#include "actors/connection.hpp"

#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "mcprt/version.hpp"
#include "core/fingerprint.hpp"
#include "core/mcp_session.hpp"
#include "core/untrusted_text.hpp"
#include "io/http_transport.hpp"
#include "core/mcp_headers.hpp"
#include "io/reactor.hpp"
#include "io/sse_transport.hpp"

namespace mcprt {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int error_internal = -32603; // JSON-RPC "Internal error"
constexpr uint32_t log_burst = 100;      // log messages a second on the bus, per connection

struct connection_state {
  static inline const char* name = "mcprt.connection";

  connection_config cfg;
  connection_io io;
  std::string id;
  std::unique_ptr<mcp_session> session;
  mcp_session::options session_options;
  connection_status status = connection_status::connecting;
  std::string last_error;
  std::optional<io::reactor::process_id> process;
  int32_t pid = -1;
  std::unique_ptr<io::http_transport> http;
  std::unique_ptr<io::sse_transport> sse; // legacy HTTP+SSE
  bool http_reinitialized = false;
  bool event_stream_open = false;
  bool transport_ended = false;
  bool stopping = false;
  std::deque<std::string> stderr_tail;
  std::string sandbox; // connection_info::sandbox
  std::map<uint64_t, caf::typed_response_promise<json_value>> calls;
  // Calls that are client requests (atom::mcp_request), not tools/call:
  // their refusals mean other things.
  std::set<uint64_t> request_tokens;
  // Calls made under a caller's call id, for cancel and progress.
  struct call_handle {
    std::string call_id;
    progress_sink_actor progress;
  };
  std::map<uint64_t, call_handle> call_handles;
  // The tool of each call in flight: a host request is attributed to the
  // call when it is the only one.
  std::map<uint64_t, std::string> call_tools;
  // Host requests forwarded to cfg.host and not yet answered or withdrawn,
  // by the session's token.
  std::set<uint64_t> host_pending;
  // Log messages let through in the current second, and those dropped since
  // the last one let through.
  clock::time_point log_window{};
  uint32_t logs_in_window = 0;
  uint32_t logs_dropped = 0;
  // Counts sessions (a new one after an HTTP re-initialize): an answer meant
  // for the previous session's token must not reach the new one.
  uint64_t session_epoch = 0;
  uint64_t next_token = 1;
  std::optional<clock::time_point> tick_at;
  std::vector<caf::typed_response_promise<bool>> stop_promises;
  // Pings waiting for the server's answer, with the time each was sent.
  std::vector<std::pair<caf::typed_response_promise<int64_t>, clock::time_point>> pings;

  connection_state() = default;
  connection_state(const connection_state&) = delete;
  connection_state& operator=(const connection_state&) = delete;

  // However the actor ends, its server goes with it.
  ~connection_state() {
    if (process && io.reactor) io.reactor->kill(*process);
    if (http) http->close();
    if (sse) sse->close();
  }
};

using connection_self = connection_actor::stateful_pointer<connection_state>;

std::string stderr_excerpt(const connection_state& st, std::size_t lines = 5) {
  std::string out;
  auto n = std::min(lines, st.stderr_tail.size());
  for (auto i = st.stderr_tail.size() - n; i < st.stderr_tail.size(); ++i)
    out += (out.empty() ? "" : " | ") + st.stderr_tail[i];
  return out;
}

client_update update_of(const connection_state& st) {
  client_update u;
  u.server = st.cfg.server.name;
  u.connection_id = st.id;
  u.generation = st.cfg.generation;
  u.status = st.status;
  if (st.session) {
    u.tools = static_cast<uint32_t>(st.session->visible_tools().size());
    u.prompts = static_cast<uint32_t>(st.session->prompts().size());
  }
  u.pid = st.pid;
  u.error = st.last_error;
  return u;
}

void publish(connection_self self) {
  auto u = update_of(self->state);
  for (auto& sub : self->state.cfg.subscribers)
    self->send(sub, u);
}

void fail_calls(connection_self self, const std::string& why) {
  for (auto& [token, rp] : self->state.calls)
    rp.deliver(make_error(errc::not_connected, why));
  self->state.calls.clear();
  self->state.request_tokens.clear();
  self->state.call_handles.clear();
  self->state.call_tools.clear();
  for (auto& [rp, sent] : self->state.pings)
    rp.deliver(make_error(errc::not_connected, why));
  self->state.pings.clear();
}

void shut_down_transport(connection_self self) {
  auto& st = self->state;
  if (st.process && !st.transport_ended) st.io.reactor->shutdown(*st.process);
  if (st.http && !st.transport_ended) st.http->close();
  if (st.sse && !st.transport_ended) st.sse->close();
}

void finish_stop(connection_self self) {
  auto& st = self->state;
  if (st.status != connection_status::error && st.status != connection_status::needs_auth)
    st.status = connection_status::disconnected;
  publish(self);
  for (auto& rp : st.stop_promises)
    rp.deliver(true);
  st.stop_promises.clear();
  self->quit();
}

// A fatal problem: the connection reports `error` and lets its server go.
void fail(connection_self self, const std::string& what, connection_status as = connection_status::error) {
  auto& st = self->state;
  if (st.status == connection_status::error || st.status == connection_status::disconnected
      || st.status == connection_status::needs_auth)
    return;
  // An error may quote the URL's path or the command, which variables may
  // have filled with a secret.
  auto reason = without_secrets(st.cfg.server, what);
  // Reasons quote server output (stderr, HTTP bodies); last_error reaches
  // events and the snapshot as JSON, the log line a terminal.
  st.last_error = replace_invalid_utf8(reason);
  st.status = as;
  spdlog::warn("[{}] {}", escape_for_display(st.cfg.server.name), escape_for_display(reason));
  publish(self);
  fail_calls(self, reason);
  shut_down_transport(self);
}

void deliver(connection_self self, const call_result& r) {
  auto& st = self->state;
  auto i = st.calls.find(r.token);
  if (i == st.calls.end()) return;
  auto rp = i->second;
  st.calls.erase(i);
  bool is_request = st.request_tokens.erase(r.token) > 0;
  st.call_handles.erase(r.token);
  st.call_tools.erase(r.token);
  std::string msg = r.error ? without_secrets(st.cfg.server, r.error->message) : std::string{};
  if (is_request && r.outcome == call_outcome::rejected && r.error) {
    if (r.error->code == error_method_not_found) {
      rp.deliver(make_error(errc::not_advertised, st.cfg.server.name + ": " + msg));
      return;
    }
    if (r.error->code == error_invalid_params) {
      rp.deliver(make_error(errc::bad_request, msg));
      return;
    }
  }
  switch (r.outcome) {
    case call_outcome::ok:
      rp.deliver(json_value{r.result});
      break;
    case call_outcome::rpc_error:
      rp.deliver(make_error(errc::tool_error, msg + " (JSON-RPC error " + std::to_string(r.error ? r.error->code : 0) + ")"));
      break;
    case call_outcome::timed_out:
      rp.deliver(make_error(errc::timeout, msg));
      break;
    case call_outcome::rejected:
      rp.deliver(make_error(r.error && r.error->code == error_invalid_params ? errc::unknown_tool : errc::not_connected, msg));
      break;
    case call_outcome::cancelled:
      rp.deliver(make_error(errc::cancelled, msg));
      break;
    case call_outcome::closed:
      rp.deliver(make_error(errc::not_connected, msg));
      break;
  }
}

void schedule_tick(connection_self self) {
  auto& st = self->state;
  if (!st.session) return;
  auto next = st.session->next_deadline();
  if (!next || (st.tick_at && *st.tick_at <= *next)) return;
  st.tick_at = *next;
  auto delay = std::max(clock::duration::zero(), *next - clock::now());
  self->delayed_send(self, delay, atom::tick_v);
}

void forward_host_requests(connection_self self, const session_effects& fx);
void publish_logs(connection_self self, const std::vector<server_log_message>& logs);

void apply(connection_self self, session_effects fx) {
  auto& st = self->state;
  // Streamable HTTP wants the revision on every request: the modern one on
  // each (server/discover first), else the negotiated one after initialize,
  // starting with notifications/initialized; none on initialize itself.
  if (st.http && st.session) st.http->set_protocol_version(st.session->wire_protocol().value_or(""));
  if (!st.transport_ended) {
    auto extra = fx.send_headers.begin();
    for (std::size_t i = 0; i < fx.send.size(); ++i) {
      auto& line = fx.send[i];
      if (st.process) {
        st.io.reactor->write(*st.process, line + "\n");
      } else if (st.http) {
        if (extra != fx.send_headers.end() && extra->first == i) st.http->send(line, std::move((extra++)->second));
        else st.http->send(line);
      } else if (st.sse) {
        st.sse->send(line);
      }
    }
  }
  // Server-initiated messages over HTTP (list changes, and requests such
  // as elicitation/create or ping that no capability announces) arrive on
  // the standalone GET stream, so every session opens it: once initialize
  // was answered, the transport issues it when notifications/initialized
  // has been accepted, before discovery ends and before any call a server
  // might answer with a request on it. A server that offers no stream
  // answers 405 and the transport drops the stream quietly.
  // 2026-07-28 has no such stream (subscriptions/listen replaces it).
  if (st.http && !st.event_stream_open && !st.transport_ended && st.session && st.session->negotiated_protocol()
      && !st.session->modern()) {
    st.event_stream_open = true;
    st.http->open_event_stream();
  }
  bool changed = fx.tools_changed || fx.prompts_changed;
  if (fx.ready && st.status == connection_status::connecting) {
    st.status = connection_status::connected;
    changed = true;
  }
  if (changed && st.status == connection_status::connected) publish(self);
  if (fx.pong) {
    // Pongs of one read are folded into one flag: answer every waiting ping
    // (a ping never waits forever; its round trip is at most this long).
    auto now = clock::now();
    for (auto& [rp, sent] : st.pings)
      rp.deliver(static_cast<int64_t>(std::chrono::duration_cast<std::chrono::microseconds>(now - sent).count()));
    st.pings.clear();
  }
  for (auto& p : fx.progress) {
    auto h = st.call_handles.find(p.token);
    if (h == st.call_handles.end() || !h->second.progress) continue;
    // CAF 0.17 serializes only normal doubles faithfully (events.hpp).
    auto wire = [](double x) { return std::isnormal(x) ? x : 0.0; };
    self->send(h->second.progress, call_progress_update{st.cfg.server.name, h->second.call_id, wire(p.progress),
                                                        p.total.has_value(), wire(p.total.value_or(0)), p.message});
  }
  // Logs before the calls they came with complete: while a call is still
  // in flight its id is on them, so they reach only its caller.
  if (!fx.logs.empty()) publish_logs(self, fx.logs);
  for (auto& c : fx.completed_calls)
    deliver(self, c);
  for (auto& uri : fx.resources_updated)
    publish(self, st.cfg.bus, events::resource_updated{st.cfg.server.name, uri});
  if (fx.resources_changed) publish(self, st.cfg.bus, events::resource_list_changed{st.cfg.server.name});
  if (!fx.host_requests.empty() || !fx.withdrawn_host_requests.empty()) forward_host_requests(self, fx);
  if (fx.failure) fail(self, *fx.failure);
  schedule_tick(self);
}

// A chatty server must not flood the bus (and every event stream): at most
// log_burst messages a second, the rest counted into the next one let through.
void publish_logs(connection_self self, const std::vector<server_log_message>& logs) {
  auto& st = self->state;
  auto now = clock::now();
  if (now - st.log_window >= std::chrono::seconds(1)) {
    st.log_window = now;
    st.logs_in_window = 0;
  }
  for (auto& m : logs) {
    if (st.logs_in_window >= log_burst) {
      ++st.logs_dropped;
      continue;
    }
    ++st.logs_in_window;
    events::server_log ev;
    ev.server = st.cfg.server.name;
    ev.level = m.level;
    ev.logger = m.logger;
    ev.data = json_value{m.data};
    ev.dropped = std::exchange(st.logs_dropped, 0);
    for (auto& [token, h] : st.call_handles)
      ev.call_ids.push_back(h.call_id);
    publish(self, st.cfg.bus, std::move(ev));
  }
}

// The host's answer goes to the session that asked, unless the request was
// withdrawn meanwhile or that session has been replaced.
void take_host_reply(connection_self self, uint64_t epoch, uint64_t token, host_reply& r) {
  auto& st = self->state;
  if (!st.session || epoch != st.session_epoch || st.host_pending.erase(token) == 0) return;
  if (r.error_code == 0 && r.result.value.is_object())
    apply(self, st.session->answer_host_request(token, std::move(r.result.value)));
  else if (r.error_code == 0)
    apply(self, st.session->fail_host_request(token, {error_internal, "the host's answer is not a JSON object", {}}));
  else
    apply(self, st.session->fail_host_request(token, {r.error_code, r.error_message, {}}));
}

void forward_host_requests(connection_self self, const session_effects& fx) {
  auto& st = self->state;
  for (auto token : fx.withdrawn_host_requests)
    if (st.host_pending.erase(token) > 0) self->send(st.cfg.host, atom::host_withdrawn_v, token);
  for (auto& req : fx.host_requests) {
    if (!st.cfg.host) {
      apply(self, st.session->fail_host_request(req.token, {error_internal, "no host is listening", {}}));
      continue;
    }
    forwarded_host_request fwd;
    fwd.server = st.cfg.server.name;
    fwd.connection_id = st.id;
    fwd.method = req.method;
    fwd.params = json_value{req.params};
    // An input a call's input_required result asks for is that call's.
    if (req.call) {
      if (auto c = st.call_tools.find(*req.call); c != st.call_tools.end()) fwd.tool = c->second;
      if (auto c = st.call_handles.find(*req.call); c != st.call_handles.end()) fwd.call_key = c->second.call_id;
      fwd.input_key = req.input_key;
      fwd.round_size = req.round_size;
    } else if (st.call_tools.size() == 1) {
      fwd.tool = st.call_tools.begin()->second;
    }
    st.host_pending.insert(req.token);
    // No timeout here: the session answers for the host after its own
    // host_request_timeout and reports the token as withdrawn.
    self->request(st.cfg.host, caf::infinite, atom::host_request_v, req.token, std::move(fwd))
      .then([self, epoch = st.session_epoch, token = req.token](host_reply& r) { take_host_reply(self, epoch, token, r); },
            [self, epoch = st.session_epoch, token = req.token](caf::error&) {
              host_reply r;
              r.error_code = error_internal;
              r.error_message = "the host could not answer";
              take_host_reply(self, epoch, token, r);
            });
  }
}

// The session being replaced or ending takes its host requests with it.
void withdraw_host_requests(connection_self self) {
  auto& st = self->state;
  for (auto token : st.host_pending)
    self->send(st.cfg.host, atom::host_withdrawn_v, token);
  st.host_pending.clear();
}

template <class... Ts>
void send_to(const caf::weak_actor_ptr& weak, Ts&&... xs) {
  if (auto strong = weak.lock())
    caf::anon_send(caf::actor_cast<connection_actor>(strong), std::forward<Ts>(xs)...);
}

// What the server runs under, for info (the snapshot, explain) and, when
// a protection is missing, a warning event naming it.
void sandbox_started(connection_self self, const sandbox_launch& launch) {
  auto& st = self->state;
  auto j = launch.to_json();
  j["policy"] = st.cfg.server.effective_sandbox.to_json();
  if (st.cfg.sandbox) {
    j["hidden"] = st.cfg.sandbox->hide.size();
    j["writable"] = st.cfg.sandbox->write;
  }
  st.sandbox = j.dump();
  bool degraded = std::any_of(launch.missing.begin(), launch.missing.end(), [](const std::string& m) {
    return m.rfind(protection::memory, 0) != 0;
  });
  if (degraded)
    publish(self, st.cfg.bus, events::sandbox_degraded{st.cfg.server.name, launch.in_force, launch.missing});
}

void start(connection_self self) {
  auto& st = self->state;
  auto& server = st.cfg.server;
  publish(self);
  auto kind = server.transport();
  bool remote = kind == transport_kind::http || kind == transport_kind::sse;
  auto& o = st.session_options;
  o.client_name = "mcprt";
  o.client_version = MCPRT_VERSION;
  std::optional<milliseconds> configured;
  if (auto i = server.spec.find("discoveryTimeoutMs"); i != server.spec.end() && i->is_number_integer())
    configured = milliseconds(i->get<long long>());
  o.discovery_timeout = discovery_timeout_for(remote, configured);
  if (server.timeout_ms && *server.timeout_ms > 0) o.call_timeout = milliseconds(*server.timeout_ms);
  o.include_tools = server.include_tools;
  o.exclude_tools = server.exclude_tools;
  o.features = st.cfg.features;
  // 2026-07-28 is tried first (server/discover), unless the entry pins an
  // earlier revision ("protocolVersion": "2025-11-25"); the 2024-11-05 SSE
  // transport predates it.
  o.probe_modern = kind != transport_kind::sse;
  o.http_headers = kind == transport_kind::http;
  o.listen_modern = kind == transport_kind::stdio || kind == transport_kind::http;
  // The host (a gateway client, say) may know the roots of the request.
  o.host_answers_input_roots = true;
  if (auto v = server.spec.find("protocolVersion"); v != server.spec.end() && v->is_string()
                                                    && !is_modern_protocol(v->get<std::string>()))
    o.probe_modern = false;
  st.session = std::make_unique<mcp_session>(o);
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  switch (kind) {
    case transport_kind::stdio: {
      io::spawn_options spawn{*server.command, server.args, server.env, server.cwd};
      spawn.inherit_all_env = server.effective_sandbox.inherit_all_env;
      spawn.inherit_env = server.effective_sandbox.inherit_env;
      spawn.sandbox = st.cfg.sandbox;
      spawn.name = server.name;
      io::process_events ev;
      ev.on_stdout = [weak](std::string_view bytes) { send_to(weak, atom::io_out_v, std::string(bytes)); };
      ev.on_stderr_line = [weak](std::string line) { send_to(weak, atom::io_err_v, std::move(line)); };
      ev.on_exit = [weak](const io::process_exit& how) {
        // A server that stops talking but lives on is a failure like a
        // crash (the pool restarts it), and the reason says which.
        send_to(weak, atom::io_exit_v,
                how.stdout_closed ? std::string("server closed its stdout but kept running; its process group was killed")
                                  : "server exited (" + how.describe() + ")");
      };
      try {
        auto spawned = st.io.reactor->spawn(spawn, std::move(ev));
        st.process = spawned.id;
        st.pid = static_cast<int32_t>(spawned.pid);
        if (spawned.sandbox) sandbox_started(self, *spawned.sandbox);
      } catch (const std::exception& e) {
        st.transport_ended = true;
        fail(self, std::string("spawn failed: ") + e.what());
        return;
      }
      break;
    }
    case transport_kind::http: {
      io::http_events ev;
      ev.on_message = [weak](std::string msg) { send_to(weak, atom::http_msg_v, std::move(msg)); };
      ev.on_session_expired = [weak] { send_to(weak, atom::http_gone_v); };
      ev.on_error = [weak](std::string reason) { send_to(weak, atom::http_err_v, std::move(reason)); };
      ev.on_auth_required = [weak](std::string reason) { send_to(weak, atom::http_auth_v, std::move(reason)); };
      ev.on_closed = [weak] { send_to(weak, atom::http_closed_v); };
      std::string url = server.http_url ? *server.http_url : server.url.value_or("");
      // The session enforces call timeouts; the HTTP idle timeout must not
      // fire first.
      io::http_transport_options ho;
      ho.request_timeout = o.call_timeout.value_or(default_call_timeout) + std::chrono::seconds(30);
      if (st.io.http_auth) ho.auth = st.io.http_auth(server);
      ho.proxy = server.proxy.value_or("");
      ho.ca_file = server.ca_file.value_or("");
      st.http = std::make_unique<io::http_transport>(url, server.headers, std::move(ev), *st.io.http, ho);
      break;
    }
    case transport_kind::sse: {
      // The same messages as streamable HTTP: a legacy server's stream that
      // ends is an http_err, a failure the pool restarts like any other.
      io::sse_events ev;
      ev.on_message = [weak](std::string msg) { send_to(weak, atom::http_msg_v, std::move(msg)); };
      ev.on_error = [weak](std::string reason) { send_to(weak, atom::http_err_v, std::move(reason)); };
      ev.on_closed = [weak] { send_to(weak, atom::http_closed_v); };
      io::sse_transport_options so;
      so.proxy = server.proxy.value_or("");
      so.ca_file = server.ca_file.value_or("");
      st.sse = std::make_unique<io::sse_transport>(server.url.value_or(""), server.headers, std::move(ev), *st.io.http, so);
      break;
    }
    case transport_kind::unknown:
      st.transport_ended = true;
      fail(self, "no transport configured: set `command` (stdio), `httpUrl` (streamable HTTP) or `url` (legacy HTTP+SSE)");
      return;
  }
  apply(self, st.session->start(clock::now()));
}

// Why a call or request cannot go out now, if it cannot.
std::optional<caf::error> not_usable(const connection_state& st) {
  if (st.session && st.status == connection_status::connected) return std::nullopt;
  return make_error(errc::not_connected, "server '" + st.cfg.server.name + "' is " + to_string(st.status)
                                           + (st.last_error.empty() ? "" : ": " + st.last_error));
}

connection_info info_of(const connection_state& st) {
  connection_info info;
  info.server = st.cfg.server.name;
  info.connection_id = st.id;
  info.generation = st.cfg.generation;
  info.status = st.status;
  info.pid = st.pid;
  info.sandbox = st.sandbox;
  info.last_error = st.last_error;
  info.stderr_tail.assign(st.stderr_tail.begin(), st.stderr_tail.end());
  if (st.session) {
    info.server_name = st.session->server_info().name;
    info.server_version = st.session->server_info().version;
    info.protocol = st.session->negotiated_protocol().value_or("");
    for (auto& t : st.session->visible_tools())
      info.tools.push_back({t.name, t.description, json_value{t.input_schema}, json_value{t.raw}});
    info.capabilities = json_value{st.session->server_capabilities()};
    for (auto& p : st.session->prompts())
      info.prompts.push_back({p.name, p.description});
  }
  return info;
}

/// A client request other than tools/call; `key`, when not empty, is the
/// call broker's for it, which the inputs its server asks for name.
caf::result<json_value> start_client_request(connection_self self, std::string method, json_value params,
                                             std::string key) {
  auto& st = self->state;
  if (auto why = not_usable(st)) return std::move(*why);
  auto rp = self->make_response_promise<json_value>();
  auto token = st.next_token++;
  st.calls.emplace(token, rp);
  st.request_tokens.insert(token);
  if (!key.empty()) st.call_handles.emplace(token, connection_state::call_handle{std::move(key), {}});
  apply(self, st.session->request(token, std::move(method), std::move(params.value), clock::now()));
  return rp;
}

connection_actor::behavior_type connection(connection_self self, connection_config cfg, connection_io io) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.io = io;
  st.id = connection_id(st.cfg.server);
  start(self);
  return {
    [=](atom::info) { return info_of(self->state); },
    [=](atom::call, std::string tool, json_value args) -> caf::result<json_value> {
      auto& st = self->state;
      if (auto why = not_usable(st)) return std::move(*why);
      auto rp = self->make_response_promise<json_value>();
      auto token = st.next_token++;
      st.calls.emplace(token, rp);
      st.call_tools.emplace(token, tool);
      apply(self, st.session->call_tool(token, std::move(tool), std::move(args.value), clock::now()));
      return rp;
    },
    [=](atom::mcp_request, std::string method, json_value params) -> caf::result<json_value> {
      return start_client_request(self, std::move(method), std::move(params), {});
    },
    [=](atom::mcp_request, std::string method, json_value params, std::string key) -> caf::result<json_value> {
      return start_client_request(self, std::move(method), std::move(params), std::move(key));
    },
    [=](atom::call, std::string tool, json_value args, std::string call_id,
        progress_sink_actor progress) -> caf::result<json_value> {
      auto& st = self->state;
      if (auto why = not_usable(st)) return std::move(*why);
      if (call_id.empty()) return make_error(errc::protocol_error, "a call id must not be empty");
      for (auto& [token, h] : st.call_handles)
        if (h.call_id == call_id)
          return make_error(errc::protocol_error, "a call with id '" + call_id + "' is already in flight");
      auto rp = self->make_response_promise<json_value>();
      auto token = st.next_token++;
      st.calls.emplace(token, rp);
      st.call_tools.emplace(token, tool);
      bool want_progress = static_cast<bool>(progress);
      st.call_handles.emplace(token, connection_state::call_handle{std::move(call_id), std::move(progress)});
      apply(self, st.session->call_tool(token, std::move(tool), std::move(args.value), clock::now(), want_progress));
      return rp;
    },
    [=](atom::cancel, const std::string& call_id) {
      auto& st = self->state;
      for (auto& [token, h] : st.call_handles)
        if (h.call_id == call_id) {
          auto t = token;
          apply(self, st.session->cancel_call(t, "cancelled by the caller"));
          return true;
        }
      return false;
    },
    [=](atom::subscribe, event_sink_actor sink) {
      self->state.cfg.subscribers.push_back(sink);
      // The current status at once: a subscriber that replaces one that died
      // (the runtime's restarted event forwarder) must not wait for the next
      // change to learn it.
      self->send(sink, update_of(self->state));
    },
    [=](atom::filter, tool_filter_spec f) {
      auto& st = self->state;
      if (!st.session) return;
      std::optional<std::vector<std::string>> inc, exc;
      if (f.has_include) inc = f.include;
      if (f.has_exclude) exc = f.exclude;
      apply(self, st.session->set_tool_filter(std::move(inc), std::move(exc)));
    },
    [=](atom::ping) -> caf::result<int64_t> {
      auto& st = self->state;
      if (!st.session || st.status != connection_status::connected)
        return make_error(errc::not_connected, "server '" + st.cfg.server.name + "' is " + to_string(st.status));
      auto rp = self->make_response_promise<int64_t>();
      st.pings.emplace_back(rp, clock::now());
      apply(self, st.session->send_ping(clock::now()));
      return rp;
    },
    [=](atom::stop) -> caf::result<bool> {
      auto& st = self->state;
      auto rp = self->make_response_promise<bool>();
      st.stop_promises.push_back(rp);
      if (st.stopping) return rp;
      st.stopping = true;
      fail_calls(self, "connection is shutting down");
      if (st.transport_ended || (!st.process && !st.http && !st.sse)) {
        finish_stop(self);
        return rp;
      }
      if (st.process) st.io.reactor->shutdown(*st.process);
      else if (st.http) st.http->close();
      else st.sse->close();
      return rp;
    },
    [=](atom::io_out, const std::string& bytes) {
      auto& st = self->state;
      if (st.session) apply(self, st.session->on_bytes(bytes.data(), bytes.size(), clock::now()));
    },
    [=](atom::io_err, std::string& raw) {
      auto& st = self->state;
      auto line = without_secrets(st.cfg.server, std::move(raw));
      spdlog::debug("[{}] stderr: {}", escape_for_display(st.cfg.server.name), escape_for_display(line));
      st.stderr_tail.push_back(replace_invalid_utf8(line));
      while (st.stderr_tail.size() > st.cfg.stderr_lines)
        st.stderr_tail.pop_front();
    },
    [=](atom::io_exit, const std::string& what) {
      auto& st = self->state;
      st.transport_ended = true;
      st.process.reset();
      if (st.stopping) {
        finish_stop(self);
        return;
      }
      std::string reason = what;
      auto tail = stderr_excerpt(st);
      if (!tail.empty()) reason += "; last stderr: " + tail;
      if (st.session) apply(self, st.session->on_transport_closed(reason));
      fail(self, reason);
    },
    [=](atom::http_msg, const std::string& msg) {
      auto& st = self->state;
      if (st.session) apply(self, st.session->on_line(msg, clock::now()));
    },
    [=](atom::http_gone) {
      auto& st = self->state;
      if (st.http_reinitialized || st.stopping) {
        fail(self, "HTTP session expired again after re-initializing");
        return;
      }
      // The server forgot our session (restart, eviction): one fresh start.
      st.http_reinitialized = true;
      fail_calls(self, "HTTP session expired; re-initializing");
      st.http->reset_session();
      st.status = connection_status::connecting;
      withdraw_host_requests(self);
      ++st.session_epoch;
      st.session = std::make_unique<mcp_session>(st.session_options);
      publish(self);
      apply(self, st.session->start(clock::now()));
    },
    [=](atom::http_err, const std::string& reason) {
      auto& st = self->state;
      if (st.stopping) return;
      if (st.session) apply(self, st.session->on_transport_closed(reason));
      fail(self, reason);
    },
    [=](atom::http_auth, const std::string& reason) {
      auto& st = self->state;
      if (st.stopping) return;
      // The status first: what the session's close leads to must not turn
      // it into a plain error the pool would restart.
      fail(self, reason, connection_status::needs_auth);
      if (st.session) apply(self, st.session->on_transport_closed(reason));
    },
    [=](atom::http_closed) {
      auto& st = self->state;
      st.transport_ended = true;
      if (st.stopping) finish_stop(self);
    },
    [=](atom::tick) {
      auto& st = self->state;
      st.tick_at.reset();
      if (st.session) apply(self, st.session->on_tick(clock::now()));
    },
    [=](atom::roots, std::vector<mcp_root>& roots) {
      auto& st = self->state;
      // Capabilities are fixed at initialize: a connection that offered no
      // roots keeps offering none (also after an HTTP re-initialize).
      if (!st.session_options.features.roots) return;
      st.session_options.features.roots = roots;
      if (st.session) apply(self, st.session->set_roots(std::move(roots)));
    },
  };
}

} // namespace

connection_actor spawn_connection(caf::actor_system& sys, connection_config cfg, connection_io io) {
  return sys.spawn(connection, std::move(cfg), io);
}

} // namespace mcprt
