#include "core/oauth.hpp"

#include <algorithm>
#include <cctype>

#include <openssl/sha.h>

#include "core/ascii.hpp"
#include "core/oauth_endpoints.hpp"
#include "core/untrusted_text.hpp"

namespace mcprt::oauth {

using nlohmann::json;

namespace {

bool is_tchar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

void skip_ws(std::string_view s, std::size_t& i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
}

std::string lower(std::string_view s) {
  return ascii_lower(s);
}

// Server text for an error message: bounded, printable ASCII only.
std::string excerpt_ascii(std::string_view s, std::size_t max) {
  std::string out;
  for (char c : s.substr(0, max))
    out += c >= 0x20 && c < 0x7f ? c : '?';
  if (s.size() > max) out += "...";
  return out;
}

} // namespace

json parse_answer(std::string_view body) {
  json_limits limits;
  limits.max_bytes = 1u << 20;
  limits.max_depth = 16;
  limits.replace_invalid_utf8 = true;
  auto r = parse_bounded_json(body, limits);
  return r.ok() ? std::move(r.value) : json();
}

namespace {

std::string strip_trailing_slash(std::string_view s) {
  while (!s.empty() && s.back() == '/') s.remove_suffix(1);
  return std::string(s);
}

std::optional<std::vector<std::string>> string_list(const json& j, const char* key, std::string* error) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) {
    if (error) *error = std::string("'") + key + "' is not an array";
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& v : *it)
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

std::string oauth_string_field(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool contains(const std::vector<std::string>& v, std::string_view x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::vector<std::string> split_scopes(std::string_view s) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ') ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::string join_with_spaces(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) {
    if (!out.empty()) out += ' ';
    out += x;
  }
  return out;
}

// Endpoints are fetched over the network with our client's credentials:
// only http(s) URLs of sane size are taken.
bool plausible_url(std::string_view u) {
  return u.size() <= 2048 && split_url(u).has_value();
}

} // namespace

std::optional<bearer_challenge> parse_www_authenticate(std::string_view h) {
  if (h.size() > 16384) h = h.substr(0, 16384);
  // challenge = scheme [ 1*SP #auth-param ], challenges comma-separated: a
  // token not followed by '=' starts the next challenge.
  std::string scheme;
  bool seen_bearer = false;
  bearer_challenge c;
  std::size_t i = 0;
  while (i < h.size()) {
    while (i < h.size() && (h[i] == ' ' || h[i] == '\t' || h[i] == ',')) ++i;
    std::size_t start = i;
    while (i < h.size() && is_tchar(h[i])) ++i;
    std::string token = lower(h.substr(start, i - start));
    skip_ws(h, i);
    if (token.empty()) {
      ++i; // junk
      continue;
    }
    if (i < h.size() && h[i] == '=') {
      ++i;
      skip_ws(h, i);
      std::string value;
      if (i < h.size() && h[i] == '"') {
        ++i;
        while (i < h.size() && h[i] != '"') {
          if (h[i] == '\\' && i + 1 < h.size()) ++i;
          value += h[i++];
        }
        if (i < h.size()) ++i;
      } else {
        std::size_t v = i;
        while (i < h.size() && h[i] != ',' && h[i] != ' ' && h[i] != '\t') ++i;
        value = std::string(h.substr(v, i - v));
      }
      if (scheme != "bearer") continue;
      if (token == "error") c.error = value;
      else if (token == "scope") c.scope = value;
      else if (token == "resource_metadata") c.resource_metadata = value;
      continue;
    }
    if (scheme == "bearer") break;
    scheme = token;
    seen_bearer = seen_bearer || scheme == "bearer";
  }
  if (!seen_bearer) return std::nullopt;
  return c;
}

std::optional<url_parts> split_url(std::string_view url) {
  auto sep = url.find("://");
  if (sep == std::string_view::npos) return std::nullopt;
  std::string scheme = lower(url.substr(0, sep));
  if (scheme != "http" && scheme != "https") return std::nullopt;
  auto rest = url.substr(sep + 3);
  if (auto hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
  auto slash = rest.find_first_of("/?");
  auto authority = rest.substr(0, slash);
  if (authority.empty() || authority.find('@') != std::string_view::npos) return std::nullopt;
  for (char c : url)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return std::nullopt;
  url_parts p;
  p.origin = scheme + "://" + lower(authority);
  if (slash != std::string_view::npos) {
    auto tail = rest.substr(slash);
    auto q = tail.find('?');
    auto path = tail.substr(0, q);
    p.path = strip_trailing_slash(path);
    if (q != std::string_view::npos) p.query = std::string(tail.substr(q + 1));
  }
  return p;
}

std::string canonical_resource(std::string_view server_url) {
  auto p = split_url(server_url);
  if (!p) return std::string(server_url);
  return p->origin + p->path;
}

std::vector<std::string> protected_resource_metadata_urls(std::string_view server_url,
                                                          std::string_view from_challenge) {
  std::vector<std::string> out;
  if (!from_challenge.empty() && plausible_url(from_challenge)) out.emplace_back(from_challenge);
  if (auto p = split_url(server_url)) {
    const std::string root = p->origin + "/.well-known/oauth-protected-resource";
    if (!p->path.empty()) out.push_back(root + p->path);
    out.push_back(root);
  }
  // The challenge may name one of the well-known URLs itself.
  std::vector<std::string> unique;
  for (auto& u : out)
    if (!contains(unique, u)) unique.push_back(std::move(u));
  return unique;
}

std::optional<protected_resource_metadata> parse_protected_resource_metadata(const json& j, std::string* error) {
  if (!j.is_object()) {
    if (error) *error = "protected resource metadata is not a JSON object";
    return std::nullopt;
  }
  protected_resource_metadata m;
  m.resource = oauth_string_field(j, "resource");
  if (m.resource.empty()) {
    if (error) *error = "protected resource metadata has no 'resource'";
    return std::nullopt;
  }
  std::string list_error;
  auto servers = string_list(j, "authorization_servers", &list_error);
  if (servers)
    for (auto& s : *servers)
      if (plausible_url(s)) m.authorization_servers.push_back(std::move(s));
  m.scopes_supported = string_list(j, "scopes_supported", &list_error);
  return m;
}

bool resource_matches(std::string_view server_url, std::string_view resource) {
  auto s = split_url(server_url);
  auto r = split_url(resource);
  if (!s || !r || s->origin != r->origin) return false;
  if (r->path.empty()) return true;
  if (s->path.size() < r->path.size() || s->path.compare(0, r->path.size(), r->path) != 0) return false;
  return s->path.size() == r->path.size() || s->path[r->path.size()] == '/';
}

std::vector<std::string> authorization_server_metadata_urls(std::string_view issuer) {
  auto p = split_url(issuer);
  if (!p) return {};
  if (p->path.empty())
    return {p->origin + "/.well-known/oauth-authorization-server", p->origin + "/.well-known/openid-configuration"};
  return {p->origin + "/.well-known/oauth-authorization-server" + p->path,
          p->origin + "/.well-known/openid-configuration" + p->path,
          p->origin + p->path + "/.well-known/openid-configuration"};
}

std::optional<authorization_server_metadata> parse_authorization_server_metadata(const json& j,
                                                                                 std::string_view expected_issuer,
                                                                                 std::string* error) {
  auto fail = [&](std::string why) -> std::optional<authorization_server_metadata> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  if (!j.is_object()) return fail("authorization server metadata is not a JSON object");
  authorization_server_metadata m;
  m.issuer = oauth_string_field(j, "issuer");
  m.authorization_endpoint = oauth_string_field(j, "authorization_endpoint");
  m.token_endpoint = oauth_string_field(j, "token_endpoint");
  m.registration_endpoint = oauth_string_field(j, "registration_endpoint");
  if (!expected_issuer.empty())
    if (auto why = issuer_mismatch(m.issuer, expected_issuer); !why.empty()) return fail(std::move(why));
  if (m.token_endpoint.empty() || !plausible_url(m.token_endpoint))
    return fail("authorization server metadata has no usable 'token_endpoint'");
  if (!m.authorization_endpoint.empty() && !plausible_url(m.authorization_endpoint))
    return fail("authorization server metadata has an unusable 'authorization_endpoint'");
  if (!m.registration_endpoint.empty() && !plausible_url(m.registration_endpoint)) m.registration_endpoint.clear();
  std::string ignored;
  m.scopes_supported = string_list(j, "scopes_supported", &ignored);
  m.response_types_supported = string_list(j, "response_types_supported", &ignored).value_or(std::vector<std::string>{});
  m.grant_types_supported = string_list(j, "grant_types_supported", &ignored).value_or(std::vector<std::string>{});
  m.token_endpoint_auth_methods_supported =
    string_list(j, "token_endpoint_auth_methods_supported", &ignored).value_or(std::vector<std::string>{});
  m.code_challenge_methods_supported =
    string_list(j, "code_challenge_methods_supported", &ignored).value_or(std::vector<std::string>{});
  auto cimd = j.find("client_id_metadata_document_supported");
  m.client_id_metadata_document_supported = cimd != j.end() && cimd->is_boolean() && cimd->get<bool>();
  auto iss = j.find("authorization_response_iss_parameter_supported");
  m.authorization_response_iss_parameter_supported = iss != j.end() && iss->is_boolean() && iss->get<bool>();
  return m;
}

authorization_server_metadata default_endpoints(std::string_view server_url) {
  authorization_server_metadata m;
  auto p = split_url(server_url);
  std::string origin = p ? p->origin : std::string();
  m.issuer = origin;
  m.authorization_endpoint = origin + "/authorize";
  m.token_endpoint = origin + "/token";
  m.registration_endpoint = origin + "/register";
  m.code_challenge_methods_supported = {"S256"};
  return m;
}

std::string choose_scope(std::string_view challenge_scope, const std::optional<std::vector<std::string>>& resource_scopes,
                         const std::optional<std::vector<std::string>>& server_scopes, bool want_refresh) {
  std::vector<std::string> scopes;
  if (!split_scopes(challenge_scope).empty()) scopes = split_scopes(challenge_scope);
  else if (resource_scopes) scopes = *resource_scopes;
  if (want_refresh && server_scopes && contains(*server_scopes, "offline_access") && !contains(scopes, "offline_access")
      && !scopes.empty())
    scopes.push_back("offline_access");
  return join_with_spaces(scopes);
}

std::string merge_scopes(std::string_view a, std::string_view b) {
  auto out = split_scopes(a);
  for (auto& s : split_scopes(b))
    if (!contains(out, s)) out.push_back(std::move(s));
  return join_with_spaces(out);
}

std::string to_string(client_auth a) {
  switch (a) {
    case client_auth::none: return "none";
    case client_auth::client_secret_basic: return "client_secret_basic";
    case client_auth::client_secret_post: return "client_secret_post";
    case client_auth::private_key_jwt: return "private_key_jwt";
  }
  return "none";
}

client_auth choose_client_auth(const std::vector<std::string>& supported, bool have_secret, bool have_private_key) {
  if (supported.empty()) return have_secret ? client_auth::client_secret_basic : client_auth::none;
  for (const auto& m : supported) {
    if (m == "private_key_jwt" && have_private_key) return client_auth::private_key_jwt;
    if (m == "client_secret_basic" && have_secret) return client_auth::client_secret_basic;
    if (m == "client_secret_post" && have_secret) return client_auth::client_secret_post;
    if (m == "none" && !have_secret) return client_auth::none;
  }
  // Nothing matches what we hold: send what we have, and let the server say.
  if (have_private_key) return client_auth::private_key_jwt;
  return have_secret ? client_auth::client_secret_basic : client_auth::none;
}

std::string base64(std::string_view in) {
  static constexpr char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8)
                 | static_cast<unsigned char>(in[i + 2]);
    out += tbl[(v >> 18) & 63];
    out += tbl[(v >> 12) & 63];
    out += tbl[(v >> 6) & 63];
    out += tbl[v & 63];
  }
  if (i < in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    out += tbl[(v >> 18) & 63];
    out += tbl[(v >> 12) & 63];
    out += i + 1 < in.size() ? tbl[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string base64url(std::string_view in) {
  std::string out = base64(in);
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (auto& c : out) {
    if (c == '+') c = '-';
    else if (c == '/') c = '_';
  }
  return out;
}

std::string sha256(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

pkce_pair make_pkce(std::string_view random32) {
  pkce_pair p;
  p.verifier = base64url(random32);
  p.challenge = base64url(sha256(p.verifier));
  return p;
}

std::string form_escape(std::string_view s) {
  return percent_encode(s);
}

std::string form_encode(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [k, v] : fields) {
    if (!out.empty()) out += '&';
    out += form_escape(k) + "=" + form_escape(v);
  }
  return out;
}

std::optional<std::string> form_unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%') {
      if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1]))
          || !std::isxdigit(static_cast<unsigned char>(s[i + 2])))
        return std::nullopt;
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> parse_query(std::string_view q) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!q.empty()) {
    auto amp = q.find('&');
    auto part = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (part.empty()) continue;
    auto eq = part.find('=');
    auto k = form_unescape(part.substr(0, eq));
    auto v = form_unescape(eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1));
    if (k && v) out.emplace_back(std::move(*k), std::move(*v));
  }
  return out;
}

std::string authorization_url(std::string_view endpoint, const authorization_request& r) {
  std::vector<std::pair<std::string, std::string>> q{{"response_type", "code"},
                                                      {"client_id", r.client_id},
                                                      {"redirect_uri", r.redirect_uri},
                                                      {"state", r.state},
                                                      {"code_challenge", r.code_challenge},
                                                      {"code_challenge_method", "S256"}};
  if (!r.scope.empty()) q.emplace_back("scope", r.scope);
  if (!r.resource.empty()) q.emplace_back("resource", r.resource);
  std::string url(endpoint);
  url += url.find('?') == std::string::npos ? '?' : '&';
  return url + form_encode(q);
}

std::optional<callback_result> parse_callback(std::string_view query) {
  callback_result r;
  bool any = false;
  for (auto& [k, v] : parse_query(query)) {
    if (v.size() > 4096) continue;
    if (k == "code") r.code = v, any = true;
    else if (k == "state") r.state = v;
    else if (k == "error") r.error = v, any = true;
    else if (k == "error_description") r.error_description = v;
    else if (k == "iss") r.iss = v;
  }
  if (!any) return std::nullopt;
  return r;
}

namespace {

// An OAuth error answer, described without echoing anything but the
// server's error code and description (bounded, control characters blanked).
std::string oauth_error_text(int status, std::string_view body) {
  std::string why = "HTTP " + std::to_string(status);
  auto j = parse_answer(body);
  if (j.is_object()) {
    auto e = oauth_string_field(j, "error");
    auto d = oauth_string_field(j, "error_description");
    if (!e.empty()) why += ": " + excerpt_ascii(e, 80);
    if (!d.empty()) why += " (" + excerpt_ascii(d, 200) + ")";
  }
  return why;
}

} // namespace

std::optional<token_response> parse_token_response(int status, std::string_view body, std::int64_t now,
                                                   std::string* error, bool any_type) {
  auto fail = [&](std::string why) -> std::optional<token_response> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  if (status < 200 || status >= 300) return fail(oauth_error_text(status, body));
  auto j = parse_answer(body);
  if (!j.is_object()) return fail("token response is not a JSON object");
  token_response t;
  t.access_token = oauth_string_field(j, "access_token");
  t.token_type = oauth_string_field(j, "token_type");
  t.refresh_token = oauth_string_field(j, "refresh_token");
  t.scope = oauth_string_field(j, "scope");
  if (t.access_token.empty()) return fail("token response has no 'access_token'");
  if (t.access_token.size() > 16384 || t.refresh_token.size() > 16384) return fail("token response token too long");
  for (char c : t.access_token)
    if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f) return fail("token response access token is not printable");
  if (t.token_type.empty()) t.token_type = "Bearer";
  if (!any_type && lower(t.token_type) != "bearer") return fail("token type '" + excerpt_ascii(t.token_type, 40) + "' is not Bearer");
  auto exp = j.find("expires_in");
  if (exp != j.end() && exp->is_number() && exp->get<double>() > 0 && exp->get<double>() < 1e10)
    t.expires_at = now + static_cast<std::int64_t>(exp->get<double>());
  return t;
}

json registration_request(std::string_view client_name, const std::vector<std::string>& redirect_uris,
                          std::string_view scope, std::string_view auth_method) {
  json j{{"client_name", client_name},
         {"redirect_uris", redirect_uris},
         {"grant_types", {"authorization_code", "refresh_token"}},
         {"response_types", {"code"}},
         {"token_endpoint_auth_method", auth_method},
         {"application_type", "native"}};
  if (!scope.empty()) j["scope"] = scope;
  return j;
}

std::optional<client_registration> parse_registration_response(int status, std::string_view body, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<client_registration> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  if (status < 200 || status >= 300) return fail(oauth_error_text(status, body));
  auto j = parse_answer(body);
  if (!j.is_object()) return fail("registration response is not a JSON object");
  client_registration r;
  r.client_id = oauth_string_field(j, "client_id");
  r.client_secret = oauth_string_field(j, "client_secret");
  r.token_endpoint_auth_method = oauth_string_field(j, "token_endpoint_auth_method");
  if (r.client_id.empty() || r.client_id.size() > 4096) return fail("registration response has no usable 'client_id'");
  auto exp = j.find("client_secret_expires_at");
  if (exp != j.end() && exp->is_number_integer() && exp->get<std::int64_t>() > 0)
    r.client_secret_expires_at = exp->get<std::int64_t>();
  return r;
}

json client_assertion_claims(std::string_view client_id, std::string_view audience, std::int64_t now,
                             std::string_view jti) {
  return json{{"iss", client_id}, {"sub", client_id}, {"aud", audience},
              {"iat", now},       {"exp", now + 300}, {"jti", jti}};
}

} // namespace mcprt::oauth
