#include "core/gateway_session.hpp"

#include <algorithm>

#include "core/ascii.hpp"
#include "core/mcp_headers.hpp"
#include "core/untrusted_text.hpp"

namespace mcprt {

using nlohmann::json;

namespace {

constexpr std::size_t max_client_text = 256;
constexpr std::size_t max_listen_uris = 256;

bool valid_id(const json& id) {
  return id.is_string() || id.is_number_integer() || id.is_number_unsigned();
}

bool is_log_level(const std::string& s) {
  for (auto l : {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"})
    if (s == l) return true;
  return false;
}

const json* string_member(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return nullptr;
  return &*it;
}

std::string cut_session_text(const std::string& s) {
  return replace_invalid_utf8(s.substr(0, max_client_text));
}

} // namespace

gateway_session::gateway_session(options o) : opts_(std::move(o)) {}

json gateway_session::result(const json& id, json result) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json gateway_session::error(const json& id, int code, const std::string& message, json data) {
  json e{{"code", code}, {"message", message}};
  if (!data.is_null()) e["data"] = std::move(data);
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(e)}};
}

json gateway_session::notification(const std::string& method, json params) {
  json n{{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null()) n["params"] = std::move(params);
  return n;
}

std::vector<std::string> gateway_supported_versions() {
  std::vector<std::string> out{std::string(gateway_modern_protocol)};
  for (auto p : gateway_protocols)
    out.emplace_back(p);
  return out;
}

json gateway_session::modern_result(const std::string& method, json r) {
  if (!r.is_object()) return r;
  if (!r.contains("resultType")) r["resultType"] = "complete";
  if (r["resultType"] != "complete") return r;
  if (method == "server/discover" || method == "tools/list" || method == "prompts/list" ||
      method == "resources/list" || method == "resources/templates/list" || method == "resources/read") {
    // An upstream's own hint is kept when it is one; the lists are the
    // gateway's, which change whenever a server's do.
    auto ttl = r.find("ttlMs");
    if (ttl == r.end() || !ttl->is_number_integer() || ttl->get<std::int64_t>() < 0) r["ttlMs"] = 0;
    r["cacheScope"] = "private";
  }
  return r;
}

std::string gateway_session::negotiate(std::string_view requested) {
  for (auto p : gateway_protocols)
    if (p == requested) return std::string{p};
  return std::string{gateway_protocols.front()};
}

bool gateway_session::client_can(std::string_view capability) const {
  auto it = client_caps_.find(std::string{capability});
  return it != client_caps_.end() && it->is_object();
}

bool gateway_session::client_elicits(std::string_view mode) const {
  if (!client_can("elicitation")) return false;
  auto& e = client_caps_["elicitation"];
  bool form = e.contains("form"), url = e.contains("url");
  // An empty object is the 2025-06-18 form, which means form mode.
  if (!form && !url) return mode == "form";
  return mode == "form" ? form : mode == "url" && url;
}

std::pair<std::uint64_t, json> gateway_session::request(const std::string& method, json params) {
  auto id = next_id_++;
  outbound_[id] = method;
  json msg{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  if (!params.is_null()) msg["params"] = std::move(params);
  return {id, std::move(msg)};
}

gateway_effects gateway_session::on_message(const json& msg, const gateway_catalog& catalog) {
  gateway_effects fx;
  if (!msg.is_object()) {
    // A batch (2025-03-26 only) or a stray value: one error, no id to tie it to.
    fx.send.push_back(error(nullptr, gateway_error::invalid_request,
                            msg.is_array() ? "JSON-RPC batches are not supported" : "expected a JSON-RPC object"));
    return fx;
  }
  auto method = msg.find("method");
  auto id = msg.find("id");
  if (method == msg.end()) {
    // A response to one of our requests.
    if (id == msg.end() || !(id->is_number_unsigned() || id->is_number_integer()) ||
        !(msg.contains("result") || msg.contains("error")))
      return fx; // nothing to answer a malformed response with
    auto n = id->get<std::int64_t>();
    if (n <= 0) return fx;
    auto it = outbound_.find(static_cast<std::uint64_t>(n));
    if (it == outbound_.end()) return fx; // late, or never ours
    outbound_.erase(it);
    fx.answers.emplace_back(static_cast<std::uint64_t>(n), msg);
    return fx;
  }
  if (!method->is_string()) {
    fx.send.push_back(error(id != msg.end() && valid_id(*id) ? *id : json(nullptr), gateway_error::invalid_request,
                            "method must be a string"));
    return fx;
  }
  if (id == msg.end()) {
    on_notification(msg, fx);
    return fx;
  }
  if (!valid_id(*id)) {
    fx.send.push_back(error(nullptr, gateway_error::invalid_request, "id must be a string or an integer"));
    return fx;
  }
  on_request(msg, catalog, fx);
  return fx;
}

void gateway_session::on_notification(const json& msg, gateway_effects& fx) {
  auto& method = msg["method"].get_ref<const std::string&>();
  if (method == "notifications/initialized") {
    fx.initialized = true;
  } else if (method == "notifications/cancelled") {
    auto p = msg.find("params");
    if (p != msg.end() && p->is_object()) {
      auto rid = p->find("requestId");
      if (rid != p->end() && valid_id(*rid)) fx.cancelled.push_back(*rid);
    }
  } else if (method == "notifications/roots/list_changed") {
    fx.roots_changed = true;
  }
  // Anything else (progress of our requests, unknown notifications) needs nothing.
}

void gateway_session::take_client_capabilities(const json& caps) {
  if (!caps.is_object()) return;
  // Only what the gateway looks at, so a client cannot park a large value here.
  for (auto key : {"sampling", "elicitation", "roots"}) {
    auto c = caps.find(key);
    if (c == caps.end() || !c->is_object()) continue;
    json kept = json::object();
    for (auto flag : {"listChanged", "form", "url", "context", "tools"})
      if (c->contains(flag)) kept[flag] = (*c)[flag].is_object() ? json::object() : (*c)[flag];
    client_caps_[key] = std::move(kept);
  }
}

void gateway_session::take_client_info(const json& info) {
  if (!info.is_object()) return;
  if (auto n = string_member(info, "name")) client_name_ = cut_session_text(n->get<std::string>());
  if (auto v = string_member(info, "version")) client_version_ = cut_session_text(v->get<std::string>());
}

void gateway_session::initialize(const json& id, const json& params, const gateway_catalog& catalog,
                                 gateway_effects& fx) {
  if (initialized_) {
    fx.send.push_back(error(id, gateway_error::invalid_request, "the session is initialized already"));
    return;
  }
  auto requested = string_member(params, "protocolVersion");
  protocol_ = negotiate(requested ? requested->get_ref<const std::string&>() : std::string_view{});
  if (auto caps = params.find("capabilities"); caps != params.end()) take_client_capabilities(*caps);
  if (auto info = params.find("clientInfo"); info != params.end()) take_client_info(*info);
  initialized_ = true;
  json r{{"protocolVersion", protocol_},
         {"capabilities", catalog.capabilities()},
         {"serverInfo", {{"name", opts_.name}, {"version", opts_.version}}}};
  if (!opts_.instructions.empty()) r["instructions"] = opts_.instructions;
  fx.send.push_back(result(id, std::move(r)));
}

namespace {

constexpr const char* meta_protocol = "io.modelcontextprotocol/protocolVersion";
constexpr const char* meta_capabilities = "io.modelcontextprotocol/clientCapabilities";
constexpr const char* meta_client = "io.modelcontextprotocol/clientInfo";

// The methods 2026-07-28 removed, and those the gateway does not serve in it.
bool removed_in_modern(const std::string& m) {
  for (auto r : {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
    if (m == r) return true;
  return false;
}

// The tool's x-mcp-header parameters present in the arguments must come
// as Mcp-Param-* headers saying the same (decoded); "" when they do.
std::string param_header_mismatch(const json& params, const modern_headers& headers, const gateway_catalog& catalog) {
  auto name = string_member(params, "name");
  if (!name) return {};
  auto tool = catalog.tool_object(name->get_ref<const std::string&>());
  if (!tool || !tool->contains("inputSchema")) return {};
  auto wanted = tool_param_headers((*tool)["inputSchema"], nullptr);
  if (!wanted) return {};
  auto args = params.find("arguments");
  if (args == params.end() || !args->is_object()) return {};
  for (auto& [field, value] : param_header_fields(*wanted, *args)) {
    auto param = field.substr(std::string_view("Mcp-Param-").size());
    const std::string* sent = nullptr;
    for (auto& [n, v] : headers.params)
      if (ascii_lower(n) == ascii_lower(param)) sent = &v;
    if (!sent) return field + " is missing; the arguments carry its value";
    auto got = decode_mcp_header_value(*sent);
    if (!got) return field + " is not a valid header value (bad characters or base64)";
    if (*got != decode_mcp_header_value(value)) return field + " does not match the arguments";
  }
  return {};
}

} // namespace

gateway_effects gateway_session::on_modern_message(const json& msg, const modern_headers& headers,
                                                   const gateway_catalog& catalog) {
  gateway_effects fx;
  auto refuse = [&](const json& id, int status, int code, const std::string& why, json data = nullptr) {
    fx.status = status;
    fx.send.push_back(error(id, code, why, std::move(data)));
    return fx;
  };
  if (!msg.is_object()) return refuse(nullptr, 400, gateway_error::invalid_request, "expected a JSON-RPC object");
  auto method = msg.find("method");
  auto id = msg.find("id");
  if (method == msg.end()) {
    // A response: 2026-07-28 has no requests to the client to answer.
    return refuse(nullptr, 400, gateway_error::invalid_request,
                  "2026-07-28 has no requests to the client: inputs come back in the retried request");
  }
  json rid = id != msg.end() && valid_id(*id) ? *id : json(nullptr);
  if (!method->is_string()) return refuse(rid, 400, gateway_error::invalid_request, "method must be a string");
  const auto& m = method->get_ref<const std::string&>();
  if (id == msg.end()) {
    // notifications/cancelled and the like: nothing is kept per client to apply them to.
    fx.status = 202;
    return fx;
  }
  if (!valid_id(*id)) return refuse(nullptr, 400, gateway_error::invalid_request, "id must be a string or an integer");
  json params = json::object();
  if (auto p = msg.find("params"); p != msg.end() && !p->is_null()) {
    if (!p->is_object()) return refuse(rid, 400, gateway_error::invalid_params, "params must be an object");
    params = *p;
  }
  auto meta = params.find("_meta");
  if (meta == params.end() || !meta->is_object())
    return refuse(rid, 400, gateway_error::invalid_params,
                  "2026-07-28 requests carry params._meta with io.modelcontextprotocol/protocolVersion and "
                  "io.modelcontextprotocol/clientCapabilities");
  auto version = meta->find(meta_protocol);
  if (version == meta->end() || !version->is_string())
    return refuse(rid, 400, gateway_error::invalid_params, "_meta has no io.modelcontextprotocol/protocolVersion");
  auto caps = meta->find(meta_capabilities);
  if (caps == meta->end() || !caps->is_object())
    return refuse(rid, 400, gateway_error::invalid_params,
                  "_meta has no io.modelcontextprotocol/clientCapabilities object");
  const auto& v = version->get_ref<const std::string&>();
  if (headers.http) {
    if (!headers.protocol || *headers.protocol != v)
      return refuse(rid, 400, gateway_error::header_mismatch,
                    "Header mismatch: MCP-Protocol-Version must be present and equal "
                    "_meta io.modelcontextprotocol/protocolVersion");
  }
  if (v != gateway_modern_protocol) {
    json supported = gateway_supported_versions();
    return refuse(rid, 400, gateway_error::unsupported_protocol_version, "Unsupported protocol version",
                  json{{"supported", std::move(supported)}, {"requested", replace_invalid_utf8(v.substr(0, 64))}});
  }
  if (headers.http) {
    auto decoded = headers.method ? decode_mcp_header_value(*headers.method) : std::nullopt;
    if (!decoded || *decoded != m)
      return refuse(rid, 400, gateway_error::header_mismatch,
                    "Header mismatch: Mcp-Method must be present and equal the body's method");
    const char* key = m == "tools/call" || m == "prompts/get" ? "name" : m == "resources/read" ? "uri" : nullptr;
    if (key) {
      auto body = string_member(params, key);
      auto name = headers.name ? decode_mcp_header_value(*headers.name) : std::nullopt;
      if (body && (!name || *name != body->get_ref<const std::string&>()))
        return refuse(rid, 400, gateway_error::header_mismatch,
                      std::string("Header mismatch: Mcp-Name must be present and equal params.") + key);
    }
  }
  if (headers.http && m == "tools/call")
    if (auto why = param_header_mismatch(params, headers, catalog); !why.empty())
      return refuse(rid, 400, gateway_error::header_mismatch, "Header mismatch: " + why);
  modern_ = true;
  initialized_ = true;
  protocol_ = std::string(gateway_modern_protocol);
  client_caps_ = json::object();
  take_client_capabilities(*caps);
  if (auto info = meta->find(meta_client); info != meta->end()) take_client_info(*info);
  // Server logs reach a 2026-07-28 request only when it asks for them.
  log_level_.reset();
  if (auto level = meta->find("io.modelcontextprotocol/logLevel");
      level != meta->end() && level->is_string() && is_log_level(level->get_ref<const std::string&>()))
    log_level_ = level->get<std::string>();
  if (removed_in_modern(m))
    return refuse(rid, 404, gateway_error::method_not_found,
                  "Method not found: " + m + " is not part of 2026-07-28");
  if (m == "server/discover") {
    json r{{"supportedVersions", gateway_supported_versions()},
           {"capabilities", catalog.capabilities()},
           {"_meta", {{"io.modelcontextprotocol/serverInfo", {{"name", opts_.name}, {"version", opts_.version}}}}}};
    r["capabilities"].erase("logging");
    if (!opts_.instructions.empty()) r["instructions"] = opts_.instructions;
    fx.send.push_back(result(rid, modern_result(m, std::move(r))));
    return fx;
  }
  if (m == "subscriptions/listen") {
    gateway_effects::listen_request l;
    l.id = rid;
    auto filter = params.find("notifications");
    if (filter != params.end() && !filter->is_null()) {
      if (!filter->is_object()) return refuse(rid, 400, gateway_error::invalid_params, "notifications must be an object");
      auto flag = [&](const char* key) {
        auto f = filter->find(key);
        return f != filter->end() && f->is_boolean() && f->get<bool>();
      };
      l.tools = flag("toolsListChanged");
      l.prompts = flag("promptsListChanged");
      l.resources = flag("resourcesListChanged");
      if (auto uris = filter->find("resourceSubscriptions"); uris != filter->end() && !uris->is_null()) {
        if (!uris->is_array() || uris->size() > max_listen_uris)
          return refuse(rid, 400, gateway_error::invalid_params,
                        "resourceSubscriptions must be an array of at most " + std::to_string(max_listen_uris)
                          + " URIs");
        for (auto& u : *uris) {
          if (!u.is_string() || u.get_ref<const std::string&>().size() > 2048)
            return refuse(rid, 400, gateway_error::invalid_params,
                          "resourceSubscriptions holds strings of at most 2048 bytes");
          if (std::find(l.uris.begin(), l.uris.end(), u.get_ref<const std::string&>()) == l.uris.end())
            l.uris.push_back(u.get<std::string>());
        }
      }
    }
    fx.listen = std::move(l);
    return fx;
  }
  auto state = params.find("requestState");
  if (state != params.end() && !state->is_null()) {
    if (!state->is_string()) return refuse(rid, 400, gateway_error::invalid_params, "requestState must be a string");
    auto responses = params.find("inputResponses");
    if (responses != params.end() && !responses->is_null() && !responses->is_object())
      return refuse(rid, 400, gateway_error::invalid_params, "inputResponses must be an object");
    gateway_effects::input_retry r;
    r.id = rid;
    r.method = m;
    const char* key = m == "resources/read" ? "uri" : "name";
    if (auto n = string_member(params, key)) r.name = n->get<std::string>();
    r.request_state = state->get<std::string>();
    r.input_responses = responses != params.end() && responses->is_object() ? *responses : json::object();
    fx.retry = std::move(r);
    return fx;
  }
  // The inputs of a retry belong to the request they answer: a fresh
  // request forwards neither them nor the client's _meta upstream.
  json plain = msg;
  if (auto& p = plain["params"]; p.is_object()) {
    p.erase("inputResponses");
    p.erase("requestState");
  }
  on_request(plain, catalog, fx);
  for (auto& out : fx.send) {
    if (out.contains("result")) out["result"] = modern_result(m, std::move(out["result"]));
    else if (out.contains("error") && out["error"].value("code", 0) == gateway_error::method_not_found)
      fx.status = 404;
  }
  return fx;
}

void gateway_session::on_request(const json& msg, const gateway_catalog& catalog, gateway_effects& fx) {
  const auto& id = msg["id"];
  auto& method = msg["method"].get_ref<const std::string&>();
  json params = json::object();
  if (auto p = msg.find("params"); p != msg.end() && !p->is_null()) {
    if (!p->is_object()) {
      fx.send.push_back(error(id, gateway_error::invalid_params, "params must be an object"));
      return;
    }
    params = *p;
  }
  if (method == "initialize") {
    initialize(id, params, catalog, fx);
    return;
  }
  if (method == "ping") {
    fx.send.push_back(result(id, json::object()));
    return;
  }
  if (!initialized_) {
    fx.send.push_back(error(id, gateway_error::invalid_request, "initialize first"));
    return;
  }
  auto invalid = [&](const std::string& why) { fx.send.push_back(error(id, gateway_error::invalid_params, why)); };
  if (method == "tools/list") {
    fx.send.push_back(result(id, catalog.tools_list()));
  } else if (method == "prompts/list") {
    fx.send.push_back(result(id, catalog.prompts_list()));
  } else if (method == "resources/list") {
    fx.send.push_back(result(id, catalog.resources_list()));
  } else if (method == "resources/templates/list") {
    fx.send.push_back(result(id, catalog.resource_templates_list()));
  } else if (method == "logging/setLevel") {
    auto level = string_member(params, "level");
    if (!level || !is_log_level(level->get_ref<const std::string&>())) {
      invalid("level must be one of debug, info, notice, warning, error, critical, alert, emergency");
      return;
    }
    log_level_ = level->get<std::string>();
    fx.log_level = log_level_;
    fx.send.push_back(result(id, json::object()));
  } else if (method == "tools/call") {
    auto name = string_member(params, "name");
    if (!name) return invalid("name must be a string");
    auto args = params.find("arguments");
    if (args != params.end() && !args->is_null() && !args->is_object()) return invalid("arguments must be an object");
    gateway_dispatch d;
    d.id = id;
    d.method = method;
    d.params = args != params.end() && args->is_object() ? *args : json::object();
    if (auto meta = params.find("_meta"); meta != params.end() && meta->is_object()) {
      auto tok = meta->find("progressToken");
      if (tok != meta->end() && (tok->is_string() || tok->is_number_integer())) d.progress_token = *tok;
    }
    if (auto route = catalog.tool(name->get_ref<const std::string&>())) {
      d.server = route->server;
      d.name = route->name;
    } else if (auto held = catalog.held_tool(name->get_ref<const std::string&>())) {
      // Not listed: the runtime refuses the call and says why.
      d.server = held->server;
      d.name = held->name;
    } else {
      d.stale = true;
      d.name = name->get<std::string>();
      d.server = catalog.guess_server_of_tool(d.name).value_or("");
    }
    fx.dispatch.push_back(std::move(d));
  } else if (method == "prompts/get") {
    auto name = string_member(params, "name");
    if (!name) return invalid("name must be a string");
    auto route = catalog.prompt(name->get_ref<const std::string&>());
    if (!route) return invalid("unknown prompt: " + escape_for_display(name->get<std::string>().substr(0, 128)));
    gateway_dispatch d{id, method, route->server, route->name, params, std::nullopt, false};
    d.params["name"] = route->name;
    d.params.erase("_meta");
    fx.dispatch.push_back(std::move(d));
  } else if (method == "resources/read" || method == "resources/subscribe" || method == "resources/unsubscribe") {
    auto uri = string_member(params, "uri");
    if (!uri) return invalid("uri must be a string");
    auto server = catalog.resource_server(uri->get_ref<const std::string&>());
    if (!server) {
      fx.send.push_back(error(id, gateway_error::resource_not_found, "Resource not found",
                              json{{"uri", replace_invalid_utf8(uri->get<std::string>().substr(0, 1024))}}));
      return;
    }
    gateway_dispatch d{id, method, *server, {}, params, std::nullopt, false};
    d.params.erase("_meta");
    fx.dispatch.push_back(std::move(d));
  } else if (method == "completion/complete") {
    auto ref = params.find("ref");
    if (ref == params.end() || !ref->is_object()) return invalid("ref must be an object");
    auto route = catalog.completion(*ref);
    if (!route) return invalid("no server offers that prompt or resource");
    gateway_dispatch d{id, method, route->server, route->name, params, std::nullopt, false};
    if ((*ref)["type"] == "ref/prompt") d.params["ref"]["name"] = route->name;
    d.params.erase("_meta");
    fx.dispatch.push_back(std::move(d));
  } else {
    fx.send.push_back(error(id, gateway_error::method_not_found,
                            "Method not found: " + escape_for_display(method.substr(0, 128))));
  }
}

} // namespace mcprt
