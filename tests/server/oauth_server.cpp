#include "oauth_server.hpp"

#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <strings.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace mcprt_test_server {

namespace {

// Codes are used within a second by a real client; a minute leaves room
// for a slow CI machine without keeping them around forever.
constexpr auto k_code_ttl = std::chrono::seconds(60);
constexpr const char* k_access_prefix = "mcprt-test-at-";
constexpr const char* k_refresh_prefix = "mcprt-test-rt-";

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1) throw std::runtime_error("RAND_bytes failed");
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (auto b : buf) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 0xf]);
  }
  return out;
}

std::string base64(const unsigned char* data, std::size_t len) {
  std::string out(4 * ((len + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(len));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::optional<std::string> base64_decode(const std::string& in) {
  if (in.empty() || in.size() % 4 != 0) return std::nullopt;
  std::string out(3 * in.size() / 4, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding as zero bytes.
  std::size_t len = static_cast<std::size_t>(n);
  for (std::size_t i = in.size(); i > 0 && in[i - 1] == '='; --i)
    --len;
  out.resize(len);
  return out;
}

// RFC 8252 section 7.3: native clients listen on a loopback port of their
// choice, so any port is fine but nothing else is.
bool is_loopback_redirect(const std::string& uri) {
  for (const char* prefix : {"http://127.0.0.1:", "http://localhost:"}) {
    std::string p = prefix;
    if (uri.rfind(p, 0) != 0) continue;
    auto rest = uri.substr(p.size());
    auto slash = rest.find('/');
    auto port = rest.substr(0, slash);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return false;
    return slash != std::string::npos;
  }
  return false;
}

// RFC 7636 section 4.1: 43 to 128 unreserved characters.
bool is_valid_verifier(const std::string& v) {
  if (v.size() < 43 || v.size() > 128) return false;
  for (char c : v)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_' && c != '~') return false;
  return true;
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& error, const std::string& description) {
  // RFC 6749 section 5.1: token answers must not be cached; harmless elsewhere.
  res.set_header("Cache-Control", "no-store");
  send_json(res, status, {{"error", error}, {"error_description", description}});
}

std::string param(const httplib::Params& params, const std::string& key) {
  auto it = params.find(key);
  return it == params.end() ? std::string() : it->second;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (auto& item : items)
    out += (out.empty() ? "" : " ") + item;
  return out;
}

// BASE64URL(SHA256(verifier)), no padding (RFC 7636 section 4.2).
std::string pkce_s256(const std::string& verifier) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(verifier.data()), verifier.size(), digest);
  auto out = base64(digest, sizeof digest);
  for (auto& c : out) {
    if (c == '+') c = '-';
    else if (c == '/') c = '_';
  }
  while (!out.empty() && out.back() == '=')
    out.pop_back();
  return out;
}

} // namespace

oauth_server::oauth_server(const options& opts) : opts_(opts) {}

void oauth_server::set_port(int port) {
  port_ = port;
}

std::string oauth_server::default_scope() const {
  return join(opts_.oauth_scopes);
}

void oauth_server::log_locked(const std::string& line) {
  if (opts_.oauth_log.empty()) return;
  std::ofstream out(opts_.oauth_log, std::ios::app);
  out << line << '\n';
}

void oauth_server::check_revoke_file_locked() {
  if (opts_.oauth_revoke_file.empty()) return;
  std::error_code ec;
  if (!std::filesystem::exists(opts_.oauth_revoke_file, ec)) return;
  auto n = access_tokens_.size() + refresh_tokens_.size();
  access_tokens_.clear();
  refresh_tokens_.clear();
  std::filesystem::remove(opts_.oauth_revoke_file, ec);
  log_locked("revoke " + std::to_string(n));
  log_line("mcprt-test-server: oauth: revoked " + std::to_string(n) + " tokens");
}

bool oauth_server::admit(const httplib::Request& req, httplib::Response& res) {
  std::lock_guard<std::mutex> lock(mu_);
  check_revoke_file_locked();
  auto header = req.get_header_value("Authorization");
  // The scheme is case-insensitive (RFC 7235 section 2.1).
  if (header.size() > 7 && strncasecmp(header.c_str(), "Bearer ", 7) == 0) {
    auto it = access_tokens_.find(header.substr(7));
    if (it != access_tokens_.end()) {
      if (steady::now() < it->second.expires) return true;
      access_tokens_.erase(it);
    }
  }
  log_locked("unauthorized " + req.method + " " + req.path);
  std::string challenge = "Bearer resource_metadata=\"" + base() + "/.well-known/oauth-protected-resource/mcp\"";
  if (!opts_.oauth_scopes.empty()) challenge += ", scope=\"" + default_scope() + "\"";
  res.set_header("WWW-Authenticate", challenge);
  send_json(res, 401, {{"error", "invalid_token"}});
  return false;
}

json oauth_server::with_base(json j) const {
  if (j.is_string()) {
    auto s = j.get<std::string>();
    for (auto at = s.find("{base}"); at != std::string::npos; at = s.find("{base}", at + base().size()))
      s.replace(at, 6, base());
    return s;
  }
  if (j.is_object() || j.is_array())
    for (auto& v : j)
      v = with_base(v);
  return j;
}

json oauth_server::resource_metadata_document() {
  json doc = {{"resource", resource()}, {"authorization_servers", {base()}}};
  if (!opts_.oauth_scopes.empty()) doc["scopes_supported"] = opts_.oauth_scopes;
  doc["bearer_methods_supported"] = {"header"};
  if (!opts_.oauth_resource_metadata.empty()) doc.update(with_base(json::parse(opts_.oauth_resource_metadata)));
  return doc;
}

json oauth_server::authorization_server_metadata() {
  auto scopes = opts_.oauth_scopes;
  scopes.push_back("offline_access");
  json doc = {{"issuer", base()},
              {"authorization_endpoint", base() + "/authorize"},
              {"token_endpoint", base() + "/token"},
              {"registration_endpoint", base() + "/register"},
              {"response_types_supported", {"code"}},
              {"grant_types_supported", {"authorization_code", "refresh_token"}},
              {"code_challenge_methods_supported", {"S256"}},
              {"token_endpoint_auth_methods_supported", {"none", "client_secret_post", "client_secret_basic"}},
              {"scopes_supported", scopes}};
  if (!opts_.oauth_metadata.empty()) doc.update(with_base(json::parse(opts_.oauth_metadata)));
  if (!opts_.oauth_metadata_file.empty()) {
    std::ifstream in(opts_.oauth_metadata_file);
    if (in) {
      auto extra = json::parse(in, nullptr, false);
      if (extra.is_object()) doc.update(with_base(extra));
    }
  }
  return doc;
}

void oauth_server::install(httplib::Server& svr) {
  auto resource_metadata = [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, resource_metadata_document());
  };
  // The path-suffixed form is what our 401 names; the bare one is where a
  // client looks when it starts from the origin (RFC 9728 section 3.1).
  svr.Get("/.well-known/oauth-protected-resource/mcp", resource_metadata);
  svr.Get("/.well-known/oauth-protected-resource", resource_metadata);

  svr.Get("/.well-known/oauth-authorization-server", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, authorization_server_metadata());
  });

  svr.Post("/register",
           [this](const httplib::Request& req, httplib::Response& res) { handle_register(req, res); });
  svr.Get("/authorize",
          [this](const httplib::Request& req, httplib::Response& res) { handle_authorize(req, res); });
  svr.Post("/token", [this](const httplib::Request& req, httplib::Response& res) { handle_token(req, res); });
  // Sends any request on to ?to=URL with 307, which keeps its method and
  // body: metadata that names it tests that no OAuth request follows.
  auto redirect = [this](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      log_locked("redirect " + req.method);
    }
    res.set_redirect(req.get_param_value("to"), 307);
  };
  svr.Get("/redirect", redirect);
  svr.Post("/redirect", redirect);
  // A second token endpoint, for metadata that moves it: whatever reaches
  // it is logged first, so a test sees a refresh token sent where it should
  // not have been.
  svr.Post("/other/token", [this](const httplib::Request& req, httplib::Response& res) {
    httplib::Params form;
    httplib::detail::parse_query_text(req.body, form);
    {
      std::lock_guard<std::mutex> lock(mu_);
      log_locked("elsewhere-token " + param(form, "grant_type"));
    }
    handle_token(req, res);
  });
}

void oauth_server::handle_register(const httplib::Request& req, httplib::Response& res) {
  if (opts_.oauth_register_hang) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      log_locked("register-hang");
    }
    // Nothing ever wakes this: the connection stays open, unanswered, until
    // the client gives up (or two minutes pass).
    std::mutex m;
    std::condition_variable never;
    std::unique_lock<std::mutex> lock(m);
    never.wait_for(lock, std::chrono::seconds(120), [] { return false; });
    send_error(res, 503, "temporarily_unavailable", "--oauth-register-hang");
    return;
  }
  auto meta = json::parse(req.body, nullptr, false);
  if (meta.is_discarded() || !meta.is_object()) {
    send_error(res, 400, "invalid_client_metadata", "body is not a JSON object");
    return;
  }
  // RFC 7591 section 2: the default is client_secret_basic.
  std::string method = "client_secret_basic";
  if (meta.contains("token_endpoint_auth_method")) {
    auto& m = meta["token_endpoint_auth_method"];
    method = m.is_string() ? m.get<std::string>() : std::string();
  }
  if (method != "none" && method != "client_secret_post" && method != "client_secret_basic") {
    send_error(res, 400, "invalid_client_metadata", "unsupported token_endpoint_auth_method");
    return;
  }
  auto uris = meta.value("redirect_uris", json());
  if (!uris.is_array() || uris.empty()) {
    send_error(res, 400, "invalid_redirect_uri", "redirect_uris must be a non-empty array");
    return;
  }
  for (auto& uri : uris) {
    if (!uri.is_string() || !is_loopback_redirect(uri.get<std::string>())) {
      send_error(res, 400, "invalid_redirect_uri", "redirect_uris must be http://127.0.0.1:PORT/... or localhost");
      return;
    }
  }

  client c{method == "none" ? "" : random_hex(32), method};
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    do {
      id = "mcprt-test-client-" + random_hex(8);
    } while (clients_.count(id) != 0);
    clients_.emplace(id, c);
    log_locked("register " + id);
  }
  meta["token_endpoint_auth_method"] = method;
  meta["client_id"] = id;
  meta["client_id_issued_at"] =
    std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (!c.secret.empty()) {
    meta["client_secret"] = c.secret;
    meta["client_secret_expires_at"] = 0;
  }
  send_json(res, 201, meta);
}

void oauth_server::handle_authorize(const httplib::Request& req, httplib::Response& res) {
  auto get = [&](const char* key) { return req.has_param(key) ? req.get_param_value(key) : std::string(); };
  auto client_id = get("client_id");
  auto redirect_uri = get("redirect_uri");
  auto scope = get("scope");
  auto resource_param = get("resource");

  std::lock_guard<std::mutex> lock(mu_);
  auto fail = [&](const std::string& error, const std::string& why) {
    log_locked("authorize-error " + error);
    send_error(res, 400, error, why);
  };
  if (get("response_type") != "code") return fail("unsupported_response_type", "response_type must be code");
  if (clients_.count(client_id) == 0) return fail("invalid_client", "unknown client_id");
  if (!is_loopback_redirect(redirect_uri))
    return fail("invalid_request", "redirect_uri must be http://127.0.0.1:PORT/... or localhost");
  if (get("code_challenge").empty() || get("code_challenge_method") != "S256")
    return fail("invalid_request", "PKCE with code_challenge_method=S256 is required");
  if (!resource_param.empty() && resource_param != resource())
    return fail("invalid_target", "resource must be " + resource());

  if (scope.empty()) scope = default_scope();
  std::string code;
  do {
    code = random_hex(16);
  } while (codes_.count(code) != 0);
  auto& grant = codes_[code];
  grant.client_id = client_id;
  grant.redirect_uri = redirect_uri;
  grant.challenge = get("code_challenge");
  grant.scope = scope;
  grant.resource = resource_param;
  grant.expires = steady::now() + k_code_ttl;
  log_locked("authorize " + client_id + " scope=" + scope + " resource=" + resource_param);

  auto location = redirect_uri + (redirect_uri.find('?') == std::string::npos ? "?" : "&") + "code=" + code;
  if (req.has_param("state")) location += "&state=" + httplib::detail::encode_query_param(get("state"));
  if (opts_.oauth_redirect_iss)
    location +=
      "&iss=" + httplib::detail::encode_query_param(with_base(*opts_.oauth_redirect_iss).get<std::string>());
  res.set_redirect(location, 302);
}

void oauth_server::handle_token(const httplib::Request& req, httplib::Response& res) {
  // Parsed here rather than trusting httplib to merge the form into params.
  httplib::Params form;
  httplib::detail::parse_query_text(req.body, form);
  auto grant_type = param(form, "grant_type");

  std::lock_guard<std::mutex> lock(mu_);
  check_revoke_file_locked();
  auto fail = [&](int status, const std::string& error, const std::string& why) {
    log_locked("token-error " + error);
    send_error(res, status, error, why);
  };

  // Client authentication, as the client registered (RFC 6749 2.3.1).
  std::string client_id = param(form, "client_id");
  std::optional<std::string> basic_secret;
  auto authz = req.get_header_value("Authorization");
  if (authz.size() > 6 && strncasecmp(authz.c_str(), "Basic ", 6) == 0) {
    auto decoded = base64_decode(authz.substr(6));
    auto colon = decoded ? decoded->find(':') : std::string::npos;
    if (colon == std::string::npos) return fail(401, "invalid_client", "malformed Basic credentials");
    client_id = httplib::detail::decode_url(decoded->substr(0, colon), true);
    basic_secret = httplib::detail::decode_url(decoded->substr(colon + 1), true);
  }
  auto cit = clients_.find(client_id);
  if (cit == clients_.end()) return fail(401, "invalid_client", "unknown client_id");
  const auto& c = cit->second;
  if (c.auth_method == "client_secret_basic" && basic_secret != c.secret)
    return fail(401, "invalid_client", "client_secret_basic credentials missing or wrong");
  if (c.auth_method == "client_secret_post" && (basic_secret || param(form, "client_secret") != c.secret))
    return fail(401, "invalid_client", "client_secret_post credentials missing or wrong");
  if (c.auth_method == "none" && basic_secret) return fail(401, "invalid_client", "a public client has no secret");

  std::string scope;
  if (grant_type == "authorization_code") {
    auto it = codes_.find(param(form, "code"));
    if (it == codes_.end()) return fail(400, "invalid_grant", "unknown or already used code");
    // Single use even when the exchange fails (RFC 6749 4.1.2).
    auto grant = it->second;
    codes_.erase(it);
    if (grant.client_id != client_id) return fail(400, "invalid_grant", "code was issued to another client");
    if (steady::now() >= grant.expires) return fail(400, "invalid_grant", "code expired");
    if (param(form, "redirect_uri") != grant.redirect_uri)
      return fail(400, "invalid_grant", "redirect_uri differs");
    auto verifier = param(form, "code_verifier");
    if (!is_valid_verifier(verifier) || pkce_s256(verifier) != grant.challenge)
      return fail(400, "invalid_grant", "code_verifier does not match the code_challenge");
    auto res_param = param(form, "resource");
    if (!res_param.empty() && res_param != resource())
      return fail(400, "invalid_target", "resource must be " + resource());
    scope = grant.scope;
  } else if (grant_type == "refresh_token") {
    auto it = refresh_tokens_.find(param(form, "refresh_token"));
    if (it == refresh_tokens_.end())
      return fail(400, "invalid_grant", "unknown, rotated or revoked refresh token");
    if (it->second.client_id != client_id) return fail(400, "invalid_grant", "refresh token of another client");
    auto res_param = param(form, "resource");
    if (!res_param.empty() && res_param != resource())
      return fail(400, "invalid_target", "resource must be " + resource());
    scope = it->second.scope;
    // Rotation: the old refresh token dies with this use (OAuth 2.1 4.3.1).
    refresh_tokens_.erase(it);
  } else {
    return fail(400, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token");
  }

  auto access = k_access_prefix + random_hex(32);
  auto refresh = k_refresh_prefix + random_hex(32);
  access_tokens_[access] = {client_id, scope, steady::now() + std::chrono::seconds(opts_.oauth_token_ttl_s)};
  refresh_tokens_[refresh] = {client_id, scope};
  log_locked("token " + grant_type);
  res.set_header("Cache-Control", "no-store");
  send_json(res, 200,
            {{"access_token", access},
             {"token_type", "Bearer"},
             {"expires_in", opts_.oauth_token_ttl_s},
             {"refresh_token", refresh},
             {"scope", scope}});
}

} // namespace mcprt_test_server
