#pragma once

// The runtime's side of OAuth: one credential file for every
// connection, a quiet OAuth client per streamable-HTTP connection (it uses
// and refreshes stored tokens, and reports `needs_auth` instead of asking
// anyone), and the interactive authorizations `mcprt auth` starts. No
// actors: the connections call in from the HTTP client's thread, an
// authorization runs (discovery, registration, the wait for its redirect)
// on a thread of its own, and nobody else waits for it.

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/server_config.hpp"
#include "mcprt/authorization.hpp"

namespace mcprt::io {
class http_auth;
class http_client;
class oauth_client;
class oauth_credential_store;
} // namespace mcprt::io

namespace mcprt {

class oauth_broker {
public:
  /// `http`: the client OAuth requests go out on (outlives the broker's
  /// shutdown()); null: each OAuth client makes its own.
  explicit oauth_broker(std::filesystem::path credentials_file, io::http_client* http = nullptr);
  ~oauth_broker();
  oauth_broker(const oauth_broker&) = delete;
  oauth_broker& operator=(const oauth_broker&) = delete;

  const std::filesystem::path& credentials_file() const { return file_; }

  /// The OAuth client of a new connection to `server`: null for a server
  /// that is not streamable HTTP or whose settings say `"oauth":
  /// {"enabled": false}`. It never opens a browser.
  std::shared_ptr<io::http_auth> client_for(const server_config& server);

  /// What starting an authorization gave.
  struct started {
    /// Where the person authorizes; empty when no person is needed (the
    /// client-credentials grant) and the authorization has finished.
    std::string authorization_url;
    bool finished = false;
  };

  /// Starts the authorization of `server` without waiting for its URL.
  /// `on_started` is called exactly once: with the URL once it is known,
  /// with `finished` when the flow ended without a person (client
  /// credentials), or with the reason it failed; on the flow's thread, or
  /// on the calling thread for a request refused at once. The flow goes on
  /// in the background; `on_end(ok, why)` is called on its thread when the
  /// tokens are stored or it failed. A second authorization of the same
  /// server cancels the first. The caller bounds the wait for the URL:
  /// the returned function cancels the flow (it does nothing once the flow
  /// ended, and is empty for a request refused at once).
  std::function<void()> begin_async(const server_config& server, const authorize_options& options,
                                    std::function<void(std::optional<started>, const std::string& error)> on_started,
                                    std::function<void(bool ok, const std::string& why)> on_end);

  /// Forgets every stored credential of `server`'s URL. False when there
  /// was none; throws std::runtime_error when the file cannot be written.
  bool forget(const server_config& server);

  /// Cancels running authorizations and waits for their threads.
  void shutdown();

  /// The host:port pairs this process listens on (the daemon's HTTP API).
  /// No OAuth request of any client of this broker goes there, those made
  /// before the call included. Replaces the previous list.
  void set_own_listeners(std::vector<listen_endpoint> listeners);

private:
  struct flow;
  struct listeners;
  io::http_client* http_ = nullptr;
  std::filesystem::path file_;
  std::shared_ptr<listeners> own_;
  std::shared_ptr<io::oauth_credential_store> store_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<flow>> flows_;
  bool stopped_ = false;
};

/// The URL of a streamable-HTTP server's config; nullopt for other transports.
std::optional<std::string> oauth_server_url(const server_config& server);

} // namespace mcprt
