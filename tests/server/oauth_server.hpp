// --oauth: the HTTP transport's /mcp demands a bearer token, and the same
// process is the authorization server that issues it (RFC 9728 resource
// metadata, RFC 8414 server metadata, RFC 7591 registration, the code flow
// with PKCE S256 and RFC 8707 resource, refresh with rotation). There is no
// login page: /authorize redirects with a code at once, as the MCP
// conformance suite's server does, so tests need no browser.
#pragma once

#include "server_core.hpp"

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

namespace httplib {
class Server;
struct Request;
struct Response;
} // namespace httplib

namespace mcprt_test_server {

class oauth_server {
public:
  explicit oauth_server(const options& opts);

  // Adds the metadata, /register, /authorize and /token routes.
  void install(httplib::Server& svr);

  // Every URL we advertise carries the port, known only once bound; call
  // before the server starts listening.
  void set_port(int port);

  // Called first by each /mcp handler: true when the request carries a
  // live token; otherwise it has filled in the 401 and the handler returns.
  bool admit(const httplib::Request& req, httplib::Response& res);

private:
  struct client {
    std::string secret;
    std::string auth_method; // none, client_secret_post, client_secret_basic
  };
  struct code_grant {
    std::string client_id;
    std::string redirect_uri;
    std::string challenge;
    std::string scope;
    std::string resource;
    steady::time_point expires;
  };
  struct access_grant {
    std::string client_id;
    std::string scope;
    steady::time_point expires;
  };
  struct refresh_grant {
    std::string client_id;
    std::string scope;
  };

  void handle_register(const httplib::Request& req, httplib::Response& res);
  void handle_authorize(const httplib::Request& req, httplib::Response& res);
  void handle_token(const httplib::Request& req, httplib::Response& res);

  // The metadata documents with the --oauth-*metadata overrides applied.
  json authorization_server_metadata();
  json resource_metadata_document();
  // "{base}" in every string of `j` replaced by base().
  json with_base(json j) const;

  // Both take mu_.
  void check_revoke_file_locked();
  void log_locked(const std::string& line);

  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string resource() const { return base() + "/mcp"; }
  std::string default_scope() const;

  const options& opts_;
  int port_ = 0;

  std::mutex mu_; // handlers run on httplib's thread pool
  std::map<std::string, client> clients_;
  std::map<std::string, code_grant> codes_;
  std::map<std::string, access_grant> access_tokens_;
  std::map<std::string, refresh_grant> refresh_tokens_;
};

} // namespace mcprt_test_server
