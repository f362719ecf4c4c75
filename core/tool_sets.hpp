#pragma once

// Named tool sets: what one gateway endpoint (`/mcp/<set>`, `mcprt gateway
// --set NAME`) shows a client, chosen from the workspace's servers and
// tools by glob. Clients cap what they take (VS Code 128 tools, Cursor 80)
// and agents pay context for every tool listed; a set fits the catalog to
// the client. Pure: settings JSON in, sets and verdicts out.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mcprt {

/// One set, as settings define it under `mcp.toolSets.<name>`.
/// - `servers`: globs over server names; empty: every server.
/// - `tools`: globs `TOOL` (a tool of any of the set's servers) or
///   `SERVER/TOOL` (split at the first `/`), over the server's own tool
///   names; empty: every tool of the set's servers.
/// - `exclude`: the same forms; a match keeps the tool out whatever else
///   matched (`SERVER/*` keeps a whole server out).
struct tool_set {
  std::string name;
  std::string description;
  std::vector<std::string> servers, tools, exclude;
  std::string source; // the settings file that defined it
  std::string scope;  // its scope (user, workspace)

  friend bool operator==(const tool_set& a, const tool_set& b) {
    return a.name == b.name && a.description == b.description && a.servers == b.servers && a.tools == b.tools
           && a.exclude == b.exclude && a.source == b.source && a.scope == b.scope;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_set& x) {
  return f(x.name, x.description, x.servers, x.tools, x.exclude, x.source, x.scope);
}

using tool_set_map = std::map<std::string, tool_set, std::less<>>;

inline constexpr std::size_t max_tool_sets_per_file = 100;
inline constexpr std::size_t max_tool_set_name_bytes = 64;

/// A set's name is one URL path segment: 1 to 64 of [A-Za-z0-9_.-], not
/// "." or "..".
bool valid_tool_set_name(std::string_view name);

/// Reads `mcp.toolSets` of a settings file's `mcp` object. On an error,
/// `error` says where and what (never quoting a value) and `error_path`
/// holds the key path; the result is then empty.
struct tool_sets_parse {
  tool_set_map sets;
  std::string error;
  std::vector<std::string> error_path;
};
tool_sets_parse parse_tool_sets(const nlohmann::json& mcp, std::string_view source, std::string_view scope);

/// Why a server or a tool is not in `set`, or nullopt when it is.
/// Reasons: "server_not_in_set" (no `servers` glob matches it),
/// "not_in_set" (no `tools` glob matches the tool), "excluded" (an
/// `exclude` entry matches; `detail` names it).
struct tool_set_exclusion {
  std::string reason;
  std::string detail;
};
std::optional<tool_set_exclusion> server_out_of_set(const tool_set& set, std::string_view server);
std::optional<tool_set_exclusion> tool_out_of_set(const tool_set& set, std::string_view server,
                                                  std::string_view tool);

/// Model APIs take tool names of at most 64 characters; MCP allows 128.
inline constexpr std::size_t max_exposed_tool_name = 64;

/// A name within `max_bytes` for `exposed`: the name itself when it fits
/// and `attempt` is 0, else its first bytes (cut on a UTF-8 boundary), '_'
/// and 8 hex digits of a hash of the whole name and `attempt`. Deterministic:
/// the same name and attempt give the same result on every machine; a
/// caller whose candidate is taken tries the next attempt.
std::string shortened_tool_name(std::string_view exposed, unsigned attempt = 0,
                                std::size_t max_bytes = max_exposed_tool_name);

} // namespace mcprt
