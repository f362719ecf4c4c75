#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mcprt {

/// Which settings keys take effect only after a restart. The watcher uses it
/// to stay silent when every changed key needs a restart anyway: waking the
/// reconciler for them would do nothing but churn.
///
/// Entries are flattened dot paths (`mcp.allowed`); a parent and its children
/// are separate entries, so a child may be hot while its parent is not.
class settings_schema {
public:
  settings_schema() = default;

  settings_schema(std::initializer_list<std::pair<const std::string, bool>> entries);

  /// Adds or replaces the entry for `key_path`.
  settings_schema& add(std::string key_path, bool requires_restart);

  /// The entry for exactly `key_path`, if there is one (no prefix search).
  std::optional<bool> find(std::string_view key_path) const;

  /// Longest-prefix lookup: tries `a.b.c`, then `a.b`, then `a`; the first
  /// entry found decides, so a leaf overrides its parent. A key with no
  /// matching entry at all is NOT restart-required: an unknown key must never
  /// be swallowed silently.
  bool requires_restart(std::string_view key_path) const;

  const std::map<std::string, bool, std::less<>>& entries() const {
    return entries_;
  }

  /// The schema of mcprt's own settings files.
  static const settings_schema& standard();

private:
  std::map<std::string, bool, std::less<>> entries_;
};

/// Dot paths of the leaves that differ between two parsed settings
/// documents, in sorted order.
/// - Objects are recursed into; a key present on one side only is reported
///   by the full paths of its leaves (an added `mcp: {allowed: [...]}`
///   reports `mcp.allowed`, not `mcp`, so that a hot key inside a new block
///   is not hidden behind its restart-required parent). An empty object
///   appearing or vanishing reports its own path. A null on one side of an
///   object counts as absent.
/// - Arrays and scalars are compared whole; an array change reports the
///   array's path, never an index.
/// - An object replaced by a non-object (or the reverse) reports the path.
/// - At the top level a missing (null) document is an empty object; a
///   top-level value that is neither null nor an object is compared whole
///   and reported as the empty path "".
/// Segments are joined with '.' without escaping: a key that itself holds a
/// dot (a server named `a.b` under `mcpServers`) yields an ambiguous path.
/// That is harmless for restart lookup, because every schema entry that can
/// contain user-chosen keys (`mcpServers`, `env`) is decided by its prefix.
std::vector<std::string> changed_keys(const nlohmann::json& before, const nlohmann::json& after);

/// True iff at least one changed key is not restart-required; false for an
/// empty list (nothing to tell anyone).
bool should_notify(const std::vector<std::string>& changed,
                   const settings_schema& schema = settings_schema::standard());

} // namespace mcprt
