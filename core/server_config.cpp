#include "core/server_config.hpp"

#include <algorithm>

#include "core/fingerprint.hpp"
#include "core/untrusted_text.hpp"

namespace mcprt {

using nlohmann::json;

std::string to_string(config_scope s) {
  switch (s) {
    case config_scope::user: return "user";
    case config_scope::project: return "project";
    case config_scope::workspace: return "workspace";
    case config_scope::session: return "session";
  }
  return "user";
}

std::optional<config_scope> parse_config_scope(std::string_view s) {
  if (s == "user") return config_scope::user;
  if (s == "project") return config_scope::project;
  if (s == "workspace") return config_scope::workspace;
  if (s == "session") return config_scope::session;
  return std::nullopt;
}

bool is_gated(config_scope s) {
  return s == config_scope::project || s == config_scope::workspace;
}

std::string to_string(transport_kind t) {
  switch (t) {
    case transport_kind::stdio: return "stdio";
    case transport_kind::sse: return "sse";
    case transport_kind::http: return "http";
    case transport_kind::unknown: return "unknown";
  }
  return "unknown";
}

transport_kind server_config::transport() const {
  if (http_url) return transport_kind::http;
  if (url) {
    // Claude-style `.mcp.json` files spell streamable HTTP as
    // {"type": "http", "url": ...}; without `type`, `url` means legacy SSE.
    auto t = spec.find("type");
    if (t != spec.end() && t->is_string()
        && (*t == "http" || *t == "streamable-http" || *t == "streamableHttp"))
      return transport_kind::http;
    return transport_kind::sse;
  }
  if (command) return transport_kind::stdio;
  return transport_kind::unknown;
}

namespace {

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    default: return "a value";
  }
}

bool has_nul(std::string_view s) {
  return s.find('\0') != std::string_view::npos;
}

bool is_http_token(std::string_view s) {
  static constexpr std::string_view extra = "!#$%&'*+-.^_`|~";
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
           || extra.find(c) != std::string_view::npos;
  });
}

/// What a string field may not hold (nullopt: anything goes).
using string_rule = std::optional<std::string> (*)(std::string_view);

std::optional<std::string> no_nul(std::string_view s) {
  if (has_nul(s)) return "must not contain a NUL character";
  return std::nullopt;
}

std::optional<std::string> env_name_rule(std::string_view s) {
  if (s.empty() || s.find('=') != std::string_view::npos || has_nul(s))
    return "an environment variable name must not be empty or contain '=' or a NUL character";
  return std::nullopt;
}

std::optional<std::string> header_name_rule(std::string_view s) {
  if (!is_http_token(s))
    return "a header name must be an HTTP token: letters, digits and !#$%&'*+-.^_`|~";
  return std::nullopt;
}

std::optional<std::string> header_value_rule(std::string_view s) {
  if (s.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos)
    return "a header value must not contain a line break or a NUL character";
  return std::nullopt;
}

struct validator {
  std::optional<config_error> error;

  using path_t = std::vector<std::string>;

  static path_t child(path_t p, std::string key) {
    p.push_back(std::move(key));
    return p;
  }

  bool fail(const path_t& path, const std::string& expected, const json& got) {
    if (!error) error = config_error{path, "expected " + expected + ", got " + type_name(got)};
    return false;
  }

  bool refuse(const path_t& path, std::string why, bool index_last = false) {
    if (!error) error = config_error{path, std::move(why), index_last};
    return false;
  }

  bool string(const json& v, const path_t& path, std::optional<std::string>& out, string_rule rule = no_nul) {
    if (!v.is_string()) return fail(path, "a string", v);
    auto& s = v.get_ref<const std::string&>();
    if (rule)
      if (auto why = rule(s)) return refuse(path, std::move(*why));
    out = s;
    return true;
  }

  bool string_list(const json& v, const path_t& path, std::vector<std::string>& out, string_rule rule = nullptr) {
    if (!v.is_array()) return fail(path, "an array of strings", v);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) {
        fail(child(path, std::to_string(i)), "a string", v[i]);
        error->index_last = true;
        return false;
      }
      auto& s = v[i].get_ref<const std::string&>();
      if (rule)
        if (auto why = rule(s)) return refuse(child(path, std::to_string(i)), std::move(*why), true);
      out.push_back(s);
    }
    return true;
  }

  bool string_map(const json& v, const path_t& path, std::map<std::string, std::string>& out,
                  string_rule key_rule, string_rule value_rule) {
    if (!v.is_object()) return fail(path, "an object of strings", v);
    for (auto& [k, x] : v.items()) {
      if (auto why = key_rule(k)) return refuse(child(path, k), std::move(*why));
      if (!x.is_string()) return fail(child(path, k), "a string", x);
      auto& s = x.get_ref<const std::string&>();
      if (auto why = value_rule(s)) return refuse(child(path, k), std::move(*why));
      out.emplace(k, s);
    }
    return true;
  }

  bool boolean(const json& v, const path_t& path, bool& out) {
    if (!v.is_boolean()) return fail(path, "a boolean", v);
    out = v.get<bool>();
    return true;
  }
};

json drop_nulls(const json& v) {
  json out = json::object();
  for (auto& [k, x] : v.items())
    if (!x.is_null()) out[k] = x;
  return out;
}

} // namespace

server_parse_result parse_server_config(const std::string& name, const json& value,
                                        config_scope scope,
                                        const std::vector<std::string>& prefix) {
  validator check;
  if (auto why = server_name_problem(name)) {
    check.refuse(prefix, std::move(*why));
    return {std::nullopt, check.error};
  }
  if (!value.is_object()) {
    check.fail(prefix, "an object", value);
    return {std::nullopt, check.error};
  }
  server_config c;
  c.name = name;
  c.scope = scope;
  // An explicit null means "not set", as an absent field does.
  c.spec = drop_nulls(value);
  auto field = [&](const char* key) { return validator::child(prefix, key); };
  for (auto& [key, v] : c.spec.items()) {
    if (key == "command") check.string(v, field("command"), c.command);
    else if (key == "args") check.string_list(v, field("args"), c.args, no_nul);
    else if (key == "env") check.string_map(v, field("env"), c.env, env_name_rule, no_nul);
    else if (key == "cwd") check.string(v, field("cwd"), c.cwd);
    else if (key == "url") check.string(v, field("url"), c.url);
    else if (key == "httpUrl") check.string(v, field("httpUrl"), c.http_url);
    else if (key == "headers") check.string_map(v, field("headers"), c.headers, header_name_rule, header_value_rule);
    else if (key == "proxy") check.string(v, field("proxy"), c.proxy);
    else if (key == "caFile") check.string(v, field("caFile"), c.ca_file);
    else if (key == "description") check.string(v, field("description"), c.description, nullptr);
    else if (key == "timeout") {
      if (!v.is_number_integer() || v.get<long long>() < 0)
        check.fail(field("timeout"), "a non-negative integer (milliseconds)", v);
      else c.timeout_ms = v.get<long long>();
    } else if (key == "trust") {
      bool b = false;
      if (check.boolean(v, field("trust"), b)) c.trust = b;
    } else if (key == "disabled") {
      check.boolean(v, field("disabled"), c.disabled);
    } else if (key == "elicitation") {
      // `ask` needs a host to ask, which a settings file cannot promise.
      auto policy = v.is_string() ? parse_elicitation_policy(v.get<std::string>()) : std::nullopt;
      if (!v.is_string())
        check.fail(field("elicitation"), "a string", v);
      else if (!policy || *policy == elicitation_policy::ask)
        check.refuse(field("elicitation"), "expected \"decline\" or \"accept-defaults\"");
      else c.elicitation = *policy;
    } else if (key == "prefix") {
      std::string px;
      if (check.string(v, field("prefix"), c.prefix, nullptr)) {
        px = *c.prefix;
        bool ok = px.size() <= 64 && std::all_of(px.begin(), px.end(), [](char ch) {
          return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                 ch == '-' || ch == '.';
        });
        if (!ok) check.refuse(field("prefix"), "expected at most 64 ASCII letters, digits, '_', '-' or '.'");
      }
    } else if (key == "pinDefinitions") {
      bool b = false;
      if (check.boolean(v, field("pinDefinitions"), b)) c.pin_definitions = b;
    } else if (key == "protocolVersion") {
      // A revision before 2026-07-28 here skips the server/discover probe.
      auto is_revision = [](const std::string& r) {
        if (r.size() != 10) return false;
        for (std::size_t i = 0; i < r.size(); ++i)
          if (i == 4 || i == 7 ? r[i] != '-' : (r[i] < '0' || r[i] > '9')) return false;
        return true;
      };
      if (!v.is_string())
        check.fail(field("protocolVersion"), "a string", v);
      else if (!is_revision(v.get_ref<const std::string&>()))
        check.refuse(field("protocolVersion"), "expected a revision date such as \"2025-11-25\"");
    } else if (key == "sandbox" || key == "inheritEnv") {
      sandbox_spec_read r;
      if (key == "sandbox") {
        r = parse_sandbox_spec(v, field("sandbox"));
        if (r.spec) c.sandbox = std::move(r.spec);
      } else {
        inherit_env_spec e;
        r = parse_inherit_env(v, field("inheritEnv"), e);
        if (!r.error) c.inherit_env = std::move(e);
      }
      if (r.error) check.refuse(r.error_path, key + ": " + *r.error, r.index_last);
    } else if (key == "includeTools") {
      std::vector<std::string> xs;
      if (check.string_list(v, field("includeTools"), xs)) c.include_tools = std::move(xs);
    } else if (key == "excludeTools") {
      std::vector<std::string> xs;
      if (check.string_list(v, field("excludeTools"), xs)) c.exclude_tools = std::move(xs);
    }
    // Unknown fields stay in `spec`: they take part in equality and hashes.
    if (check.error) return {std::nullopt, check.error};
  }
  c.connection_id_cache = compute_connection_id(c);
  c.filter_key_cache = filter_key(c);
  return {std::move(c), std::nullopt};
}

namespace {

/// A key from the file as it may appear in a message: escaped, and cut on
/// a character boundary so that a megabyte-long key stays one short line.
std::string shown_key(std::string_view key) {
  auto shown = escape_for_display(key);
  if (shown.size() <= max_shown_key_bytes) return shown;
  std::size_t cut = max_shown_key_bytes;
  while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80)
    --cut;
  shown.resize(cut);
  return shown + "...";
}

/// Whether escape_for_display leaves `s` as it is, backslashes aside: every
/// other escape makes the text longer than the doubled backslashes alone.
bool displays_as_is(std::string_view s) {
  auto backslashes = static_cast<std::size_t>(std::count(s.begin(), s.end(), '\\'));
  return escape_for_display(s).size() == s.size() + backslashes;
}

} // namespace

std::optional<std::string> server_name_problem(std::string_view name) {
  if (name.empty() || name.size() > max_server_name_bytes || !displays_as_is(name))
    return "a server name must be 1 to " + std::to_string(max_server_name_bytes)
           + " bytes of printable text (no control characters, line breaks or bidirectional controls)";
  return std::nullopt;
}

std::string config_error::path_string() const {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (i + 1 == path.size() && index_last) {
      out += "[" + shown_key(path[i]) + "]";
    } else {
      if (!out.empty()) out += ".";
      out += shown_key(path[i]);
    }
  }
  return out;
}

bool servers_equal(const server_config& a, const server_config& b) {
  // The sandbox comes from settings around the entry: the owner widening
  // one server changes it without touching the entry.
  return a.scope == b.scope && a.spec == b.spec && a.effective_sandbox == b.effective_sandbox;
}

bool servers_equal(const server_map& a, const server_map& b) {
  if (a.size() != b.size()) return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j)
    if (i->first != j->first || !servers_equal(i->second, j->second)) return false;
  return true;
}

std::string without_secrets(const server_config& c, std::string text) {
  for (auto& [value, placeholder] : c.secrets) {
    for (auto at = text.find(value); at != std::string::npos; at = text.find(value, at + placeholder.size()))
      text.replace(at, value.size(), placeholder);
  }
  return text;
}

} // namespace mcprt
