#include "core/fingerprint.hpp"

#include <algorithm>

#include <openssl/evp.h>

namespace mcprt {

using nlohmann::json;
using nlohmann::ordered_json;

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 0xf]);
  }
  return out;
}

namespace {

// A config a host builds itself may hold strings that are not UTF-8, where
// nlohmann's dump throws; an id is computed for it anyway (valid text dumps
// byte for byte as before, so ids stay compatible with the reference).
template <class J>
std::string dump_text(const J& j) {
  return j.dump(-1, ' ', false, J::error_handler_t::replace);
}

ordered_json or_null(const json& spec, const char* key) {
  auto i = spec.find(key);
  if (i == spec.end() || i->is_null()) return nullptr;
  return ordered_json::parse(dump_text(*i));
}

// Maps become arrays of [key, value] pairs sorted by key, as the reference
// encodes them; a missing map is an empty array.
ordered_json sorted_pairs(const json& spec, const char* key) {
  ordered_json out = ordered_json::array();
  auto i = spec.find(key);
  if (i == spec.end() || !i->is_object()) return out;
  for (auto& [k, v] : i->items()) // json objects iterate in key order
    out.push_back(ordered_json::array({k, ordered_json::parse(dump_text(v))}));
  return out;
}

ordered_json sorted_strings(const json& v) {
  if (!v.is_array()) return nullptr;
  std::vector<std::string> xs;
  for (auto& x : v)
    if (x.is_string()) xs.push_back(x.get<std::string>());
  std::sort(xs.begin(), xs.end());
  return ordered_json(xs);
}

ordered_json canonical_oauth(const json& spec) {
  auto i = spec.find("oauth");
  if (i == spec.end() || !i->is_object()) return nullptr;
  auto& o = *i;
  auto enabled = o.find("enabled");
  if (enabled == o.end() || !enabled->is_boolean() || !enabled->get<bool>()) return nullptr;
  ordered_json out = ordered_json::object();
  out["enabled"] = true;
  out["clientId"] = or_null(o, "clientId");
  out["clientSecret"] = or_null(o, "clientSecret");
  out["scopes"] = o.contains("scopes") ? sorted_strings(o["scopes"]) : ordered_json(nullptr);
  out["audiences"] = o.contains("audiences") ? sorted_strings(o["audiences"]) : ordered_json(nullptr);
  out["authorizationUrl"] = or_null(o, "authorizationUrl");
  out["tokenUrl"] = or_null(o, "tokenUrl");
  out["redirectUri"] = or_null(o, "redirectUri");
  out["tokenParamName"] = or_null(o, "tokenParamName");
  out["registrationUrl"] = or_null(o, "registrationUrl");
  return out;
}

} // namespace

std::string canonical_transport(const server_config& c) {
  const json& s = c.spec;
  ordered_json o = ordered_json::object();
  o["transport"] = to_string(c.transport());
  o["command"] = or_null(s, "command");
  o["args"] = s.contains("args") ? ordered_json::parse(dump_text(s["args"])) : ordered_json::array();
  o["cwd"] = or_null(s, "cwd");
  o["env"] = sorted_pairs(s, "env");
  o["url"] = or_null(s, "url");
  o["httpUrl"] = or_null(s, "httpUrl");
  o["tcp"] = or_null(s, "tcp");
  o["headers"] = sorted_pairs(s, "headers");
  o["timeout"] = or_null(s, "timeout");
  o["oauth"] = canonical_oauth(s);
  o["authProviderType"] = or_null(s, "authProviderType");
  o["targetAudience"] = or_null(s, "targetAudience");
  o["targetServiceAccount"] = or_null(s, "targetServiceAccount");
  // The session advertises its elicitation capability at initialize, so a
  // changed policy needs a new connection. Appended only when set, so the
  // ids of every other server stay those of the reference implementation.
  if (c.elicitation) o["elicitation"] = to_string(*c.elicitation);
  // The way to the server: a new proxy or CA needs a new connection.
  if (s.contains("proxy")) o["proxy"] = or_null(s, "proxy");
  if (s.contains("caFile")) o["caFile"] = or_null(s, "caFile");
  // What the process may do and what it inherits: a new policy is a new
  // process. Only when there is one, as for elicitation.
  if (auto key = c.effective_sandbox.key(); !key.empty()) o["sandbox"] = key;
  return dump_text(o);
}

std::string compute_connection_id(const server_config& c) {
  return c.name + "::" + sha256_hex(canonical_transport(c)).substr(0, 16);
}

std::string connection_id(const server_config& c) {
  return c.connection_id_cache.empty() ? compute_connection_id(c) : c.connection_id_cache;
}

std::optional<std::pair<std::string, std::string>> parse_connection_id(std::string_view id) {
  auto pos = id.rfind("::");
  if (pos == std::string_view::npos || pos == 0 || pos + 2 >= id.size()) return std::nullopt;
  return std::make_pair(std::string(id.substr(0, pos)), std::string(id.substr(pos + 2)));
}

std::string approval_hash(const server_config& c) {
  json x = c.spec; // nlohmann::json keeps keys sorted at every depth
  x.erase("scope");
  x.erase("description");
  x.erase("extensionName");
  return sha256_hex(dump_text(x));
}

std::string filter_key(const server_config& c) {
  if (!c.filter_key_cache.empty()) return c.filter_key_cache;
  auto sorted = [](const std::optional<std::vector<std::string>>& xs) -> json {
    if (!xs) return nullptr;
    auto copy = *xs;
    std::sort(copy.begin(), copy.end());
    return copy;
  };
  json k = json::object();
  k["trust"] = c.trust ? json(*c.trust) : json(nullptr);
  k["includeTools"] = sorted(c.include_tools);
  k["excludeTools"] = sorted(c.exclude_tools);
  return dump_text(k);
}

} // namespace mcprt
