#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/client_features.hpp"
#include "core/sandbox_policy.hpp"

namespace mcprt {

/// Where a server's definition came from, lowest to highest priority.
enum class config_scope { user, project, workspace, session };

std::string to_string(config_scope s);
std::optional<config_scope> parse_config_scope(std::string_view s);

/// Servers from these scopes need the user's approval before any process
/// starts: they arrive with the workspace, not from the user.
bool is_gated(config_scope s);

enum class transport_kind { stdio, sse, http, unknown };

std::string to_string(transport_kind t);

/// One `mcpServers` entry. `spec` is the validated object as written (null
/// fields dropped, unknown fields kept): equality and the approval hash are
/// computed on it. The typed members are views of it for the runtime.
struct server_config {
  std::string name;
  config_scope scope = config_scope::user;
  std::string source; // file the entry came from ("" for host-provided)
  nlohmann::json spec = nlohmann::json::object();

  std::optional<std::string> command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::optional<std::string> cwd;
  std::optional<std::string> url;
  std::optional<std::string> http_url;
  std::map<std::string, std::string> headers;
  /// `"proxy"`: the forward proxy for this server's HTTP (`http://`,
  /// `https://`, `socks5h://` URL; "direct" for none); unset, the
  /// environment's HTTPS_PROXY / HTTP_PROXY / NO_PROXY.
  std::optional<std::string> proxy;
  /// `"caFile"`: a PEM file of CAs trusted for this server besides the
  /// system store.
  std::optional<std::string> ca_file;
  std::optional<long long> timeout_ms;
  std::optional<bool> trust;
  std::optional<std::vector<std::string>> include_tools;
  std::optional<std::vector<std::string>> exclude_tools;
  bool disabled = false;
  std::optional<std::string> description;
  /// `"elicitation": "decline" | "accept-defaults"`: how this server's
  /// elicitation requests are answered; unset, the runtime's default. Part
  /// of the connection id, since the session advertises it at initialize.
  std::optional<elicitation_policy> elicitation;
  /// `"prefix"`: what the gateway puts before this server's tool and prompt
  /// names; unset, `<name>__`. At most 64 bytes of ASCII letters, digits,
  /// `_`, `-` and `.` (the characters MCP allows in tool names); may be "".
  std::optional<std::string> prefix;
  /// `"pinDefinitions"`: whether the definitions of this server's tools,
  /// prompts and resources are pinned at approval (core/definition_pins:
  /// a gated server's `false` is not honoured).
  std::optional<bool> pin_definitions;

  /// `"sandbox"` as written (core/sandbox_policy); unset, the default for
  /// its scope.
  std::optional<sandbox_spec> sandbox;
  /// `"inheritEnv"`: more of the runtime's environment (user scope only).
  std::optional<inherit_env_spec> inherit_env;
  /// What the server runs under, once the settings are assembled
  /// (effective_sandbox); part of its connection id.
  sandbox_setting effective_sandbox;

  transport_kind transport() const;

  /// connection_id(*this), computed once by parse_server_config: the pool
  /// looks entries up by it on every acquire. Treat a parsed config as
  /// immutable; re-parse to change it.
  std::string connection_id_cache;
  /// filter_key(*this), computed once by parse_server_config: the
  /// reconcile plan compares it for every live server on every pass.
  std::string filter_key_cache;
  /// Values its variables took from the environment or stored inputs, each
  /// with the placeholder as written (`${GH_TOKEN}`), longest first. They
  /// are secrets like `env`, but can end up in what is shown: an error
  /// quotes the URL's path or the command. without_secrets puts the
  /// placeholders back. Empty for a config as written.
  std::vector<std::pair<std::string, std::string>> secrets;
};

/// `text` (a message about `c`: an error, a stderr line) with every value in
/// c.secrets replaced by its placeholder.
std::string without_secrets(const server_config& c, std::string text);

/// A validation failure, with the path of the offending value (object keys
/// and array indices) so its position in the source text can be found.
/// `message` never quotes a value from the file (a half-typed secret must
/// not reach an event or a log).
struct config_error {
  std::vector<std::string> path;
  std::string message;
  bool index_last = false; // whether path.back() is an array index

  /// `mcpServers.fs.args[2]`, for messages. The keys come from the file:
  /// each is escaped for display (escape_for_display) and cut after
  /// `max_shown_key_bytes`, so the path can be logged and printed as is.
  std::string path_string() const;
};

inline constexpr std::size_t max_shown_key_bytes = 64;

/// The longest server name accepted, in bytes. Names are matched against
/// every `mcp.allowed` / `mcp.excluded` glob on each reload, at a cost that
/// grows with the square of their length; and a gateway's tool names
/// (`<server>__<tool>`) must fit the 64 characters model APIs allow.
inline constexpr std::size_t max_server_name_bytes = 64;

/// Why `name` cannot name a server, or nullopt when it can. A name is shown
/// in tables, log lines and events, so it must be 1 to
/// `max_server_name_bytes` bytes of printable UTF-8: no control characters
/// (C0, DEL, C1), no line or paragraph separators, no bidirectional
/// controls. The answer says what is allowed and does not quote the name.
std::optional<std::string> server_name_problem(std::string_view name);

/// Parses one `mcpServers` entry. Returns the config or the first error.
/// Besides types it refuses what would run differently from what was
/// written or approved: a NUL in `command`, `args`, `cwd`, `env`, `url` or
/// `headers` (the C strings handed to exec and HTTP end there), an `env`
/// name with `=`, a header name that is not an HTTP token and a header
/// value with a line break (it would add headers). Never throws.
struct server_parse_result {
  std::optional<server_config> config;
  std::optional<config_error> error;
};
server_parse_result parse_server_config(const std::string& name, const nlohmann::json& value,
                                        config_scope scope,
                                        const std::vector<std::string>& path_prefix = {});

/// The inverse of parse: the spec object (used for round trips and output).
inline const nlohmann::json& to_json(const server_config& c) {
  return c.spec;
}

/// Server maps are compared by their specs: key order ignored, array order
/// kept, a missing map is the same as an empty one.
using server_map = std::map<std::string, server_config>;

bool servers_equal(const server_config& a, const server_config& b);
bool servers_equal(const server_map& a, const server_map& b);

} // namespace mcprt
