#include "core/gateway_session.hpp"

#include <algorithm>

#include "core/untrusted_text.hpp"

namespace mcprt {

using nlohmann::json;

namespace {

constexpr std::size_t max_client_text = 256;

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

void gateway_session::initialize(const json& id, const json& params, const gateway_catalog& catalog,
                                 gateway_effects& fx) {
  if (initialized_) {
    fx.send.push_back(error(id, gateway_error::invalid_request, "the session is initialized already"));
    return;
  }
  auto requested = string_member(params, "protocolVersion");
  protocol_ = negotiate(requested ? requested->get_ref<const std::string&>() : std::string_view{});
  auto caps = params.find("capabilities");
  if (caps != params.end() && caps->is_object()) {
    // Only what the gateway looks at, so a client cannot park a large value here.
    for (auto key : {"sampling", "elicitation", "roots"}) {
      auto c = caps->find(key);
      if (c == caps->end() || !c->is_object()) continue;
      json kept = json::object();
      for (auto flag : {"listChanged", "form", "url", "context", "tools"})
        if (c->contains(flag)) kept[flag] = (*c)[flag].is_object() ? json::object() : (*c)[flag];
      client_caps_[key] = std::move(kept);
    }
  }
  auto info = params.find("clientInfo");
  if (info != params.end() && info->is_object()) {
    if (auto n = string_member(*info, "name")) client_name_ = cut_session_text(n->get<std::string>());
    if (auto v = string_member(*info, "version")) client_version_ = cut_session_text(v->get<std::string>());
  }
  initialized_ = true;
  json r{{"protocolVersion", protocol_},
         {"capabilities", catalog.capabilities()},
         {"serverInfo", {{"name", opts_.name}, {"version", opts_.version}}}};
  if (!opts_.instructions.empty()) r["instructions"] = opts_.instructions;
  fx.send.push_back(result(id, std::move(r)));
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
