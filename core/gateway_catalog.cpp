#include "core/gateway_catalog.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <utility>

namespace mcprt {

namespace {

// ---- RFC 6570, backwards ----------------------------------------------------

struct tpl_token {
  bool expr = false;
  char c = 0;            // literal byte
  char op = 0;           // expression operator, 0 for a simple {var}
  bool prefixed = false; // the expansion starts with `op` unless it is empty
  bool explode = false;  // some variable has `*`
};

bool is_alnum(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool is_hex(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
}

bool is_unreserved(unsigned char c) {
  // '%' stands for a pct-encoded triple: its hex digits are unreserved anyway.
  return is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '%' || c >= 0x80;
}

bool is_reserved(unsigned char c) {
  return std::string_view(":/?#[]@!$&'()*+,;=").find(static_cast<char>(c)) != std::string_view::npos;
}

// The bytes an expression's expansion may hold after its leading operator.
bool expansion_allows(const tpl_token& t, unsigned char c) {
  if (is_unreserved(c)) return true;
  switch (t.op) {
    case '+':
    case '#': return is_reserved(c);
    case 0: return c == ',' || (t.explode && c == '=');
    case '.': return c == ',' || c == '=';
    case '/': return c == '/' || c == ',' || c == '=';
    case ';': return c == ';' || c == ',' || c == '=';
    case '?':
    case '&': return c == '&' || c == ',' || c == '=';
    default: return false;
  }
}

// One variable list `a,b.c:3,d*` (without the operator); false if malformed.
bool parse_varlist(std::string_view s, bool& explode) {
  if (s.empty()) return false;
  std::size_t i = 0;
  while (true) {
    // varname: varchar *( ["."] varchar ), varchar = ALPHA / DIGIT / "_" / pct-encoded
    bool want_char = true;
    std::size_t start = i;
    while (i < s.size()) {
      auto c = static_cast<unsigned char>(s[i]);
      if (is_alnum(c) || c == '_') {
        ++i;
        want_char = false;
      } else if (c == '%' && i + 2 < s.size() && is_hex(s[i + 1]) && is_hex(s[i + 2])) {
        i += 3;
        want_char = false;
      } else if (c == '.' && !want_char) {
        ++i;
        want_char = true;
      } else {
        break;
      }
    }
    if (i == start || want_char) return false;
    if (i < s.size() && s[i] == '*') {
      explode = true;
      ++i;
    } else if (i < s.size() && s[i] == ':') {
      ++i;
      std::size_t digits = 0;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        if (digits == 0 && s[i] == '0') return false;
        ++i;
        ++digits;
      }
      if (digits == 0 || digits > 4) return false;
    }
    if (i == s.size()) return true;
    if (s[i] != ',') return false;
    ++i;
  }
}

// Literal bytes are taken as they are (compared byte for byte); only the
// expressions are checked, since servers do write templates with bytes the
// RFC would have them encode.
std::optional<std::vector<tpl_token>> parse_template(std::string_view t) {
  std::vector<tpl_token> out;
  std::size_t i = 0;
  while (i < t.size()) {
    char c = t[i];
    if (c == '}') return std::nullopt;
    if (c != '{') {
      tpl_token lit;
      lit.c = c;
      out.push_back(lit);
      ++i;
      continue;
    }
    auto close = t.find('}', i + 1);
    if (close == std::string_view::npos) return std::nullopt;
    std::string_view body = t.substr(i + 1, close - i - 1);
    if (body.find('{') != std::string_view::npos) return std::nullopt;
    tpl_token e;
    e.expr = true;
    if (!body.empty() && std::string_view("+#./;?&").find(body[0]) != std::string_view::npos) {
      e.op = body[0];
      e.prefixed = e.op != '+';
      body.remove_prefix(1);
    } else if (!body.empty() && std::string_view("=,!@|").find(body[0]) != std::string_view::npos) {
      return std::nullopt; // reserved for future extensions: nothing expands them
    }
    if (!parse_varlist(body, e.explode)) return std::nullopt;
    out.push_back(e);
    i = close + 1;
  }
  return out;
}

// Thompson simulation: state 2i is "before token i", 2i+1 "inside
// expression i". Every move, on a byte or on none, goes to the same or a
// later state, so one ascending pass over the window [lo, hi] of states
// that may be active both steps a set and closes the next one.
bool match_tokens(const std::vector<tpl_token>& toks, std::string_view uri) {
  const std::size_t n = toks.size();
  const std::size_t states = 2 * (n + 1);
  // Bytes each expression's inside state keeps, as a bitmap per token.
  std::vector<std::array<std::uint64_t, 4>> allow(n, std::array<std::uint64_t, 4>{});
  for (std::size_t i = 0; i < n; ++i)
    if (toks[i].expr)
      for (unsigned c = 0; c < 256; ++c)
        if (expansion_allows(toks[i], static_cast<unsigned char>(c)))
          allow[i][c >> 6] |= std::uint64_t{1} << (c & 63);
  std::vector<std::uint8_t> cur(states, 0), nxt(states, 0);
  // Moves on no byte out of state s (s itself active in `set`).
  auto close_one = [&](std::vector<std::uint8_t>& set, std::size_t s, std::size_t& h) {
    std::size_t i = s / 2;
    if (i >= n) return;
    const auto& t = toks[i];
    if (s % 2 == 0 && !t.expr) return;
    set[2 * (i + 1)] = 1; // undefined, or its expansion done
    h = std::max(h, 2 * (i + 1));
    if (s % 2 == 0 && !t.prefixed) {
      set[s + 1] = 1;
      h = std::max(h, s + 1);
    }
  };
  std::size_t lo = 0, hi = 0;
  cur[0] = 1;
  for (std::size_t s = 0; s <= hi; ++s)
    if (cur[s]) close_one(cur, s, hi);
  for (char ch : uri) {
    auto c = static_cast<unsigned char>(ch);
    std::size_t nlo = states, nhi = 0;
    auto mark = [&](std::size_t s) {
      nxt[s] = 1;
      nlo = std::min(nlo, s);
      nhi = std::max(nhi, s);
    };
    for (std::size_t s = lo; s <= std::max(hi, nhi) && s < states; ++s) {
      if (s <= hi && cur[s]) {
        cur[s] = 0;
        std::size_t i = s / 2;
        if (i < n) {
          const auto& t = toks[i];
          if (s % 2 == 0) {
            if (!t.expr && t.c == ch) mark(s + 2);
            else if (t.expr && t.prefixed && t.op == ch) mark(s + 1);
          } else if ((allow[i][c >> 6] >> (c & 63)) & 1) {
            mark(s);
          }
        }
      }
      if (nlo <= s && nxt[s]) close_one(nxt, s, nhi);
    }
    if (nlo == states) return false;
    std::swap(cur, nxt);
    lo = nlo;
    hi = nhi;
  }
  return cur[2 * n] != 0;
}

// ---- the catalog ----------------------------------------------------------

const std::string* string_field_of(const nlohmann::json& entry, const char* key) {
  if (!entry.is_object()) return nullptr;
  auto it = entry.find(key);
  if (it == entry.end() || !it->is_string()) return nullptr;
  return it->get_ptr<const std::string*>();
}

// Per server and kind, the entries that are only counted.
struct tally {
  std::size_t invalid = 0, over_limit = 0;
  void flush(std::vector<gateway_left_out>& out, const std::string& server, const char* kind) const {
    if (invalid) out.push_back({server, kind, "", "", "invalid", "", invalid, ""});
    if (over_limit) out.push_back({server, kind, "", "", "over_limit", "", over_limit, ""});
  }
};

// Walks a capability path such as "resources.subscribe".
bool offers(const nlohmann::json& caps, std::string_view path) {
  const nlohmann::json* at = &caps;
  while (true) {
    auto dot = path.find('.');
    auto key = path.substr(0, dot);
    if (!at->is_object()) return false;
    auto it = at->find(std::string(key));
    if (it == at->end()) return false;
    at = &*it;
    if (dot == std::string_view::npos) break;
    path.remove_prefix(dot + 1);
  }
  return !at->is_null() && !(at->is_boolean() && !at->get<bool>());
}

} // namespace

std::string default_gateway_prefix(std::string_view server) {
  std::string p(server);
  p += "__";
  return p;
}

bool uri_template_valid(std::string_view uri_template) {
  return parse_template(uri_template).has_value();
}

bool uri_template_matches(std::string_view uri_template, std::string_view uri) {
  auto toks = parse_template(uri_template);
  return toks && match_tokens(*toks, uri);
}

/// A name or URI with a C0 control character or DEL in it: a client shows
/// names, and one could forge a line or steer a terminal.
static bool has_control_character(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7F;
  });
}

gateway_catalog gateway_catalog::build(std::vector<gateway_server_view> servers, const gateway_limits& limits,
                                       const tool_set* set) {
  // Servers of the owner's own scopes first: a repository's server cannot
  // take a name (and so the calls made by it) from one the owner set up.
  std::stable_sort(servers.begin(), servers.end(), [](const gateway_server_view& a, const gateway_server_view& b) {
    return std::make_pair(a.project, a.name) < std::make_pair(b.project, b.name);
  });
  gateway_catalog c;

  auto usable_name = [&](const std::string* own) {
    return own && !own->empty() && own->size() <= limits.max_name_bytes && !has_control_character(*own);
  };

  // A set keeps servers and tools out before anything claims a name.
  if (set) {
    std::vector<gateway_server_view> kept;
    for (auto& s : servers) {
      if (auto out = server_out_of_set(*set, s.name)) {
        c.left_out_.push_back({s.name, "server", "", "", out->reason, "", 1, out->detail});
        continue;
      }
      if (s.available) {
        std::vector<nlohmann::json> tools;
        for (auto& e : s.tools) {
          const std::string* own = string_field_of(e, "name");
          if (usable_name(own))
            if (auto out = tool_out_of_set(*set, s.name, *own)) {
              c.left_out_.push_back({s.name, "tool", *own, s.prefix + *own, out->reason, "", 1, out->detail});
              continue;
            }
          tools.push_back(std::move(e));
        }
        s.tools = std::move(tools);
      }
      kept.push_back(std::move(s));
    }
    servers = std::move(kept);
  }

  // Tool names that fit as they are: a shortened name never takes one.
  // Gathered only when some name needs shortening (most catalogs have none).
  std::set<std::string, std::less<>> fitting;
  auto each_tool_name = [&](auto&& f) {
    for (auto& s : servers)
      if (s.available)
        for (auto& e : s.tools)
          if (const std::string* own = string_field_of(e, "name"); usable_name(own)) f(s.prefix, *own);
  };
  bool any_long = false;
  each_tool_name([&](const std::string& prefix, const std::string& own) {
    any_long = any_long || prefix.size() + own.size() > max_exposed_tool_name;
  });
  if (any_long)
    each_tool_name([&](const std::string& prefix, const std::string& own) {
      if (prefix.size() + own.size() <= max_exposed_tool_name) fitting.insert(prefix + own);
    });
  // Full names claimed, so that two servers' same long name conflict as
  // two short ones do, rather than both getting a shortening.
  std::map<std::string, std::string, std::less<>> claimed_full; // -> its server

  // Tools and prompts: exposed as prefix + own name.
  auto add_named = [&](gateway_server_view& s, std::vector<nlohmann::json>& entries, const char* kind,
                       nlohmann::json& list, std::map<std::string, gateway_route, std::less<>>& routes) {
    bool tools = std::string_view(kind) == "tool";
    tally t;
    for (auto& e : entries) {
      const std::string* own = string_field_of(e, "name");
      if (!usable_name(own)) {
        ++t.invalid;
        continue;
      }
      std::string exposed = s.prefix + *own;
      bool long_name = tools && exposed.size() > max_exposed_tool_name;
      if (long_name) {
        if (auto it = claimed_full.find(exposed); it != claimed_full.end()) {
          c.left_out_.push_back({s.name, kind, *own, exposed, "name_conflict", it->second, 1, ""});
          continue;
        }
      } else if (auto it = routes.find(exposed); it != routes.end()) {
        c.left_out_.push_back({s.name, kind, *own, exposed, "name_conflict", it->second.server, 1, ""});
        continue;
      }
      if (list.size() >= limits.max_entries) {
        ++t.over_limit;
        continue;
      }
      if (long_name) {
        claimed_full.emplace(exposed, s.name);
        std::string full = std::move(exposed);
        for (unsigned attempt = 0;; ++attempt) {
          exposed = shortened_tool_name(full, attempt);
          if (!fitting.count(exposed) && !routes.count(exposed)) break;
        }
        c.renamed_.push_back({s.name, *own, std::move(full), exposed});
      }
      routes.emplace(exposed, gateway_route{s.name, *own});
      e["name"] = std::move(exposed);
      list.push_back(std::move(e));
    }
    t.flush(c.left_out_, s.name, kind);
  };

  // Resources and templates: shown as listed, owned by URI.
  std::size_t template_bytes = 0;
  auto add_uris = [&](gateway_server_view& s, std::vector<nlohmann::json>& entries, const char* kind,
                      const char* key, std::size_t max_bytes, nlohmann::json& list,
                      std::map<std::string, std::string, std::less<>>& owners, bool is_template) {
    tally t;
    for (auto& e : entries) {
      const std::string* uri = string_field_of(e, key);
      if (!uri || uri->empty() || uri->size() > max_bytes || has_control_character(*uri)) {
        ++t.invalid;
        continue;
      }
      if (auto it = owners.find(*uri); it != owners.end()) {
        c.left_out_.push_back({s.name, kind, *uri, *uri, "name_conflict", it->second, 1, ""});
        continue;
      }
      if (list.size() >= limits.max_entries
          || (is_template && template_bytes + uri->size() > limits.max_template_bytes_total)) {
        ++t.over_limit;
        continue;
      }
      if (is_template) template_bytes += uri->size();
      owners.emplace(*uri, s.name);
      // An unparsable template is still shown (a client may complete on
      // it) but never routes a read.
      if (is_template && uri_template_valid(*uri)) c.template_order_.push_back({*uri, s.name});
      list.push_back(std::move(e));
    }
    t.flush(c.left_out_, s.name, kind);
  };

  std::set<std::string, std::less<>> seen;
  for (auto& s : servers) {
    // Routes name their server, so a nameless one could never be reached.
    if (s.name.empty() || !seen.insert(s.name).second) continue;
    c.servers_.push_back(
      {s.name, s.prefix, s.available, s.capabilities.is_object() ? s.capabilities : nlohmann::json::object()});
    if (!s.available) continue;
    add_named(s, s.tools, "tool", c.tools_, c.tool_routes_);
    add_named(s, s.prompts, "prompt", c.prompts_, c.prompt_routes_);
    add_uris(s, s.resources, "resource", "uri", limits.max_uri_bytes, c.resources_, c.resource_owner_, false);
    add_uris(s, s.resource_templates, "resource_template", "uriTemplate", limits.max_template_bytes, c.templates_,
             c.template_owner_, true);
  }
  // A set's session reaches only its set's tools: held ones are not routed.
  for (auto& s : servers) {
    if (set || !s.available) continue;
    for (auto& own : s.held_tools) {
      auto exposed = s.prefix + own;
      if (!usable_name(&own) || exposed.size() > max_exposed_tool_name || c.tool_routes_.count(exposed)) continue;
      c.held_routes_.emplace(std::move(exposed), gateway_route{s.name, own});
    }
  }
  std::sort(c.tools_.begin(), c.tools_.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["name"].get_ref<const std::string&>() < b["name"].get_ref<const std::string&>();
  });
  c.max_uri_bytes_ = limits.max_uri_bytes;
  return c;
}

const nlohmann::json* gateway_catalog::tool_object(std::string_view exposed) const {
  // tools_ is in name order (tools/list's order).
  auto it = std::lower_bound(tools_.begin(), tools_.end(), exposed, [](const nlohmann::json& t, std::string_view n) {
    return t.value("name", std::string{}) < n;
  });
  if (it == tools_.end() || it->value("name", std::string{}) != exposed) return nullptr;
  return &*it;
}

nlohmann::json gateway_catalog::tools_list() const {
  return {{"tools", tools_}};
}

nlohmann::json gateway_catalog::prompts_list() const {
  return {{"prompts", prompts_}};
}

nlohmann::json gateway_catalog::resources_list() const {
  return {{"resources", resources_}};
}

nlohmann::json gateway_catalog::resource_templates_list() const {
  return {{"resourceTemplates", templates_}};
}

std::optional<gateway_route> gateway_catalog::tool(std::string_view exposed) const {
  auto it = tool_routes_.find(exposed);
  if (it == tool_routes_.end()) return std::nullopt;
  return it->second;
}

std::optional<gateway_route> gateway_catalog::held_tool(std::string_view exposed) const {
  auto it = held_routes_.find(exposed);
  if (it == held_routes_.end()) return std::nullopt;
  return it->second;
}

std::optional<gateway_route> gateway_catalog::prompt(std::string_view exposed) const {
  auto it = prompt_routes_.find(exposed);
  if (it == prompt_routes_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> gateway_catalog::resource_server(std::string_view uri) const {
  if (auto it = resource_owner_.find(uri); it != resource_owner_.end()) return it->second;
  // Bounds the matching work a client's long URI can cause.
  if (uri.empty() || uri.size() > max_uri_bytes_) return std::nullopt;
  for (const auto& t : template_order_)
    if (uri_template_matches(t.uri_template, uri)) return t.server;
  return std::nullopt;
}

std::optional<gateway_route> gateway_catalog::completion(const nlohmann::json& ref) const {
  const std::string* type = string_field_of(ref, "type");
  if (!type) return std::nullopt;
  if (*type == "ref/prompt") {
    const std::string* name = string_field_of(ref, "name");
    return name ? prompt(*name) : std::nullopt;
  }
  if (*type == "ref/resource") {
    const std::string* uri = string_field_of(ref, "uri");
    if (!uri) return std::nullopt;
    if (auto it = template_owner_.find(*uri); it != template_owner_.end()) return gateway_route{it->second, *uri};
    if (auto server = resource_server(*uri)) return gateway_route{*server, *uri};
  }
  return std::nullopt;
}

std::optional<std::string> gateway_catalog::guess_server_of_tool(std::string_view exposed) const {
  if (auto r = tool(exposed)) return r->server;
  const server_entry* best = nullptr;
  for (const auto& s : servers_) {
    if (s.prefix.empty() || exposed.size() <= s.prefix.size()
        || exposed.compare(0, s.prefix.size(), s.prefix) != 0)
      continue;
    // servers_ is in name order, so on equal terms the earlier one stays.
    if (!best || s.prefix.size() > best->prefix.size()
        || (s.prefix.size() == best->prefix.size() && best->available && !s.available))
      best = &s;
  }
  if (best) return best->name;
  for (const auto& s : servers_)
    if (s.prefix.empty() && !s.available && !exposed.empty()) return s.name;
  return std::nullopt;
}

nlohmann::json gateway_catalog::capabilities() const {
  nlohmann::json caps = {
    {"tools", {{"listChanged", true}}},
    {"prompts", {{"listChanged", true}}},
    {"resources", {{"listChanged", true}}},
    {"logging", nlohmann::json::object()},
  };
  if (!servers_with("resources.subscribe").empty()) caps["resources"]["subscribe"] = true;
  if (!servers_with("completions").empty()) caps["completions"] = nlohmann::json::object();
  return caps;
}

std::vector<std::string> gateway_catalog::servers_with(std::string_view capability) const {
  std::vector<std::string> out;
  if (capability.empty()) return out;
  for (const auto& s : servers_)
    if (s.available && offers(s.capabilities, capability)) out.push_back(s.name);
  return out;
}

gateway_list_changes gateway_catalog::diff(const gateway_catalog& before, const gateway_catalog& after) {
  gateway_list_changes ch;
  ch.tools = before.tools_ != after.tools_;
  ch.prompts = before.prompts_ != after.prompts_;
  ch.resources = before.resources_ != after.resources_ || before.templates_ != after.templates_;
  return ch;
}

} // namespace mcprt
