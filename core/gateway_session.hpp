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

  /// A request to the client (sampling/createMessage, elicitation/create,
  /// roots/list) under a fresh id: the id and the message to send. Its
  /// answer comes back in gateway_effects::answers.
  std::pair<std::uint64_t, nlohmann::json> request(const std::string& method, nlohmann::json params);

  /// Forgets a request to the client that no longer wants an answer.
  void forget_request(std::uint64_t id) { outbound_.erase(id); }

  bool initialized() const { return initialized_; }
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

  options opts_;
  bool initialized_ = false;
  std::string protocol_;
  std::string client_name_;
  std::string client_version_;
  nlohmann::json client_caps_ = nlohmann::json::object();
  std::optional<std::string> log_level_;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, std::string> outbound_; // our requests to the client by id: their method
};

} // namespace mcprt
