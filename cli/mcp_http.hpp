#pragma once

// The gateway's HTTP transports on the daemon's listener:
//
//   POST   /mcp                 a JSON-RPC message: 200 with the answer as
//                               JSON, or as an event stream for tools/call
//                               (progress, logs and the server's requests
//                               for the client come first); 202 for a
//                               notification or response
//   GET    /mcp                 the session's stream of the rest
//   DELETE /mcp                 ends the session
//   GET    /sse                 2024-11-05 HTTP+SSE: the stream, whose first
//                               event names the POST endpoint
//   POST   /messages?sessionId= 2024-11-05: a message; answers come on the stream
//
// The daemon's checks run first (Host, Origin, token, JSON content type);
// here the MCP rules: Mcp-Session-Id, MCP-Protocol-Version, Accept.

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/event_stream.hpp"
#include "cli/http_server.hpp"
#include "core/http_rules.hpp"

namespace mcprt {
class gateway;
}

namespace mcprt::cli {

class event_stream;

struct mcp_http_options {
  std::size_t max_body = 1 << 20;
  std::size_t max_json_depth = 64;
  /// Messages a stream may lag behind before it is dropped.
  std::size_t stream_queue = 1024;
  /// Open 2024-11-05 streams; more get 503.
  std::size_t max_legacy_streams = 1024;
  /// The daemon's one limit on open streams of every kind (--max-streams);
  /// none when null.
  std::shared_ptr<stream_slots> slots;
};

class mcp_http {
public:
  using header_list = std::vector<std::pair<std::string, std::string>>;

  mcp_http(gateway& gw, mcp_http_options opts);
  ~mcp_http();

  /// Serves one request of the routes above; `extra` (CORS) goes on every
  /// response to it.
  /// `set`: the tool set of `/mcp/<set>`, "" for `/mcp`.
  void handle(const std::shared_ptr<http_exchange>& ex, http::route_id route, header_list extra,
              const std::string& set = {});

  /// On the server's keep-alive timer: a comment on idle streams, and the
  /// sessions of closed 2024-11-05 streams end.
  void keepalive();
  /// Ends every stream (the daemon stops).
  void stop();

  struct legacy;

private:
  void post(const std::shared_ptr<http_exchange>& ex, const header_list& extra, const std::string& set);
  void post_modern(const std::shared_ptr<http_exchange>& ex, nlohmann::json msg, const header_list& extra,
                   const std::string& set);
  void refuse_version(const std::shared_ptr<http_exchange>& ex, const nlohmann::json& id, const header_list& extra);
  void get(const std::shared_ptr<http_exchange>& ex, const header_list& extra, const std::string& set);
  void remove(const std::shared_ptr<http_exchange>& ex, const header_list& extra, const std::string& set);
  void legacy_stream(const std::shared_ptr<http_exchange>& ex, const header_list& extra);
  void legacy_post(const std::shared_ptr<http_exchange>& ex, const header_list& extra);

  gateway& gw_;
  mcp_http_options opts_;
  std::mutex mtx_;
  std::vector<std::weak_ptr<event_stream>> streams_;
  std::map<std::string, std::shared_ptr<legacy>> legacy_;
};

} // namespace mcprt::cli
