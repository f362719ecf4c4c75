#pragma once

// The OAuth 2.1 client of one remote MCP server: it gives the HTTP transport
// the Authorization header, and on 401 / 403 runs discovery, registration
// and a grant (authorization code with PKCE through a loopback redirect,
// client credentials, or the cross-app token exchange) until it holds a
// token. core/oauth decides what to send; this file sends it.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <map>

#include <nlohmann/json.hpp>

#include "core/http_url.hpp"
#include "core/oauth_endpoints.hpp"
#include "core/oauth_token_store.hpp"
#include "io/http_transport.hpp"

namespace mcprt::io {

/// The `oauth` object of a server's settings (and `mcprt call --oauth`).
struct oauth_settings {
  /// Pre-registered client (oauth.clientId / oauth.clientSecret).
  std::string client_id;
  std::string client_secret;
  /// A client ID metadata document URL (oauth.clientMetadataUrl), used as
  /// the client id when the authorization server supports such documents.
  std::string client_metadata_url;
  /// oauth.scopes: asked for instead of what discovery suggests.
  std::vector<std::string> scopes;
  /// "authorization_code" (default) or "client_credentials".
  std::string grant_type = "authorization_code";
  /// private_key_jwt client authentication (oauth.privateKey, PEM text).
  std::string private_key_pem;
  std::string signing_algorithm = "ES256";
  /// Cross-app access (SEP-990): an ID token from the enterprise IdP is
  /// exchanged there for an ID-JAG, which the authorization server takes
  /// in the JWT-bearer grant.
  std::string idp_token_endpoint;
  std::string idp_client_id;
  std::string idp_client_secret;
  std::string idp_id_token;
  std::string client_name = "mcprt";

  /// Parses the settings object; nullopt with `error` for a wrong type.
  static std::optional<oauth_settings> from_json(const nlohmann::json& j, std::string* error);
};

/// Where an oauth_client keeps credentials; keyed by server URL and client
/// key (the configured client id, or "dynamic"). Implementations are
/// thread-safe: every connection's client calls in from HTTP workers.
class oauth_credential_store {
public:
  virtual ~oauth_credential_store() = default;
  virtual std::optional<oauth_credentials> load(const std::string& server_url, const std::string& client_key) = 0;
  virtual void save(const std::string& server_url, const std::string& client_key, const oauth_credentials& c) = 0;
  /// Drops every client of the URL; false when there was none.
  virtual bool forget(const std::string& server_url) = 0;
};

/// The user's credential file (core/oauth_token_store), shared by every
/// mcprt process. A write that fails is reported through `warn` and the
/// credentials live on in memory for this process.
class file_credential_store final : public oauth_credential_store {
public:
  file_credential_store(std::filesystem::path file, std::function<void(const std::string&)> warn);
  std::optional<oauth_credentials> load(const std::string& server_url, const std::string& client_key) override;
  void save(const std::string& server_url, const std::string& client_key, const oauth_credentials& c) override;
  bool forget(const std::string& server_url) override;

private:
  void report();
  std::mutex mu_;
  oauth_token_store store_;
  std::function<void(const std::string&)> warn_;
};

/// How a person completes an authorization.
struct oauth_interaction {
  /// false: never start an authorization; the server needs `mcprt auth`.
  bool interactive = false;
  /// Run with the authorization URL as its last argument (through /bin/sh).
  /// Empty: the URL is only reported.
  std::string browser_command;
  /// Told the URL before the browser starts (printed by `mcprt auth`).
  std::function<void(const std::string& url)> on_authorization_url;
  std::chrono::milliseconds callback_timeout{300000};
  /// The most one request may take, all of it (connect, TLS, answer).
  std::chrono::milliseconds request_timeout{15000};
  /// When set, every network step (discovery, registration, the token
  /// requests, name lookups) and the wait for the redirect end by then:
  /// `mcprt auth --timeout-ms` sets it for the whole authorization.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  /// The host:port pairs this process listens on (the daemon's HTTP API),
  /// asked at each request: no OAuth request is sent there, whatever
  /// discovery names (docs/oauth.md, "OAuth endpoint rules"). Filled by
  /// mcprt::oauth_broker from runtime::set_own_listeners(), which the
  /// daemon (cli/serve.cpp) calls once its listener is bound. Unset: none.
  std::function<std::vector<host_port>()> own_listeners;
  /// The client OAuth requests go out on (the runtime's); null: one of the
  /// oauth_client's own, made with its first request.
  http_client* http = nullptr;
};

class oauth_client final : public http_auth {
public:
  oauth_client(std::string server_url, oauth_settings settings, oauth_interaction interaction,
               std::shared_ptr<oauth_credential_store> store);

  std::optional<std::string> authorization() override;
  bool on_unauthorized(int status, std::string_view www_authenticate, std::string_view sent) override;
  std::string failure() const override;

  /// Authorizes now, without a challenge (`mcprt auth`). False with
  /// failure() set when it could not.
  bool authorize();

  /// The key credentials are stored under.
  std::string client_key() const;

  /// Ends an authorization waiting for its redirect (it fails, "cancelled").
  /// Safe from any thread.
  void cancel() override;

private:
  struct answer;
  bool run_flow(const std::string& challenge_scope, const std::string& resource_metadata);
  bool refresh_locked();
  bool adopt_newer_locked();
  void fail(std::string why);

  // One request to an OAuth endpoint (`role` names it in messages): the
  // endpoint rules first, then at most request_timeout and never past the
  // deadline, no redirect followed, the answer bounded.
  answer send(const std::string& role, const std::string& method, const std::string& url,
              const std::vector<std::pair<std::string, std::string>>& headers, const std::string& body,
              const std::string& content_type);
  // Empty when `url` may be used as `role`, else why not (the rules of
  // core/oauth_endpoints, with every address of its host); `addresses`
  // gets those addresses.
  std::string check_endpoint(const std::string& role, const std::string& url,
                             std::vector<oauth::ip_address>* addresses);
  // When the current step must end: now + request_timeout, or the deadline.
  std::chrono::steady_clock::time_point step_limit() const;
  // Why a step ran out of time, for failure().
  std::string out_of_time() const;

  const std::string server_url_;
  const oauth_settings settings_;
  const oauth_interaction interaction_;
  std::shared_ptr<oauth_credential_store> store_;

  http_client& http();
  std::mutex own_http_mu_;
  std::unique_ptr<http_client> own_http_;

  std::atomic<bool> cancelled_{false};
  std::mutex wake_mu_;
  std::function<void()> wake_; // set while a flow waits for its redirect, or a request runs

  // The MCP server's side of the endpoint rules, looked up once per flow
  // or refresh (guarded by mu_).
  std::optional<oauth::endpoint_context> context_;

  mutable std::mutex mu_;
  std::optional<oauth_credentials> saved_;
  bool loaded_ = false;
  std::string failure_;
};

/// Starts `command "$url"` through /bin/sh in a process group of its own,
/// stdin and stdout on /dev/null (the URL is the shell's argument, never
/// part of its script). Its pid, or -1. The caller reaps it.
int start_browser(const std::string& command, const std::string& url);

/// An in-memory store (one-shot commands that must not write a file, tests).
class memory_credential_store final : public oauth_credential_store {
public:
  std::optional<oauth_credentials> load(const std::string& server_url, const std::string& client_key) override;
  void save(const std::string& server_url, const std::string& client_key, const oauth_credentials& c) override;
  bool forget(const std::string& server_url) override;

private:
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, oauth_credentials> entries_;
};

} // namespace mcprt::io
