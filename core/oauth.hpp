#pragma once

// The pure half of the OAuth 2.1 client of the MCP authorization spec
// (2025-11-25, with the 2025-03-26 fallbacks): what to ask for, where, and
// how to read the answers. No I/O; io/oauth_client drives a flow with it.
// Nothing here puts a token, secret or code into an error text.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mcprt::oauth {

/// An authorization or resource server's JSON answer, bounded (1 MiB, depth
/// 16); a null value when it is not JSON or too big.
nlohmann::json parse_answer(std::string_view body);

/// A `Bearer` challenge of a `WWW-Authenticate` header (RFC 6750, RFC 9728).
struct bearer_challenge {
  std::string error;             // "invalid_token", "insufficient_scope", ...
  std::string scope;             // space-separated, as sent
  std::string resource_metadata; // RFC 9728 protected-resource metadata URL
};

/// The Bearer challenge among the header's challenges; nullopt when there is
/// none. Parameter values may be quoted (with backslash escapes) or tokens.
std::optional<bearer_challenge> parse_www_authenticate(std::string_view header);

/// A URL split the way discovery needs it: `origin` is scheme://authority as
/// written (lower-case scheme), `path` has no trailing slash ("" for root).
struct url_parts {
  std::string origin;
  std::string path;
  std::string query;
};
std::optional<url_parts> split_url(std::string_view url);

/// The RFC 8707 resource indicator of an MCP server URL: without fragment
/// and query, scheme and host lower case.
std::string canonical_resource(std::string_view server_url);

/// Where to look for the protected-resource metadata, in order: the
/// challenge's `resource_metadata`, then the path-based well-known URL, then
/// the root one (only when the server URL has a path).
std::vector<std::string> protected_resource_metadata_urls(std::string_view server_url,
                                                          std::string_view from_challenge);

struct protected_resource_metadata {
  std::string resource;
  std::vector<std::string> authorization_servers;
  std::optional<std::vector<std::string>> scopes_supported;
};

/// Reads RFC 9728 metadata; nullopt with `error` set when it is not usable.
std::optional<protected_resource_metadata> parse_protected_resource_metadata(const nlohmann::json& j,
                                                                             std::string* error);

/// RFC 8707 / MCP: the metadata's resource must name this server: same
/// origin, and its path a prefix of the server's path on a segment boundary.
bool resource_matches(std::string_view server_url, std::string_view resource);

/// Where to look for an authorization server's metadata, in order (MCP
/// 2025-11-25): for an issuer with a path, OAuth path-inserted, OpenID
/// path-inserted, OpenID path-appended; for one without, OAuth then OpenID
/// at the root. Never the root URLs for an issuer with a path.
std::vector<std::string> authorization_server_metadata_urls(std::string_view issuer);

struct authorization_server_metadata {
  std::string issuer;
  std::string authorization_endpoint;
  std::string token_endpoint;
  std::string registration_endpoint;
  std::optional<std::vector<std::string>> scopes_supported;
  std::vector<std::string> response_types_supported;
  std::vector<std::string> grant_types_supported;
  std::vector<std::string> token_endpoint_auth_methods_supported;
  std::vector<std::string> code_challenge_methods_supported;
  bool client_id_metadata_document_supported = false;
  /// RFC 9207: the server puts `iss` into every authorization response, so
  /// a response without it is refused.
  bool authorization_response_iss_parameter_supported = false;
};

/// Reads RFC 8414 / OpenID metadata. The issuer must match
/// `expected_issuer`, the issuer the metadata was fetched for (a trailing
/// slash aside; RFC 8414 section 3.3): for a 2025-03-26 server without
/// resource metadata that is the MCP server's origin. Empty skips the check
/// (io/oauth_client always passes the issuer).
std::optional<authorization_server_metadata> parse_authorization_server_metadata(const nlohmann::json& j,
                                                                                 std::string_view expected_issuer,
                                                                                 std::string* error);

/// The 2025-03-26 defaults when a server publishes no metadata at all:
/// /authorize, /token and /register at the server's origin.
authorization_server_metadata default_endpoints(std::string_view server_url);

/// The scope to ask for: the challenge's, else the resource's
/// scopes_supported, else none (empty). `offline_access` is added only when
/// the authorization server lists it and the client wants refresh tokens.
std::string choose_scope(std::string_view challenge_scope,
                         const std::optional<std::vector<std::string>>& resource_scopes,
                         const std::optional<std::vector<std::string>>& server_scopes, bool want_refresh);

/// The union of two space-separated scope lists, first-seen order (step-up
/// keeps what was granted and adds what the 403 asked for).
std::string merge_scopes(std::string_view a, std::string_view b);

enum class client_auth { none, client_secret_basic, client_secret_post, private_key_jwt };
std::string to_string(client_auth a);

/// How to authenticate at the token endpoint: the first of the server's
/// methods we can do with what we have (a secret, a private key). An absent
/// list means client_secret_basic (RFC 8414's default) when there is a
/// secret, else none.
client_auth choose_client_auth(const std::vector<std::string>& supported, bool have_secret, bool have_private_key);

struct pkce_pair {
  std::string verifier;
  std::string challenge; // S256
};
/// A PKCE pair from 32 random bytes (the verifier is their base64url, 43
/// characters).
pkce_pair make_pkce(std::string_view random32);

std::string base64url(std::string_view bytes);
std::string base64(std::string_view bytes);
std::string sha256(std::string_view bytes);
/// Percent-encoding for application/x-www-form-urlencoded and queries.
std::string form_escape(std::string_view s);
std::string form_encode(const std::vector<std::pair<std::string, std::string>>& fields);
/// Decodes one form/query value (`+` is a space); nullopt for a bad escape.
std::optional<std::string> form_unescape(std::string_view s);
/// The fields of a query string; later duplicates are kept.
std::vector<std::pair<std::string, std::string>> parse_query(std::string_view query);

struct authorization_request {
  std::string client_id;
  std::string redirect_uri;
  std::string scope; // empty: omitted
  std::string state;
  std::string code_challenge;
  std::string resource; // empty: omitted
};
/// The authorization endpoint URL with the request's query appended.
std::string authorization_url(std::string_view endpoint, const authorization_request& r);

/// What the redirect brought back.
struct callback_result {
  std::string code;
  std::string state;
  std::string error;
  std::string error_description;
  std::optional<std::string> iss; // RFC 9207, when the response carries one
};
std::optional<callback_result> parse_callback(std::string_view query);

struct token_response {
  std::string access_token;
  std::string token_type;
  std::string refresh_token;
  std::string scope;
  std::optional<std::int64_t> expires_at; // unix seconds
};
/// A successful token endpoint answer; nullopt with `error` (the server's
/// `error` and `error_description`, never a token) otherwise. An access
/// token must be a Bearer token; a token exchange (RFC 8693) that issues
/// something else (an ID-JAG is `N_A`) passes `any_type`.
std::optional<token_response> parse_token_response(int status, std::string_view body, std::int64_t now,
                                                   std::string* error, bool any_type = false);

struct client_registration {
  std::string client_id;
  std::string client_secret;
  std::optional<std::int64_t> client_secret_expires_at;
  std::string token_endpoint_auth_method;
};
/// The RFC 7591 request body for a native client with a loopback redirect.
nlohmann::json registration_request(std::string_view client_name, const std::vector<std::string>& redirect_uris,
                                    std::string_view scope, std::string_view auth_method);
std::optional<client_registration> parse_registration_response(int status, std::string_view body,
                                                               std::string* error);

/// The claims of a private_key_jwt client assertion (RFC 7523): iss = sub =
/// client id, aud = the authorization server's issuer.
nlohmann::json client_assertion_claims(std::string_view client_id, std::string_view audience, std::int64_t now,
                                       std::string_view jti);

} // namespace mcprt::oauth

namespace mcprt::oauth {

/// A compact JWS over `claims`, signed with the PEM private key (PKCS#8 or
/// traditional): ES256, ES384, RS256 or PS256 as `alg` says. Empty with
/// `error` set when the key or algorithm is unusable; the error never quotes
/// the key.
std::string sign_jwt(const nlohmann::json& claims, std::string_view private_key_pem, std::string_view alg,
                     std::string* error);

} // namespace mcprt::oauth
