#pragma once

// One downstream MCP session of the gateway, sans-I/O: the
// client's JSON-RPC messages in; answers, work for upstream servers and
// bookkeeping out, as values. The gateway (mcprt/gateway) carries the
// effects out: it owns the runtime session, the transport and the timers.
//
// What is answered here, from the catalog alone: initialize, ping, the four
// listings, logging/setLevel, and every malformed message. What needs a
// server becomes a gateway_dispatch naming the server and carrying the
// params in the server's own names.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcprt/version.hpp"
#include "core/gateway_catalog.hpp"

namespace mcprt {

/// The protocol revisions the gateway speaks, newest first: a client's
/// revision among them is answered with itself, any other with the newest.
inline constexpr std::array<std::string_view, 4> gateway_protocols = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                                      "2024-11-05"};

/// The stateless revision: no initialize, no session; every request
/// carries its revision and the client's capabilities in `_meta`.
inline constexpr std::string_view gateway_modern_protocol = "2026-07-28";

/// Every revision the gateway serves, newest first (server/discover's
/// supportedVersions and UnsupportedProtocolVersionError's `supported`).
std::vector<std::string> gateway_supported_versions();

/// JSON-RPC and MCP error codes the gateway answers with.
namespace gateway_error {
inline constexpr int parse = -32700;
inline constexpr int invalid_request = -32600;
inline constexpr int method_not_found = -32601;
inline constexpr int invalid_params = -32602;
inline constexpr int internal = -32603;
inline constexpr int resource_not_found = -32002;
/// 2026-07-28: the requested revision is not spoken here (`data.supported`).
inline constexpr int unsupported_protocol_version = -32022;
/// 2026-07-28: a mirrored HTTP header is missing or disagrees with the body.
inline constexpr int header_mismatch = -32020;
/// 2026-07-28: the request needs a capability its client did not declare
/// (`data.requiredCapabilities`).
inline constexpr int missing_capability = -32021;
} // namespace gateway_error

/// Work for an upstream server on behalf of one downstream request.
struct gateway_dispatch {
  nlohmann::json id; // the downstream request's id
  /// tools/call, prompts/get, resources/read, resources/subscribe,
  /// resources/unsubscribe or completion/complete.
  std::string method;
  /// The server that answers. For a `stale` tool call: the configured
  /// server the name looks like (may be empty: none).
  std::string server;
  /// tools/call: the server's own tool name.
  std::string name;
  /// tools/call: the arguments (an object); otherwise the params to send,
  /// with names rewritten to the server's own.
  nlohmann::json params;
  /// The client's progress token (tools/call `_meta.progressToken`).
  std::optional<nlohmann::json> progress_token;
  /// A tool call of a name the catalog does not list (a client with a
  /// stale list): answer with isError, the reason and the remedy.
  bool stale = false;
};

struct gateway_effects {
  /// To the client: answers (responses only; the gateway adds notifications).
  std::vector<nlohmann::json> send;
  std::vector<gateway_dispatch> dispatch;
  /// Ids of the client's requests it cancelled (notifications/cancelled).
  std::vector<nlohmann::json> cancelled;
  /// The client's answers to the gateway's requests: our id and the whole
  /// message (with `result` or `error`).
  std::vector<std::pair<std::uint64_t, nlohmann::json>> answers;
  /// logging/setLevel: pass it on to the servers that log.
  std::optional<std::string> log_level;
  bool initialized = false;   // notifications/initialized came
  bool roots_changed = false; // notifications/roots/list_changed came
  /// A 2026-07-28 request's HTTP status: 200, or 400/404 with the error in
  /// `send`.
  int status = 200;
  /// A 2026-07-28 request that carries `requestState`: the retry of a
  /// request that got an InputRequiredResult. Nothing is dispatched; the
  /// gateway finds the request it continues.
  struct input_retry {
    nlohmann::json id;
    std::string method;
    std::string name; // tools/call and prompts/get: params.name; resources/read: params.uri
    std::string request_state;
    nlohmann::json input_responses; // an object (empty when absent)
  };
  std::optional<input_retry> retry;
  /// A 2026-07-28 subscriptions/listen: the stream the gateway keeps open
  /// for the notifications its filter asks for.
  struct listen_request {
    nlohmann::json id; // the subscription's id in every notification
    bool tools = false, prompts = false, resources = false;
    std::vector<std::string> uris; // resourceSubscriptions
  };
  std::optional<listen_request> listen;
};

/// The HTTP headers of a 2026-07-28 request that mirror its body
/// (MCP-Protocol-Version, Mcp-Method, Mcp-Name), as sent. Over stdio there
/// are none to check (`http` false).
struct modern_headers {
  bool http = true;
  std::optional<std::string> protocol;
  std::optional<std::string> method;
  std::optional<std::string> name;
  /// Mcp-Param-<name> headers: name (as sent, after the prefix) and value.
  std::vector<std::pair<std::string, std::string>> params;
};

class gateway_session {
public:
  struct options {
    std::string name = "mcprt";
    std::string version = MCPRT_VERSION;
    std::string instructions;
  };

  explicit gateway_session(options o);

  /// One message of the client (already parsed within bounds).
  gateway_effects on_message(const nlohmann::json& msg, const gateway_catalog& catalog);

  /// One 2026-07-28 message, stateless: validated against its headers and
  /// `_meta`, whose client capabilities and identity this session takes.
  /// A session serves one such request (and the retries of it).
  gateway_effects on_modern_message(const nlohmann::json& msg, const modern_headers& headers,
                                    const gateway_catalog& catalog);

  /// The 2026-07-28 result to send for `result` (an upstream server's, or
  /// the catalog's): `resultType` set, and for the cacheable methods
  /// `ttlMs` and `cacheScope` (always "private": what the gateway shows is
  /// its owner's workspace).
  static nlohmann::json modern_result(const std::string& method, nlohmann::json result);

  /// A request to the client (sampling/createMessage, elicitation/create,
  /// roots/list) under a fresh id: the id and the message to send. Its
  /// answer comes back in gateway_effects::answers.
  std::pair<std::uint64_t, nlohmann::json> request(const std::string& method, nlohmann::json params);

  /// Forgets a request to the client that no longer wants an answer.
  void forget_request(std::uint64_t id) { outbound_.erase(id); }

  bool initialized() const { return initialized_; }
  /// The session speaks 2026-07-28 (on_modern_message).
  bool modern() const { return modern_; }
  const std::string& protocol() const { return protocol_; }
  /// `clientInfo` of initialize: name and version, cut to 256 bytes each.
  const std::string& client_name() const { return client_name_; }
  const std::string& client_version() const { return client_version_; }
  /// Whether the client advertised `capability` (sampling, elicitation, roots).
  bool client_can(std::string_view capability) const;
  /// The client advertised form/url elicitation (form when it named none).
  bool client_elicits(std::string_view mode) const;
  std::optional<std::string> log_level() const { return log_level_; }

  static nlohmann::json result(const nlohmann::json& id, nlohmann::json result);
  static nlohmann::json error(const nlohmann::json& id, int code, const std::string& message,
                              nlohmann::json data = nullptr);
  static nlohmann::json notification(const std::string& method, nlohmann::json params = nullptr);

  /// The revision answered to a client that asked for `requested`.
  static std::string negotiate(std::string_view requested);

private:
  void on_request(const nlohmann::json& msg, const gateway_catalog& catalog, gateway_effects& fx);
  void on_notification(const nlohmann::json& msg, gateway_effects& fx);
  void initialize(const nlohmann::json& id, const nlohmann::json& params, const gateway_catalog& catalog,
                  gateway_effects& fx);

  void take_client_capabilities(const nlohmann::json& caps);
  void take_client_info(const nlohmann::json& info);

  options opts_;
  bool initialized_ = false;
  bool modern_ = false;
  std::string protocol_;
  std::string client_name_;
  std::string client_version_;
  nlohmann::json client_caps_ = nlohmann::json::object();
  std::optional<std::string> log_level_;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, std::string> outbound_; // our requests to the client by id: their method
};

} // namespace mcprt
