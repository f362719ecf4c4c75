#include "core/mcp_session.hpp"

#include <cmath>

#include "core/ascii.hpp"
#include "core/elicitation.hpp"
#include "core/untrusted_text.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

namespace mcprt {

using nlohmann::json;

namespace {
// A server that refused subscriptions/listen is asked again after this.
constexpr std::chrono::milliseconds listen_retry_after_refusal{30000};
bool feature_present(const nlohmann::json& caps, const char* capability, const char* feature);

// LSP's RequestCancelled; JSON-RPC and MCP define no code for a call the
// client itself abandoned, and this one is widely recognised.
constexpr int error_request_cancelled = -32800;

std::string ms_string(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " ms";
}

bool is_valid_id(const json& id) {
  return id.is_string() || id.is_number_integer();
}

// What makes a JSON value a JSON-RPC message rather than a stray log line
// that happens to be JSON (pino and friends write objects to stdout too).
bool is_message(const json& m) {
  if (!m.is_object())
    return false;
  auto v = m.find("jsonrpc");
  if (v == m.end() || !v->is_string() || v->get_ref<const std::string&>() != "2.0")
    return false;
  auto method = m.find("method");
  if (method != m.end()) {
    if (!method->is_string())
      return false;
    auto id = m.find("id");
    return id == m.end() || is_valid_id(*id);
  }
  auto id = m.find("id");
  if (id == m.end() || !(is_valid_id(*id) || id->is_null()))
    return false;
  return m.contains("result") || m.contains("error");
}

std::optional<std::int64_t> integer_id(const json& id) {
  if (id.is_number_unsigned()) {
    auto u = id.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (id.is_number_integer())
    return id.get<std::int64_t>();
  return std::nullopt;
}

std::string session_string_field(const json& obj, const char* key) {
  if (!obj.is_object())
    return {};
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

rpc_error parse_error(const json& e) {
  rpc_error out;
  out.code = -32603;
  out.message = "unknown error";
  if (!e.is_object())
    return out;
  if (auto c = e.find("code"); c != e.end() && c->is_number_integer()) {
    auto v = c->get<std::int64_t>();
    if (v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max())
      out.code = static_cast<int>(v);
  }
  if (auto m = e.find("message"); m != e.end() && m->is_string())
    out.message = m->get<std::string>();
  if (auto d = e.find("data"); d != e.end())
    out.data = *d;
  return out;
}

bool capability_present(const json& caps, const char* key) {
  if (!caps.is_object())
    return false;
  auto it = caps.find(key);
  return it != caps.end() && (it->is_object() || (it->is_boolean() && it->get<bool>()));
}

const char* list_method(bool tools) {
  return tools ? "tools/list" : "prompts/list";
}

// Server text quoted in a failure reason: the reason becomes last_error,
// which every later event and snapshot carries, so it is short, on one line
// and valid UTF-8.
std::string quote_server_text(std::string_view server_text, std::size_t max_bytes = 200) {
  return line_preview(server_text, max_bytes);
}

// Reads a message's envelope (is it a response, and to which id?) without
// building the message, for text that parse_bounded_json refused as too
// deep or too large. nlohmann's SAX parser keeps its own stack on the heap,
// so any depth is safe here.
class envelope_probe {
public:
  using json_t = json;
  bool null() { return top_value(); }
  bool boolean(bool) { return top_value(); }
  bool number_integer(json::number_integer_t v) {
    if (depth_ == 1 && key_ == "id") id_ = v;
    return top_value();
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (depth_ == 1 && key_ == "id" && v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      id_ = static_cast<std::int64_t>(v);
    return top_value();
  }
  bool number_float(json::number_float_t, const std::string&) { return top_value(); }
  bool string(std::string&) { return top_value(); }
  bool binary(json::binary_t&) { return top_value(); }
  bool start_object(std::size_t) {
    if (depth_ == 0) object_ = true;
    top_value();
    ++depth_;
    return true;
  }
  bool key(std::string& k) {
    if (depth_ == 1) key_ = k;
    return true;
  }
  bool end_object() {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    top_value();
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

  /// The id of a JSON-RPC response (result or error, no method), if it is one.
  std::optional<std::int64_t> response_id() const {
    if (!object_ || method_ || !(result_ || error_)) return std::nullopt;
    return id_;
  }

private:
  bool top_value() {
    if (depth_ == 1) {
      method_ |= key_ == "method";
      result_ |= key_ == "result";
      error_ |= key_ == "error";
    }
    return true;
  }

  std::size_t depth_ = 0;
  std::string key_;
  bool object_ = false, method_ = false, result_ = false, error_ = false;
  std::optional<std::int64_t> id_;
};

} // namespace

bool is_supported_protocol_version(std::string_view v) {
  return std::find(supported_protocol_versions.begin(), supported_protocol_versions.end(), v) !=
         supported_protocol_versions.end();
}

std::chrono::milliseconds discovery_timeout_for(bool remote,
                                                std::optional<std::chrono::milliseconds> configured) {
  if (configured && configured->count() > 0)
    return *configured;
  return remote ? default_remote_discovery_timeout : default_local_discovery_timeout;
}

std::string to_string(session_state s) {
  switch (s) {
    case session_state::created: return "created";
    case session_state::initializing: return "initializing";
    case session_state::discovering: return "discovering";
    case session_state::ready: return "ready";
    case session_state::failed: return "failed";
    case session_state::closed: return "closed";
  }
  return "unknown";
}

std::string to_string(call_outcome o) {
  switch (o) {
    case call_outcome::ok: return "ok";
    case call_outcome::rpc_error: return "rpc_error";
    case call_outcome::timed_out: return "timed_out";
    case call_outcome::cancelled: return "cancelled";
    case call_outcome::rejected: return "rejected";
    case call_outcome::closed: return "closed";
  }
  return "unknown";
}

mcp_session::mcp_session(options opts) : opts_(std::move(opts)), reader_(opts_.limits) {
  opts_.max_list_pages = std::max<std::size_t>(opts_.max_list_pages, 1);
  request_meta_ = {{"io.modelcontextprotocol/protocolVersion", modern_protocol_version},
                   {"io.modelcontextprotocol/clientInfo", {{"name", opts_.client_name}, {"version", opts_.client_version}}},
                   // What the server may ask of us mid-request (as input_required
                   // results at this revision): the same as initialize offers.
                   {"io.modelcontextprotocol/clientCapabilities", client_capabilities()}};
}

bool mcp_session::live() const {
  return state_ != session_state::failed && state_ != session_state::closed;
}

void mcp_session::send_json(session_effects& fx, const json& msg) {
  // `replace`: a caller's argument with broken UTF-8 must not throw here.
  fx.send.push_back(msg.dump(-1, ' ', false, json::error_handler_t::replace));
}

std::optional<std::string> mcp_session::wire_protocol() const {
  if (probing_ || modern_) return std::string(modern_protocol_version);
  return protocol_;
}

void mcp_session::add_request_meta(json& params) const {
  if (!params.is_object()) params = json::object();
  auto& meta = params["_meta"];
  if (!meta.is_object()) {
    meta = request_meta_;
    return;
  }
  for (auto& [key, value] : request_meta_.items())
    meta[key] = value;
}

std::int64_t mcp_session::send_request(session_effects& fx, std::string_view method, json params,
                                       pending_request p, std::vector<std::pair<std::string, std::string>> headers) {
  auto id = next_id_++;
  json msg = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  bool modern = probing_ || modern_;
  if (modern)
    add_request_meta(params);
  if (modern && p.kind == request_kind::call && !p.retry &&
      (method == "tools/call" || method == "prompts/get" || method == "resources/read"))
    p.retry = std::make_shared<const retryable>(retryable{std::string(method), params, headers, 0});
  if (!params.is_null())
    msg["params"] = std::move(params);
  pending_.emplace(id, p);
  // The fields 2026-07-28 mirrors into headers are read here, where the
  // message is built, rather than parsed back out of its text.
  if (modern && opts_.http_headers) {
    auto fields = mcp_request_headers(msg);
    fields.insert(fields.end(), std::make_move_iterator(headers.begin()), std::make_move_iterator(headers.end()));
    fx.send_headers.emplace_back(fx.send.size(), std::move(fields));
  }
  send_json(fx, msg);
  return id;
}

void mcp_session::fail(session_effects& fx, std::string reason) {
  if (!live())
    return;
  // Reasons from the transport quote the server's stderr too.
  reason = replace_invalid_utf8(reason);
  state_ = session_state::failed;
  failure_ = reason;
  fx.failure = reason;
  complete_all_calls(fx, "connection failed: " + reason);
  end_host_requests(fx, "connection failed");
  discovery_deadline_.reset();
}

void mcp_session::complete_all_calls(session_effects& fx, const std::string& why) {
  for (auto& [id, p] : pending_)
    if (p.kind == request_kind::call)
      fx.completed_calls.push_back(
          {p.token, call_outcome::closed, json(), rpc_error{error_connection_closed, why, json()}});
  pending_.clear();
  paged_.clear();
  tools_job_.running = prompts_job_.running = false;
}

session_effects mcp_session::start(time_point now) {
  session_effects fx;
  if (state_ != session_state::created)
    return fx;
  state_ = session_state::initializing;
  discovery_deadline_ = now + opts_.discovery_timeout;
  if (opts_.probe_modern) {
    probing_ = true;
    // Covered by the discovery deadline, as initialize is.
    send_request(fx, "server/discover", json::object(), {request_kind::discover, 0, std::nullopt, {}});
    return fx;
  }
  send_initialize(fx);
  return fx;
}

void mcp_session::send_initialize(session_effects& fx) {
  probing_ = false;
  json params = {{"protocolVersion", latest_protocol_version},
                 {"capabilities", client_capabilities()},
                 {"clientInfo", {{"name", opts_.client_name}, {"version", opts_.client_version}}}};
  // Covered by the discovery deadline, and MCP forbids cancelling it anyway.
  send_request(fx, "initialize", std::move(params), {request_kind::initialize, 0, std::nullopt, {}});
}

void mcp_session::on_discover_result(const json& result, session_effects& fx, time_point now) {
  bool offers_modern = false, offers_legacy = false, lists = false;
  if (result.is_object())
    if (auto v = result.find("supportedVersions"); v != result.end() && v->is_array())
      for (auto& x : *v)
        if (x.is_string()) {
          lists = true;
          offers_modern = offers_modern || x.get_ref<const std::string&>() == modern_protocol_version;
          offers_legacy = offers_legacy || is_supported_protocol_version(x.get_ref<const std::string&>());
        }
  if (!offers_modern) {
    // A server that offers only earlier revisions is spoken to in one of
    // those, and so is one whose answer is no discovery result at all (a
    // legacy server answering whatever it is asked); one that lists only
    // revisions we do not speak cannot be.
    if (lists && !offers_legacy) {
      fail(fx, "server/discover offers no revision mcprt speaks (it speaks " + std::string(modern_protocol_version)
                 + " and " + std::string(latest_protocol_version) + " down to 2024-11-05)");
      return;
    }
    send_initialize(fx);
    return;
  }
  probing_ = false;
  modern_ = true;
  protocol_ = std::string(modern_protocol_version);
  if (auto c = result.find("capabilities"); c != result.end() && c->is_object())
    server_caps_ = *c;
  const json* si = nullptr;
  if (auto m = result.find("_meta"); m != result.end() && m->is_object())
    if (auto i = m->find("io.modelcontextprotocol/serverInfo"); i != m->end() && i->is_object()) si = &*i;
  if (!si)
    if (auto i = result.find("serverInfo"); i != result.end() && i->is_object()) si = &*i;
  if (si) {
    server_info_.raw = *si;
    server_info_.name = session_string_field(*si, "name");
    server_info_.version = session_string_field(*si, "version");
  }
  if (auto ins = result.find("instructions"); ins != result.end() && ins->is_string())
    instructions_ = ins->get<std::string>();
  begin_discovery(fx, now);
}

void mcp_session::on_discover_error(const json& error, session_effects& fx) {
  auto e = parse_error(error);
  if (e.code == error_unsupported_protocol_version) {
    // A modern server that does not take what we sent: our revision again
    // when it lists it (once: a server that keeps refusing what it lists
    // is not going to change its mind), an earlier one it lists through
    // initialize, else there is nothing to speak.
    bool legacy = false, modern = false;
    if (e.data.is_object())
      if (auto v = e.data.find("supported"); v != e.data.end() && v->is_array())
        for (auto& x : *v)
          if (x.is_string()) {
            modern = modern || x.get_ref<const std::string&>() == modern_protocol_version;
            legacy = legacy || is_supported_protocol_version(x.get_ref<const std::string&>());
          }
    if (modern && !discover_retried_) {
      discover_retried_ = true;
      send_request(fx, "server/discover", json::object(), {request_kind::discover, 0, std::nullopt, {}});
      return;
    }
    if (!legacy) {
      fail(fx, "server supports none of the revisions mcprt speaks: " + quote_server_text(e.message));
      return;
    }
  }
  // Anything else is a server from before 2026-07-28 (or one that wants
  // the handshake): initialize.
  send_initialize(fx);
}

session_effects mcp_session::on_bytes(const char* data, std::size_t n, time_point now) {
  session_effects fx;
  if (!live())
    return fx;
  std::vector<std::string> lines;
  reader_.feed(data, n, lines);
  for (const auto& line : lines) {
    auto one = on_line(line, now);
    for (auto& [index, headers] : one.send_headers)
      fx.send_headers.emplace_back(fx.send.size() + index, std::move(headers));
    fx.send.insert(fx.send.end(), std::make_move_iterator(one.send.begin()),
                   std::make_move_iterator(one.send.end()));
    fx.ready |= one.ready;
    fx.tools_changed |= one.tools_changed;
    fx.prompts_changed |= one.prompts_changed;
    fx.pong |= one.pong;
    fx.completed_calls.insert(fx.completed_calls.end(),
                              std::make_move_iterator(one.completed_calls.begin()),
                              std::make_move_iterator(one.completed_calls.end()));
    fx.host_requests.insert(fx.host_requests.end(),
                            std::make_move_iterator(one.host_requests.begin()),
                            std::make_move_iterator(one.host_requests.end()));
    fx.withdrawn_host_requests.insert(fx.withdrawn_host_requests.end(),
                                      one.withdrawn_host_requests.begin(),
                                      one.withdrawn_host_requests.end());
    // A server repeating one update in a burst costs the host one event.
    for (auto& uri : one.resources_updated)
      if (std::find(fx.resources_updated.begin(), fx.resources_updated.end(), uri) ==
          fx.resources_updated.end())
        fx.resources_updated.push_back(std::move(uri));
    fx.resources_changed |= one.resources_changed;
    fx.progress.insert(fx.progress.end(), std::make_move_iterator(one.progress.begin()),
                       std::make_move_iterator(one.progress.end()));
    fx.logs.insert(fx.logs.end(), std::make_move_iterator(one.logs.begin()), std::make_move_iterator(one.logs.end()));
    if (one.failure) {
      fx.failure = std::move(one.failure);
      return fx;
    }
  }
  // Lines before an oversized one were still good, so they go first.
  if (reader_.error())
    fail(fx, *reader_.error());
  return fx;
}

session_effects mcp_session::on_line(std::string_view line, time_point now) {
  session_effects fx;
  if (!live())
    return fx;
  json_limits limits;
  limits.max_bytes = opts_.limits.max_line_bytes;
  limits.max_depth = opts_.max_message_depth;
  limits.replace_invalid_utf8 = true;
  auto parsed = parse_bounded_json(line, limits);
  auto& msg = parsed.value;
  bool valid = parsed.ok() &&
               (is_message(msg) ||
                (msg.is_array() && !msg.empty() && std::all_of(msg.begin(), msg.end(), is_message)));
  if (!parsed.ok() && refuse_answer(line, parsed.error->message, fx, now))
    return fx;
  if (!valid) {
    reader_.note_garbage(line);
    if (reader_.error())
      fail(fx, *reader_.error());
    return fx;
  }
  reader_.note_valid();
  try {
    if (msg.is_array()) {
      // A JSON-RPC batch (allowed by 2025-03-26).
      for (const auto& m : msg) {
        handle_message(m, fx, now);
        if (!live())
          break;
      }
    } else {
      handle_message(msg, fx, now);
    }
  } catch (const json::exception& e) {
    // Every access above is type-checked; should one slip through, fail
    // this connection loudly rather than take the process down.
    fail(fx, std::string("internal error handling a server message: ") + e.what());
  }
  return fx;
}

bool mcp_session::refuse_answer(std::string_view line, const std::string& why, session_effects& fx,
                                time_point now) {
  envelope_probe probe;
  auto text = replace_invalid_utf8(line);
  if (!json::sax_parse(text.begin(), text.end(), &probe))
    return false; // not JSON at all: garbage
  auto id = probe.response_id();
  auto it = id ? pending_.find(*id) : pending_.end();
  if (it == pending_.end())
    return false;
  auto p = it->second;
  pending_.erase(it);
  auto reason = "the server's answer was refused: " + why;
  switch (p.kind) {
    case request_kind::initialize:
      fail(fx, "initialize failed: " + reason);
      break;
    case request_kind::discover:
      send_initialize(fx); // no answer we can read: try the handshake
      break;
    case request_kind::list_tools:
    case request_kind::list_prompts:
      on_list_error(p.kind, std::string(list_method(p.kind == request_kind::list_tools)) + " failed: " + reason,
                    fx, now);
      break;
    case request_kind::call:
      paged_.erase(p.token);
      fx.completed_calls.push_back(
          {p.token, call_outcome::rpc_error, json(), rpc_error{error_response_refused, reason, json()}});
      break;
    case request_kind::ping:
      fx.pong = true; // an answer all the same: the server is alive
      break;
    case request_kind::listen:
      listen_id_.reset();
      listen_due_ = now + listen_retry_after_refusal;
      break;
  }
  return true;
}

void mcp_session::handle_message(const json& msg, session_effects& fx, time_point now) {
  if (msg.contains("method")) {
    if (msg.contains("id"))
      handle_request(msg, fx, now);
    else
      handle_notification(msg, fx, now);
  } else {
    handle_response(msg, fx, now);
  }
}

json mcp_session::client_capabilities() const {
  json caps = json::object();
  const auto& f = opts_.features;
  if (f.roots)
    caps["roots"] = {{"listChanged", true}};
  // URL mode needs someone to show the user a URL to open: only a host
  // (`ask`) can, accept-defaults cannot.
  if (f.elicitation == elicitation_policy::accept_defaults)
    caps["elicitation"] = {{"form", json::object()}};
  else if (f.elicitation == elicitation_policy::ask)
    caps["elicitation"] = {{"form", json::object()}, {"url", json::object()}};
  if (f.sampling)
    caps["sampling"] = json::object();
  return caps;
}

void mcp_session::respond(session_effects& fx, const json& id, json result) {
  send_json(fx, {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}});
}

void mcp_session::respond_error(session_effects& fx, const json& id, int code,
                                const std::string& message, json data) {
  json err = {{"code", code}, {"message", message}};
  if (!data.is_null())
    err["data"] = std::move(data);
  send_json(fx, {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(err)}});
}

void mcp_session::handle_request(const json& msg, session_effects& fx, time_point now) {
  const auto& method = msg.at("method").get_ref<const std::string&>();
  const auto& id = msg.at("id");
  static const json no_params = json::object();
  auto p = msg.find("params");
  const json& params = p != msg.end() ? *p : no_params;
  const auto& f = opts_.features;
  if (method == "ping") {
    respond(fx, id, json::object());
    return;
  }
  if (method == "roots/list" && f.roots) {
    respond(fx, id, roots_answer());
    return;
  }
  if (method == "elicitation/create") {
    answer_elicitation(id, params, fx, now);
    return;
  }
  if (method == "sampling/createMessage" && f.sampling) {
    ask_host(id, method, params, fx, now);
    return;
  }
  // Not advertised (or not MCP at all); answering at once keeps a server
  // that asks anyway from waiting forever.
  respond_error(fx, id, error_method_not_found, "Method not found", {{"method", method}});
}

namespace {

// What a host is shown: form mode (the default when `mode` is absent), or
// URL mode with an http(s) URL of bounded length and, as a server's request
// (2025-11-25), an elicitation id; 2026-07-28's input has none, its retry
// says the user is done. The URL is the server's choice and the host opens
// it for the user, so nothing else (no `javascript:`, `file:`, custom
// scheme) gets that far.
bool host_can_show_elicitation(const json& params, bool needs_id) {
  auto mode = params.find("mode");
  if (mode == params.end() || (mode->is_string() && *mode == "form")) return true;
  if (!(mode->is_string() && *mode == "url")) return false;
  auto url = params.find("url");
  auto eid = params.find("elicitationId");
  if (url == params.end() || !url->is_string()) return false;
  if (eid == params.end() ? needs_id : !eid->is_string() || eid->get_ref<const std::string&>().size() > 256)
    return false;
  const auto& u = url->get_ref<const std::string&>();
  if (u.size() > max_elicitation_url_bytes) return false;
  auto scheme = ascii_lower(std::string_view(u).substr(0, u.find(':')));
  if (scheme != "https" && scheme != "http") return false;
  for (unsigned char c : u)
    if (c <= 0x20 || c == 0x7f) return false;
  return u.compare(scheme.size(), 3, "://") == 0;
}

} // namespace

json mcp_session::roots_answer() const {
  json roots = json::array();
  for (const auto& r : opts_.features.roots.value_or(std::vector<mcp_root>{})) {
    json one = {{"uri", r.uri}};
    if (!r.name.empty())
      one["name"] = r.name;
    roots.push_back(std::move(one));
  }
  return {{"roots", std::move(roots)}};
}

std::optional<json> mcp_session::elicitation_without_host(const json& params, bool input) const {
  switch (opts_.features.elicitation) {
    case elicitation_policy::decline:
      // Declining is an answer the server understands (and may work
      // around), unlike -32601 to a request the spec lets it make.
      return json{{"action", "decline"}};
    case elicitation_policy::accept_defaults:
      return accept_defaults_answer(params);
    case elicitation_policy::ask:
      if (!params.is_object() || !host_can_show_elicitation(params, !input))
        return json{{"action", "decline"}};
      return std::nullopt;
  }
  return json{{"action", "decline"}};
}

void mcp_session::answer_elicitation(const json& id, const json& params, session_effects& fx,
                                     time_point now) {
  if (auto answer = elicitation_without_host(params))
    respond(fx, id, std::move(*answer));
  else
    ask_host(id, "elicitation/create", params, fx, now);
}

void mcp_session::ask_host(const json& id, const std::string& method, const json& params,
                           session_effects& fx, time_point now) {
  if (!params.is_object()) {
    respond_error(fx, id, error_invalid_params, method + " needs params (an object)");
    return;
  }
  if (host_pending_.size() >= opts_.max_pending_host_requests) {
    respond_error(fx, id, -32603,
                  "too many requests waiting for the client's host (" +
                      std::to_string(opts_.max_pending_host_requests) + ")");
    return;
  }
  auto token = next_host_token_++;
  host_pending h{id, method, std::nullopt};
  if (opts_.host_request_timeout)
    h.deadline = now + *opts_.host_request_timeout;
  host_pending_.emplace(token, std::move(h));
  fx.host_requests.push_back({token, method, params});
}

void mcp_session::end_host_requests(session_effects& fx, const std::string& why) {
  for (auto& [token, h] : host_pending_) {
    if (!h.input_of) respond_error(fx, h.id, error_connection_closed, why);
    fx.withdrawn_host_requests.push_back(token);
  }
  host_pending_.clear();
  for (auto& [call, round] : input_rounds_)
    fx.completed_calls.push_back(
      {round.p.token, call_outcome::closed, json(), rpc_error{error_connection_closed, why, json()}});
  input_rounds_.clear();
}

std::optional<json> mcp_session::take_host_request(std::uint64_t token) {
  auto it = host_pending_.find(token);
  if (it == host_pending_.end() || !live())
    return std::nullopt;
  auto id = it->second.id;
  host_pending_.erase(it);
  return id;
}

session_effects mcp_session::answer_host_request(std::uint64_t token, json result) {
  session_effects fx;
  if (auto h = host_pending_.find(token); h != host_pending_.end() && h->second.input_of && live()) {
    auto call = *h->second.input_of;
    auto key = h->second.input_key;
    host_pending_.erase(h);
    input_answered(call, key, std::move(result), fx);
    return fx;
  }
  if (auto id = take_host_request(token))
    respond(fx, *id, std::move(result));
  return fx;
}

session_effects mcp_session::fail_host_request(std::uint64_t token, rpc_error error) {
  session_effects fx;
  if (auto h = host_pending_.find(token); h != host_pending_.end() && h->second.input_of && live()) {
    auto call = *h->second.input_of;
    auto key = h->second.input_key;
    auto method = h->second.method;
    host_pending_.erase(h);
    // A host that cannot ask the user has declined; one that does not know
    // the request's roots leaves the session's; one that cannot sample
    // leaves the call without what it needs.
    if (method == "elicitation/create") input_answered(call, key, {{"action", "decline"}}, fx);
    else if (method == "roots/list") input_answered(call, key, roots_answer(), fx);
    else input_failed(call, {error.code, "the client's host could not answer: " + replace_invalid_utf8(error.message), json()}, fx);
    return fx;
  }
  if (auto id = take_host_request(token))
    respond_error(fx, *id, error.code, replace_invalid_utf8(error.message), std::move(error.data));
  return fx;
}

session_effects mcp_session::set_roots(std::vector<mcp_root> roots) {
  session_effects fx;
  auto& current = opts_.features.roots;
  if (!current || *current == roots)
    return fx;
  current = std::move(roots);
  // Before notifications/initialized the server has not asked yet, so the
  // list it will ask for is news to nobody.
  // 2026-07-28 has no such notification (nor a session to notify).
  if (!modern_ && (state_ == session_state::discovering || state_ == session_state::ready))
    send_json(fx, {{"jsonrpc", "2.0"}, {"method", "notifications/roots/list_changed"}});
  return fx;
}

void mcp_session::handle_notification(const json& msg, session_effects& fx, time_point now) {
  const auto& method = msg.at("method").get_ref<const std::string&>();
  if (method == "notifications/subscriptions/acknowledged") {
    if (listen_id_) listen_acknowledged_ = true;
    return;
  }
  if (method == "notifications/cancelled") {
    // The server withdrew a request of its own: if the host still has it,
    // tell the host, and send no answer (the spec says not to).
    auto p = msg.find("params");
    if (p == msg.end() || !p->is_object())
      return;
    auto rid = p->find("requestId");
    if (rid == p->end() || !is_valid_id(*rid))
      return;
    for (auto it = host_pending_.begin(); it != host_pending_.end(); ++it)
      if (it->second.id == *rid) {
        fx.withdrawn_host_requests.push_back(it->first);
        host_pending_.erase(it);
        return;
      }
    return;
  }
  if (method == "notifications/progress") {
    auto p = msg.find("params");
    if (p != msg.end() && p->is_object())
      handle_progress(*p, fx);
    return;
  }
  if (method == "notifications/message") {
    auto p = msg.find("params");
    if (p != msg.end() && p->is_object())
      handle_log(*p, fx);
    return;
  }
  // Before initialize is answered the first listing is still to come, so
  // a list_changed then carries no news.
  if (state_ != session_state::discovering && state_ != session_state::ready)
    return;
  if (method == "notifications/tools/list_changed") {
    if (capability_present(server_caps_, "tools"))
      begin_list(request_kind::list_tools, fx, now);
  } else if (method == "notifications/prompts/list_changed") {
    if (capability_present(server_caps_, "prompts"))
      begin_list(request_kind::list_prompts, fx, now);
  } else if (method == "notifications/resources/updated" ||
             method == "notifications/resources/list_changed") {
    handle_resource_notification(method, msg, fx);
  }
  // Everything else (logging, progress, resources, a server cancelling a
  // request we already answered) needs nothing from us.
}

static bool is_log_level(std::string_view s) {
  for (auto l : {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"})
    if (s == l) return true;
  return false;
}

void mcp_session::handle_log(const json& params, session_effects& fx) {
  auto level = params.find("level");
  if (level == params.end() || !level->is_string() || !is_log_level(level->get_ref<const std::string&>()))
    return;
  server_log_message m;
  m.level = level->get<std::string>();
  auto logger = params.find("logger");
  if (logger != params.end() && logger->is_string())
    m.logger = replace_invalid_utf8(logger->get_ref<const std::string&>().substr(0, 256));
  auto data = params.find("data");
  if (data != params.end()) {
    auto text = dump_json(*data);
    if (text.size() > max_log_data_bytes)
      m.data = json{{"truncated", true}, {"bytes", text.size()}};
    else
      m.data = *data;
  }
  fx.logs.push_back(std::move(m));
}

void mcp_session::handle_progress(const json& params, session_effects& fx) {
  // Only our own tokens count, for calls still in flight that asked; the
  // spec wants progress to increase, so a repeat or step back is dropped.
  auto tok = params.find("progressToken");
  if (tok == params.end() || !tok->is_number_integer())
    return;
  auto it = pending_.find(tok->get<std::int64_t>());
  if (it == pending_.end() || it->second.kind != request_kind::call || !it->second.wants_progress)
    return;
  auto prog = params.find("progress");
  if (prog == params.end() || !prog->is_number())
    return;
  double value = prog->get<double>();
  if (!std::isfinite(value) || (it->second.last_progress && value <= *it->second.last_progress))
    return;
  call_progress cp;
  cp.token = it->second.token;
  cp.progress = value;
  auto total = params.find("total");
  if (total != params.end() && total->is_number() && std::isfinite(total->get<double>()))
    cp.total = total->get<double>();
  auto message = params.find("message");
  if (message != params.end() && message->is_string()) {
    const auto& text = message->get_ref<const std::string&>();
    std::size_t cut = std::min(text.size(), opts_.max_progress_message);
    while (cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
      --cut;
    cp.message = replace_invalid_utf8(text.substr(0, cut));
  }
  it->second.last_progress = value;
  fx.progress.push_back(std::move(cp));
}

void mcp_session::handle_response(const json& msg, session_effects& fx, time_point now) {
  auto id = integer_id(msg.at("id"));
  auto it = id ? pending_.find(*id) : pending_.end();
  if (it == pending_.end()) {
    ++unknown_responses_;
    return;
  }
  auto p = it->second;
  pending_.erase(it);
  auto err = msg.find("error");
  bool is_error = err != msg.end();
  const json& result = is_error ? *err : msg.at("result");
  switch (p.kind) {
    case request_kind::discover:
      if (is_error) on_discover_error(*err, fx);
      else on_discover_result(result, fx, now);
      break;
    case request_kind::initialize:
      if (is_error) {
        auto e = parse_error(*err);
        fail(fx, "initialize failed: " + quote_server_text(e.message) + " (code " + std::to_string(e.code) + ")");
      } else {
        on_initialize_result(result, fx, now);
      }
      break;
    case request_kind::list_tools:
    case request_kind::list_prompts:
      if (is_error) {
        auto e = parse_error(*err);
        on_list_error(p.kind,
                      std::string(list_method(p.kind == request_kind::list_tools)) +
                          " failed: " + quote_server_text(e.message) + " (code " + std::to_string(e.code) + ")",
                      fx, now);
      } else {
        on_list_page(p.kind, result, fx, now);
      }
      break;
    case request_kind::call:
      if (is_error) {
        paged_.erase(p.token);
        fx.completed_calls.push_back({p.token, call_outcome::rpc_error, json(), parse_error(*err)});
      } else if (result.is_object() && result.value("resultType", "") == "input_required") {
        on_input_required(p, result, fx, now);
      } else if (!continue_paged(p, result, fx)) {
        fx.completed_calls.push_back({p.token, call_outcome::ok, result, std::nullopt});
      }
      break;
    case request_kind::ping:
      // Even an error answer proves the server is alive and reading.
      fx.pong = true;
      break;
    case request_kind::listen:
      // The server ended the stream (an answer) or refused it: listen again,
      // soon after an end (an error too, once the stream had been
      // acknowledged: it broke, or went silent too long), later after a
      // refusal.
      listen_id_.reset();
      listen_due_ = now + (is_error && !listen_acknowledged_ ? listen_retry_after_refusal
                                                             : std::chrono::milliseconds(1000));
      break;
  }
}

namespace {
// Rounds of input one call may ask for, and inputs in one round.
constexpr int max_input_rounds = 16;
constexpr std::size_t max_input_requests = 16;
} // namespace

// SEP-2322: the server wants input before it answers. Each input is
// answered as a server's request of that method would be (roots from the
// session, elicitation by policy, sampling by the host), and the request
// goes again with them, under a new id, echoing requestState exactly.
void mcp_session::on_input_required(const pending_request& p, const json& result, session_effects& fx,
                                    time_point now) {
  paged_.erase(p.token);
  auto fail_call = [&](int code, const std::string& why) {
    fx.completed_calls.push_back({p.token, call_outcome::rpc_error, json(), rpc_error{code, why, json()}});
  };
  if (!p.retry) return fail_call(error_invalid_params, "the server answered with input_required where it may not");
  if (p.retry->round >= max_input_rounds)
    return fail_call(error_invalid_params, "the server asked for input " + std::to_string(max_input_rounds) +
                                             " rounds running; mcprt gave up on the call");
  auto requests = result.find("inputRequests");
  if (requests == result.end() || !requests->is_object() || requests->empty() ||
      requests->size() > max_input_requests)
    return fail_call(error_invalid_params, "input_required without inputRequests (an object of at most " +
                                             std::to_string(max_input_requests) + ")");
  input_round round;
  round.p = p;
  if (auto st = result.find("requestState"); st != result.end()) {
    if (!st->is_string()) return fail_call(error_invalid_params, "requestState must be a string");
    round.request_state = *st;
  }
  const auto& f = opts_.features;
  std::vector<host_request> asks;
  for (auto& [key, req] : requests->items()) {
    auto m = req.is_object() ? req.find("method") : req.end();
    if (m == req.end() || !m->is_string() || key.size() > 256)
      return fail_call(error_invalid_params, "an inputRequest needs a method (and a key of at most 256 bytes)");
    const auto& method = m->get_ref<const std::string&>();
    json params = req.contains("params") && req["params"].is_object() ? req["params"] : json::object();
    if (method == "roots/list") {
      if (!f.roots) return fail_call(error_missing_client_capability, "the server asked for roots, not offered");
      if (opts_.host_answers_input_roots) asks.push_back({0, method, std::move(params), p.token, key});
      else round.responses[key] = roots_answer();
    } else if (method == "elicitation/create") {
      if (auto answer = elicitation_without_host(params, true))
        round.responses[key] = std::move(*answer);
      else
        asks.push_back({0, method, std::move(params), p.token, key});
    } else if (method == "sampling/createMessage") {
      if (!f.sampling)
        return fail_call(error_missing_client_capability, "the server asked for sampling, not offered");
      asks.push_back({0, method, std::move(params), p.token, key});
    } else {
      return fail_call(error_method_not_found, "the server asked for input by " + quote_server_text(method, 80) +
                                                 ", which mcprt does not answer");
    }
  }
  if (host_pending_.size() + asks.size() > opts_.max_pending_host_requests)
    return fail_call(-32603, "too many requests waiting for the client's host (" +
                               std::to_string(opts_.max_pending_host_requests) + ")");
  round.outstanding = asks.size();
  input_rounds_[p.token] = std::move(round);
  for (auto& a : asks) {
    a.token = next_host_token_++;
    a.round_size = asks.size();
    host_pending h{nullptr, a.method, std::nullopt, p.token, a.input_key};
    if (opts_.host_request_timeout) h.deadline = now + *opts_.host_request_timeout;
    host_pending_.emplace(a.token, std::move(h));
    fx.host_requests.push_back(std::move(a));
  }
  if (asks.empty()) retry_with_inputs(p.token, fx);
}

void mcp_session::input_answered(std::uint64_t call, const std::string& key, json answer, session_effects& fx) {
  auto it = input_rounds_.find(call);
  if (it == input_rounds_.end()) return;
  it->second.responses[key] = std::move(answer);
  if (--it->second.outstanding == 0) retry_with_inputs(call, fx);
}

void mcp_session::input_failed(std::uint64_t call, const rpc_error& error, session_effects& fx) {
  auto it = input_rounds_.find(call);
  if (it == input_rounds_.end()) return;
  auto token = it->second.p.token;
  input_rounds_.erase(it);
  // The round's other inputs are of a call that has ended.
  for (auto h = host_pending_.begin(); h != host_pending_.end();) {
    if (h->second.input_of == call) {
      fx.withdrawn_host_requests.push_back(h->first);
      h = host_pending_.erase(h);
    } else {
      ++h;
    }
  }
  fx.completed_calls.push_back({token, call_outcome::rpc_error, json(), error});
}

void mcp_session::retry_with_inputs(std::uint64_t call, session_effects& fx) {
  auto it = input_rounds_.find(call);
  if (it == input_rounds_.end()) return;
  auto round = std::move(it->second);
  input_rounds_.erase(it);
  if (!live()) return;
  auto next = std::make_shared<retryable>(*round.p.retry);
  ++next->round;
  json params = next->params;
  params["inputResponses"] = std::move(round.responses);
  if (round.request_state) params["requestState"] = *round.request_state;
  else params.erase("requestState");
  auto p = round.p;
  p.retry = next;
  p.last_progress.reset();
  if (p.wants_progress) params["_meta"]["progressToken"] = next_id_;
  auto headers = next->headers;
  send_request(fx, next->method, std::move(params), p, std::move(headers));
}

void mcp_session::on_initialize_result(const json& result, session_effects& fx, time_point now) {
  auto pv = result.is_object() ? result.find("protocolVersion") : result.end();
  if (!result.is_object() || pv == result.end() || !pv->is_string()) {
    fail(fx, "server answered initialize without a protocolVersion");
    return;
  }
  const auto& version = pv->get_ref<const std::string&>();
  if (!is_supported_protocol_version(version)) {
    fail(fx, "server answered with unsupported protocol version " + quote_server_text(version, 40));
    return;
  }
  protocol_ = version;
  if (auto c = result.find("capabilities"); c != result.end() && c->is_object())
    server_caps_ = *c;
  if (auto si = result.find("serverInfo"); si != result.end() && si->is_object()) {
    server_info_.raw = *si;
    server_info_.name = session_string_field(*si, "name");
    server_info_.version = session_string_field(*si, "version");
  }
  if (auto ins = result.find("instructions"); ins != result.end() && ins->is_string())
    instructions_ = ins->get<std::string>();
  send_json(fx, {{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  begin_discovery(fx, now);
}

void mcp_session::begin_discovery(session_effects& fx, time_point now) {
  state_ = session_state::discovering;
  if (capability_present(server_caps_, "tools"))
    begin_list(request_kind::list_tools, fx, now);
  if (capability_present(server_caps_, "prompts"))
    begin_list(request_kind::list_prompts, fx, now);
  maybe_ready(fx);
}

void mcp_session::begin_list(request_kind kind, session_effects& fx, time_point now) {
  auto& j = job(kind);
  if (j.running) {
    j.rerun = true;
    return;
  }
  if (state_ == session_state::ready) {
    if (j.relisted_at && now < *j.relisted_at + opts_.relist_interval) {
      j.due_at = *j.relisted_at + opts_.relist_interval;
      j.rerun = false;
      return;
    }
    j.relisted_at = now;
  }
  j.due_at.reset();
  j.running = true;
  j.rerun = false;
  j.pages = 0;
  j.items = json::array();
  request_page(kind, std::nullopt, fx, now);
}

void mcp_session::request_page(request_kind kind, const std::optional<std::string>& cursor,
                               session_effects& fx, time_point now) {
  pending_request p{kind, 0, std::nullopt, opts_.discovery_timeout};
  // During discovery the discovery deadline bounds the whole listing; a
  // re-list on a ready connection gets the same budget per page.
  if (state_ == session_state::ready)
    p.deadline = now + opts_.discovery_timeout;
  json params = cursor ? json{{"cursor", *cursor}} : json();
  job(kind).request_id =
      send_request(fx, list_method(kind == request_kind::list_tools), std::move(params), p);
}

void mcp_session::on_list_page(request_kind kind, const json& result, session_effects& fx,
                               time_point now) {
  bool tools = kind == request_kind::list_tools;
  auto& j = job(kind);
  const char* key = tools ? "tools" : "prompts";
  auto items = result.is_object() ? result.find(key) : result.end();
  if (!result.is_object() || items == result.end() || !items->is_array()) {
    on_list_error(kind,
                  std::string("malformed ") + list_method(tools) + " result: no '" + key +
                      "' array",
                  fx, now);
    return;
  }
  for (const auto& item : *items)
    j.items.push_back(item);
  ++j.pages;
  auto next = result.find("nextCursor");
  if (next != result.end() && next->is_string() && !next->get_ref<const std::string&>().empty()) {
    if (j.pages >= opts_.max_list_pages) {
      on_list_error(kind,
                    std::string("server kept paginating ") + list_method(tools) + " past " +
                        std::to_string(opts_.max_list_pages) + " pages",
                    fx, now);
      return;
    }
    request_page(kind, next->get<std::string>(), fx, now);
    return;
  }
  finish_list(kind, fx, now);
}

void mcp_session::finish_list(request_kind kind, session_effects& fx, time_point now) {
  auto& j = job(kind);
  j.running = false;
  j.request_id.reset();
  j.done_once = true;
  std::set<std::string> seen;
  if (kind == request_kind::list_tools) {
    std::vector<mcp_tool> next;
    param_headers_.clear();
    rejected_tools_.clear();
    for (const auto& item : j.items) {
      auto name = session_string_field(item, "name");
      // A nameless tool cannot be called; a duplicate would be ambiguous.
      if (name.empty() || !seen.insert(name).second)
        continue;
      mcp_tool t;
      t.name = std::move(name);
      t.description = session_string_field(item, "description");
      auto schema = item.find("inputSchema");
      t.input_schema = schema != item.end() && schema->is_object() ? *schema
                                                                   : json{{"type", "object"}};
      if (modern_ && opts_.http_headers) {
        std::string why;
        auto headers = tool_param_headers(t.input_schema, &why);
        if (!headers) {
          if (rejected_tools_.size() < 1000) rejected_tools_.emplace(t.name, why);
          continue;
        }
        if (!headers->empty()) param_headers_.emplace(t.name, std::move(*headers));
      }
      t.raw = item;
      next.push_back(std::move(t));
    }
    auto before = visible_tools();
    tools_ = std::move(next);
    if (state_ == session_state::ready && visible_tools() != before)
      fx.tools_changed = true;
  } else {
    std::vector<mcp_prompt> next;
    for (const auto& item : j.items) {
      auto name = session_string_field(item, "name");
      if (name.empty() || !seen.insert(name).second)
        continue;
      next.push_back({std::move(name), session_string_field(item, "description"), item});
    }
    if (state_ == session_state::ready && next != prompts_)
      fx.prompts_changed = true;
    prompts_ = std::move(next);
  }
  j.items = json::array();
  if (j.rerun)
    begin_list(kind, fx, now);
  else
    maybe_ready(fx);
}

void mcp_session::on_list_error(request_kind kind, const std::string& why, session_effects& fx,
                                time_point now) {
  auto& j = job(kind);
  // Tools are what the connection is for: without a first list it is
  // useless. Prompts are optional (the reference shows none and carries
  // on), and a failed re-list keeps the last good list.
  if (kind == request_kind::list_tools && !j.done_once) {
    fail(fx, why);
    return;
  }
  j.running = false;
  j.request_id.reset();
  j.items = json::array();
  if (j.rerun)
    begin_list(kind, fx, now);
  else
    maybe_ready(fx);
}

void mcp_session::maybe_ready(session_effects& fx) {
  if (state_ != session_state::discovering || tools_job_.running || prompts_job_.running)
    return;
  state_ = session_state::ready;
  discovery_deadline_.reset();
  fx.ready = true;
  if (modern_ && opts_.listen_modern)
    begin_listen(fx);
}

// 2026-07-28 has no GET stream and no resources/subscribe: what changes
// comes on one long-lived subscriptions/listen, whose filter names what the
// server offers and the resources subscribed to.
void mcp_session::begin_listen(session_effects& fx) {
  if (!live() || listen_id_)
    return;
  json filter = json::object();
  if (feature_present(server_caps_, "tools", "listChanged")) filter["toolsListChanged"] = true;
  if (feature_present(server_caps_, "prompts", "listChanged")) filter["promptsListChanged"] = true;
  if (feature_present(server_caps_, "resources", "listChanged")) filter["resourcesListChanged"] = true;
  if (feature_present(server_caps_, "resources", "subscribe") && !subscriptions_.empty())
    filter["resourceSubscriptions"] = json(std::vector<std::string>(subscriptions_.begin(), subscriptions_.end()));
  if (filter.empty())
    return;
  listen_acknowledged_ = false;
  listen_id_ = send_request(fx, "subscriptions/listen", {{"notifications", std::move(filter)}},
                            {request_kind::listen, 0, std::nullopt, {}});
}

void mcp_session::end_listen(session_effects& fx, const std::string& why) {
  if (!listen_id_)
    return;
  pending_.erase(*listen_id_);
  send_json(fx, {{"jsonrpc", "2.0"},
                 {"method", "notifications/cancelled"},
                 {"params", {{"requestId", *listen_id_}, {"reason", why}}}});
  listen_id_.reset();
}

session_effects mcp_session::on_tick(time_point now) {
  session_effects fx;
  if (!live())
    return fx;
  if (discovery_deadline_ && now >= *discovery_deadline_ &&
      (state_ == session_state::initializing || state_ == session_state::discovering)) {
    fail(fx, "discovery timed out after " + ms_string(opts_.discovery_timeout));
    return fx;
  }
  for (auto kind : {request_kind::list_tools, request_kind::list_prompts}) {
    auto& j = job(kind);
    if (j.due_at && now >= *j.due_at && !j.running && state_ == session_state::ready) {
      j.due_at.reset();
      begin_list(kind, fx, now);
    }
  }
  std::vector<std::int64_t> expired;
  for (const auto& [id, p] : pending_)
    if (p.deadline && now >= *p.deadline)
      expired.push_back(id);
  for (auto id : expired) {
    auto it = pending_.find(id);
    if (it == pending_.end())
      continue;
    auto p = it->second;
    pending_.erase(it);
    auto reason = "timed out after " + ms_string(p.timeout);
    switch (p.kind) {
      case request_kind::call:
        paged_.erase(p.token);
        send_json(fx, {{"jsonrpc", "2.0"},
                       {"method", "notifications/cancelled"},
                       {"params", {{"requestId", id}, {"reason", "Request " + reason}}}});
        fx.completed_calls.push_back({p.token, call_outcome::timed_out, json(),
                                      rpc_error{error_request_timeout, "Request " + reason, json()}});
        break;
      case request_kind::list_tools:
      case request_kind::list_prompts:
        send_json(fx, {{"jsonrpc", "2.0"},
                       {"method", "notifications/cancelled"},
                       {"params", {{"requestId", id}, {"reason", "Request " + reason}}}});
        on_list_error(p.kind,
                      std::string(list_method(p.kind == request_kind::list_tools)) + " " + reason,
                      fx, now);
        break;
      case request_kind::ping:
        fail(fx, "server did not answer ping within " + ms_string(p.timeout));
        return fx;
      case request_kind::initialize:
      case request_kind::discover:
      case request_kind::listen:
        break;
    }
    if (!live())
      return fx;
  }
  if (listen_due_ && now >= *listen_due_ && state_ == session_state::ready) {
    listen_due_.reset();
    begin_listen(fx);
  }
  for (auto it = host_pending_.begin(); it != host_pending_.end();) {
    if (!it->second.deadline || now < *it->second.deadline) {
      ++it;
      continue;
    }
    auto why = "the client's host did not answer within " + ms_string(*opts_.host_request_timeout);
    auto h = std::move(it->second);
    fx.withdrawn_host_requests.push_back(it->first);
    it = host_pending_.erase(it);
    if (h.input_of) {
      if (h.method == "elicitation/create") input_answered(*h.input_of, h.input_key, {{"action", "decline"}}, fx);
      else if (h.method == "roots/list") input_answered(*h.input_of, h.input_key, roots_answer(), fx);
      else input_failed(*h.input_of, {error_request_timeout, why, json()}, fx);
      it = host_pending_.begin(); // input_failed may have taken others
      continue;
    }
    if (h.method == "elicitation/create")
      respond(fx, h.id, {{"action", "decline"}});
    else
      respond_error(fx, h.id, error_request_timeout, why);
  }
  return fx;
}

session_effects mcp_session::call_tool(std::uint64_t token, std::string name, json arguments,
                                       time_point now) {
  return call_tool(token, std::move(name), std::move(arguments), now, false);
}

session_effects mcp_session::call_tool(std::uint64_t token, std::string name, json arguments,
                                       time_point now, bool want_progress) {
  session_effects fx;
  auto reject = [&](int code, const std::string& message) {
    fx.completed_calls.push_back(
        {token, call_outcome::rejected, json(), rpc_error{code, replace_invalid_utf8(message), json()}});
    return fx;
  };
  if (state_ == session_state::failed)
    return reject(error_connection_closed, "connection failed: " + failure_.value_or(""));
  if (state_ != session_state::ready)
    return reject(error_not_ready, "server is not ready (state: " + to_string(state_) + ")");
  auto it = std::find_if(tools_.begin(), tools_.end(),
                         [&](const mcp_tool& t) { return t.name == name; });
  if (it == tools_.end())
    return reject(error_invalid_params, "unknown tool '" + name + "'");
  if (!passes(name, opts_.include_tools, opts_.exclude_tools))
    return reject(error_invalid_params,
                  "tool '" + name + "' is filtered out by includeTools/excludeTools");
  if (arguments.is_null())
    arguments = json::object();
  if (!arguments.is_object())
    return reject(error_invalid_params, "tool arguments must be a JSON object");
  pending_request p{request_kind::call, token, std::nullopt, opts_.call_timeout.value_or(
                                                                 std::chrono::milliseconds{0})};
  if (opts_.call_timeout)
    p.deadline = now + *opts_.call_timeout;
  std::vector<std::pair<std::string, std::string>> headers;
  if (modern_ && opts_.http_headers)
    if (auto h = param_headers_.find(name); h != param_headers_.end())
      headers = param_header_fields(h->second, arguments);
  json params = {{"name", std::move(name)}, {"arguments", std::move(arguments)}};
  if (want_progress) {
    // The request id is unique in the session, so it serves as the token.
    p.wants_progress = true;
    params["_meta"] = {{"progressToken", next_id_}};
  }
  send_request(fx, "tools/call", std::move(params), p, std::move(headers));
  return fx;
}

session_effects mcp_session::cancel_call(std::uint64_t token, std::string reason) {
  session_effects fx;
  auto it = std::find_if(pending_.begin(), pending_.end(), [&](const auto& e) {
    return e.second.kind == request_kind::call && e.second.token == token;
  });
  if (it == pending_.end()) {
    // A call waiting on its host for input has nothing at the server to
    // cancel (a 2026-07-28 server keeps no state between rounds).
    if (input_rounds_.count(token))
      input_failed(token, {error_request_cancelled, replace_invalid_utf8(reason), json()}, fx);
    if (!fx.completed_calls.empty()) fx.completed_calls.back().outcome = call_outcome::cancelled;
    return fx;
  }
  auto id = it->first;
  pending_.erase(it);
  paged_.erase(token);
  send_json(fx, {{"jsonrpc", "2.0"},
                 {"method", "notifications/cancelled"},
                 {"params", {{"requestId", id}, {"reason", reason}}}});
  fx.completed_calls.push_back({token, call_outcome::cancelled, json(),
                                rpc_error{error_request_cancelled, replace_invalid_utf8(reason), json()}});
  return fx;
}

session_effects mcp_session::send_ping(time_point now) {
  session_effects fx;
  if (!live() || state_ == session_state::created)
    return fx;
  // 2026-07-28 has no ping; server/discover, which every server must
  // answer, proves the same.
  send_request(fx, modern_ ? "server/discover" : "ping", json(),
               {request_kind::ping, 0, now + opts_.ping_timeout, opts_.ping_timeout});
  return fx;
}

session_effects mcp_session::set_tool_filter(std::optional<std::vector<std::string>> include,
                                             std::optional<std::vector<std::string>> exclude) {
  session_effects fx;
  auto before = visible_tools();
  opts_.include_tools = std::move(include);
  opts_.exclude_tools = std::move(exclude);
  if (state_ == session_state::ready && visible_tools() != before)
    fx.tools_changed = true;
  return fx;
}

session_effects mcp_session::on_transport_closed(std::string reason) {
  session_effects fx;
  fail(fx, std::move(reason));
  return fx;
}

session_effects mcp_session::close() {
  session_effects fx;
  if (!live())
    return fx;
  state_ = session_state::closed;
  discovery_deadline_.reset();
  complete_all_calls(fx, "connection closed");
  end_host_requests(fx, "connection closed");
  return fx;
}

std::optional<mcp_session::time_point> mcp_session::next_deadline() const {
  if (!live())
    return std::nullopt;
  std::optional<time_point> best;
  if (discovery_deadline_ &&
      (state_ == session_state::initializing || state_ == session_state::discovering))
    best = discovery_deadline_;
  for (const auto& [id, p] : pending_)
    if (p.deadline && (!best || *p.deadline < *best))
      best = p.deadline;
  for (const auto& [token, h] : host_pending_)
    if (h.deadline && (!best || *h.deadline < *best))
      best = h.deadline;
  if (listen_due_ && (!best || *listen_due_ < *best))
    best = listen_due_;
  for (const auto* j : {&tools_job_, &prompts_job_})
    if (j->due_at && (!best || *j->due_at < *best))
      best = j->due_at;
  return best;
}

std::vector<mcp_tool> mcp_session::visible_tools() const {
  return filter_tools(tools_, opts_.include_tools, opts_.exclude_tools);
}

std::size_t mcp_session::in_flight_calls() const {
  return static_cast<std::size_t>(std::count_if(pending_.begin(), pending_.end(), [](const auto& e) {
    return e.second.kind == request_kind::call;
  })) + input_rounds_.size();
}

// -- resources, prompts and completion -------------------------------

namespace {

// Longest URI accepted from a caller or a server: a resource URI is a name,
// not content.
constexpr std::size_t max_resource_uri_bytes = 8192;

struct client_method {
  std::string_view method;
  const char* capability; // must be advertised
  const char* feature;    // a flag inside it that must be true, or nullptr
  const char* list_key;   // the array a paginated listing gathers, or nullptr
};

constexpr client_method client_methods[] = {
    {"resources/list", "resources", nullptr, "resources"},
    {"resources/templates/list", "resources", nullptr, "resourceTemplates"},
    {"resources/read", "resources", nullptr, nullptr},
    {"resources/subscribe", "resources", "subscribe", nullptr},
    {"resources/unsubscribe", "resources", "subscribe", nullptr},
    {"prompts/get", "prompts", nullptr, nullptr},
    {"completion/complete", "completions", nullptr, nullptr},
    {"prompts/list", "prompts", nullptr, "prompts"},
    {"logging/setLevel", "logging", nullptr, nullptr},
};

bool feature_present(const json& caps, const char* capability, const char* feature) {
  if (!capability_present(caps, capability))
    return false;
  if (!feature)
    return true;
  const auto& c = caps.at(capability);
  auto f = c.is_object() ? c.find(feature) : c.end();
  return c.is_object() && f != c.end() && f->is_boolean() && f->get<bool>();
}

bool nonempty_string(const json& obj, const char* key, std::size_t max_bytes = max_resource_uri_bytes) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() && !it->get_ref<const std::string&>().empty() &&
         it->get_ref<const std::string&>().size() <= max_bytes;
}

bool object_of_strings(const json& v) {
  return v.is_object() &&
         std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string(); });
}

// What `method` needs in its params; empty when they do.
std::string check_params(std::string_view method, const json& params) {
  if (method == "resources/list" || method == "resources/templates/list" || method == "prompts/list") {
    auto c = params.find("cursor");
    if (c != params.end() && !c->is_string())
      return "cursor must be a string";
    return {};
  }
  if (method == "resources/read" || method == "resources/subscribe" ||
      method == "resources/unsubscribe")
    return nonempty_string(params, "uri") ? std::string()
                                          : "uri must be a non-empty string of at most " +
                                                std::to_string(max_resource_uri_bytes) + " bytes";
  if (method == "prompts/get") {
    if (!nonempty_string(params, "name"))
      return "name must be a non-empty string";
    auto a = params.find("arguments");
    if (a != params.end() && !a->is_null() && !object_of_strings(*a))
      return "arguments must be an object of strings";
    return {};
  }
  if (method == "logging/setLevel") {
    auto l = params.find("level");
    return l != params.end() && l->is_string() && is_log_level(l->get_ref<const std::string&>())
               ? std::string()
               : "level must be one of debug, info, notice, warning, error, critical, alert, emergency";
  }
  if (method == "completion/complete") {
    auto ref = params.find("ref");
    if (ref == params.end() || !ref->is_object() || !nonempty_string(*ref, "type"))
      return "ref must be an object with a type (\"ref/prompt\" or \"ref/resource\")";
    auto arg = params.find("argument");
    if (arg == params.end() || !arg->is_object() || !nonempty_string(*arg, "name") ||
        !arg->contains("value") || !arg->at("value").is_string())
      return "argument must be an object with a name and a string value";
    auto ctx = params.find("context");
    if (ctx != params.end() && !ctx->is_null()) {
      auto args = ctx->is_object() ? ctx->find("arguments") : ctx->end();
      if (!ctx->is_object() || (args != ctx->end() && !object_of_strings(*args)))
        return "context must be an object whose arguments are strings";
    }
    return {};
  }
  return {};
}

} // namespace

session_effects mcp_session::request(std::uint64_t token, std::string method, json params,
                                     time_point now) {
  session_effects fx;
  auto reject = [&](int code, const std::string& message) {
    fx.completed_calls.push_back(
        {token, call_outcome::rejected, json(), rpc_error{code, replace_invalid_utf8(message), json()}});
    return fx;
  };
  auto rule = std::find_if(std::begin(client_methods), std::end(client_methods),
                           [&](const client_method& m) { return m.method == method; });
  if (rule == std::end(client_methods))
    return reject(error_method_not_found,
                  "'" + quote_server_text(method, 80) + "' is not a request mcprt sends for a host");
  if (state_ == session_state::failed)
    return reject(error_connection_closed, "connection failed: " + failure_.value_or(""));
  if (state_ != session_state::ready)
    return reject(error_not_ready, "server is not ready (state: " + to_string(state_) + ")");
  if (!feature_present(server_caps_, rule->capability, rule->feature))
    return reject(error_method_not_found,
                  "the server does not offer " + method + ": it did not advertise " +
                      (rule->feature ? std::string(rule->capability) + "." + rule->feature
                                     : std::string(rule->capability)));
  if (params.is_null())
    params = json::object();
  if (!params.is_object())
    return reject(error_invalid_params, method + " params must be a JSON object");
  auto bad = check_params(method, params);
  if (!bad.empty())
    return reject(error_invalid_params, method + ": " + bad);
  bool listen_instead = modern_ && (method == "resources/subscribe" || method == "resources/unsubscribe");
  if (listen_instead && !opts_.listen_modern)
    return reject(error_method_not_found,
                  method + " is not part of 2026-07-28, and mcprt keeps no subscriptions/listen open to this "
                           "server");
  if (method == "resources/subscribe") {
    auto uri = params.at("uri").get<std::string>();
    if (!subscriptions_.count(uri) && subscriptions_.size() >= opts_.max_resource_subscriptions)
      return reject(error_invalid_params, "already subscribed to " +
                                              std::to_string(opts_.max_resource_subscriptions) +
                                              " resources, as many as allowed");
    // Noted when asked, not when answered: an update may come before the
    // answer does, and an update for a URI the server refused never comes.
    subscriptions_.insert(std::move(uri));
  } else if (method == "resources/unsubscribe") {
    subscriptions_.erase(params.at("uri").get<std::string>());
  }
  if (listen_instead) {
    // The listen request carries the subscriptions: it is opened again
    // with the new list, and the subscribe is done here.
    end_listen(fx, "the resource subscriptions changed");
    listen_due_.reset();
    begin_listen(fx);
    fx.completed_calls.push_back({token, call_outcome::ok, json::object(), std::nullopt});
    return fx;
  }
  pending_request p{request_kind::call, token, std::nullopt,
                    opts_.call_timeout.value_or(std::chrono::milliseconds{0})};
  // One deadline for a whole listing, however many pages it takes.
  if (opts_.call_timeout)
    p.deadline = now + *opts_.call_timeout;
  if (rule->list_key)
    paged_[token] = paged_request{method, rule->list_key};
  send_request(fx, method, std::move(params), p);
  return fx;
}

bool mcp_session::continue_paged(const pending_request& p, const json& result, session_effects& fx) {
  auto it = paged_.find(p.token);
  if (it == paged_.end())
    return false;
  auto& job = it->second;
  auto items = result.is_object() ? result.find(job.key) : result.end();
  if (!result.is_object() || items == result.end() || !items->is_array()) {
    auto why = "malformed " + job.method + " result: no '" + job.key + "' array";
    paged_.erase(it);
    fx.completed_calls.push_back(
        {p.token, call_outcome::rpc_error, json(), rpc_error{error_response_refused, why, json()}});
    return true;
  }
  for (const auto& item : *items)
    job.items.push_back(item);
  ++job.pages;
  auto next = result.find("nextCursor");
  bool more = next != result.end() && next->is_string() && !next->get_ref<const std::string&>().empty();
  if (more && job.pages < opts_.max_request_pages && job.items.size() < opts_.max_request_items) {
    send_request(fx, job.method, {{"cursor", *next}}, p);
    return true;
  }
  json out = {{job.key, std::move(job.items)}};
  // Cut short by a bound: the caller goes on from here with `cursor`.
  if (more)
    out["nextCursor"] = *next;
  paged_.erase(it);
  fx.completed_calls.push_back({p.token, call_outcome::ok, std::move(out), std::nullopt});
  return true;
}

void mcp_session::handle_resource_notification(const std::string& method, const json& msg,
                                               session_effects& fx) {
  if (method == "notifications/resources/list_changed") {
    if (capability_present(server_caps_, "resources"))
      fx.resources_changed = true;
    return;
  }
  auto p = msg.find("params");
  if (p == msg.end() || !p->is_object())
    return;
  auto uri = p->find("uri");
  // Only URIs we asked about: a server cannot flood the host with made-up
  // ones, and every URI that reaches it passed the caller's bounds.
  if (uri == p->end() || !uri->is_string() || !subscriptions_.count(uri->get<std::string>()))
    return;
  const auto& u = uri->get_ref<const std::string&>();
  if (std::find(fx.resources_updated.begin(), fx.resources_updated.end(), u) == fx.resources_updated.end())
    fx.resources_updated.push_back(u);
}

} // namespace mcprt
