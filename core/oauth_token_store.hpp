#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_file_store.hpp"

namespace mcprt {

/// What mcprt keeps about one OAuth client of one remote MCP server: the
/// client registration and the tokens it was last issued. Empty strings and
/// nullopt mean "not known" and are not written.
struct oauth_credentials {
  std::string issuer; // the authorization server's issuer URL
  std::string client_id;
  std::string client_secret;                            // empty for a public client
  std::optional<std::int64_t> client_secret_expires_at; // unix seconds
  std::string access_token;
  std::string token_type;
  std::string refresh_token;
  std::string scope;
  std::optional<std::int64_t> expires_at; // unix seconds, of the access token
  std::string resource;                   // the resource indicator the tokens were issued for
  /// The token endpoint the tokens and client secret were issued by: a
  /// refresh, and any request with the secret, goes there and nowhere else.
  /// Empty in records written before it was kept ("unbound"): such a
  /// refresh goes only to the token endpoint that discovery names for the
  /// stored `issuer` (issuer-checked), as it did then.
  std::string token_endpoint;

  bool operator==(const oauth_credentials& other) const;
  bool operator!=(const oauth_credentials& other) const { return !(*this == other); }
};

/// OAuth credentials for remote MCP servers, in one JSON file shared by
/// every mcprt process of a user (json_file_store: atomic writes mode 0600,
/// flock-serialised read-modify-write, malformed files backed up):
///
///   { "<server url>": { "<client key>": { "issuer": ..., "client_id": ...,
///                                         "access_token": ..., ... } } }
///
/// The client key is the configured OAuth client id, or `dynamic` for a
/// client registered dynamically or described by a metadata document: a
/// server URL can carry both, and changing the configured id must not hand
/// out tokens issued to another client.
///
/// The file holds secrets (tokens, client secrets). No warning or exception
/// this store produces quotes a value from it: a malformed record is named
/// by file, server URL and client key only, and reads as absent.
///
/// Not thread-safe: one instance per owner.
class oauth_token_store {
public:
  /// The client key of a dynamically registered or metadata-document client.
  static constexpr std::string_view dynamic_client = "dynamic";

  explicit oauth_token_store(std::filesystem::path file);

  /// `<home>/<config_dir>/mcp-oauth.json`, beside the approvals file.
  static std::filesystem::path default_path(const std::filesystem::path& home,
                                            std::string_view config_dir = ".mcprt");

  const std::filesystem::path& path() const { return store_.path(); }

  /// The stored credentials, or nullopt when there are none or the record
  /// is malformed (a warning then says so). Sees other processes' writes.
  std::optional<oauth_credentials> get(const std::string& server_url, const std::string& client_key);

  /// Replaces the record for this client. Throws std::runtime_error naming
  /// the path and the OS error when the file cannot be read or written (the
  /// file and this store's view are then unchanged), std::invalid_argument
  /// for an empty URL or client key or text that is not valid UTF-8.
  void put(const std::string& server_url, const std::string& client_key, const oauth_credentials& credentials);

  /// Drops every client of `server_url` (`mcprt auth --logout`). False when
  /// there was nothing to drop. Throws like put().
  bool forget(const std::string& server_url);

  /// Drops the access and refresh tokens of one client and keeps its
  /// registration, so a failed refresh leads to a new authorization rather
  /// than a new registration. False when there were no tokens to drop.
  /// Throws like put().
  bool forget_tokens(const std::string& server_url, const std::string& client_key);

  /// Drops the cached content; the next call reads the file again.
  void reload() { store_.reload(); }

  /// Problems found while reading, oldest first, each naming the file.
  const std::vector<std::string>& warnings() const { return store_.warnings(); }

  /// Returns and clears the collected warnings.
  std::vector<std::string> take_warnings() { return store_.take_warnings(); }

private:
  json_file_store store_;
};

} // namespace mcprt
