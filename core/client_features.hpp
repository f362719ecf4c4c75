#pragma once

// What mcprt offers a server as an MCP client, beyond listing and calling:
// roots and elicitation. A session advertises a capability only when it can
// answer it (see core/mcp_session).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mcprt {

/// A root offered to servers through `roots/list`.
struct mcp_root {
  std::string uri;  // a file:// URI
  std::string name; // may be empty

  friend bool operator==(const mcp_root& a, const mcp_root& b) {
    return a.uri == b.uri && a.name == b.name;
  }
};

/// `file://` URI of an absolute path, percent-encoding every byte outside
/// RFC 3986's unreserved set and `/` (so spaces, `%`, `#`, `?` and non-ASCII
/// survive a server's URI parser).
std::string file_uri(const std::string& absolute_path);

/// The root for a folder: its file URI, named by its last component ("/"
/// for the file system's root).
mcp_root root_for_folder(const std::string& absolute_path);

/// How `elicitation/create` is answered.
enum class elicitation_policy : uint8_t {
  /// Not advertised; a request that comes anyway is declined.
  decline,
  /// Advertised; accepted with every field the requested schema gives a
  /// default for (SEP-1034).
  accept_defaults,
  /// Advertised; the host answers.
  ask,
};

/// "decline", "accept-defaults", "ask".
std::string to_string(elicitation_policy p);
/// The inverse of to_string; nullopt for anything else.
std::optional<elicitation_policy> parse_elicitation_policy(const std::string& s);

struct client_features {
  /// nullopt: the roots capability is not advertised.
  std::optional<std::vector<mcp_root>> roots;
  elicitation_policy elicitation = elicitation_policy::decline;
  /// Whether `sampling/createMessage` is advertised. Only a host can answer
  /// it (the session hands it over as a host request), so set this only
  /// when one is listening; unset, a request for it gets -32601.
  bool sampling = false;
};

} // namespace mcprt
