#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/definition_pins.hpp"
#include "core/json_file_store.hpp"

namespace mcprt {

/// A server's pinned definitions, with the approval (config) hash they
/// were pinned under, and what the server offers now that differs.
struct pin_record {
  std::string hash;
  definition_pins pins;
  /// listing_digest of the held-back listing, and its changes in words
  /// (describe_changes: escaped, bounded); empty when nothing is held.
  std::string held_digest;
  std::string held_changes;
};

/// The definitions pinned at approval, beside the approvals file
/// (`<home>/<config_dir>/mcp-definitions.json`), shared by every mcprt
/// process of a user with json_file_store's discipline:
///
///   { "<abs project root>": { "<server>": {"hash": "<approval hash>",
///       "pins": {"tools": {NAME: {FIELD: DIGEST}}},
///       "held": {"digest": "<hex>", "changes": "<text>"} } } }
///
/// Pins count only under the hash they were pinned for: a server whose
/// config (hash) changed is approved again, and its first listing after
/// that approval pins anew. A decision (`mcprt approve` / `reject`) forgets
/// a server's pins, so that its next listing is pinned as approved.
///
/// Not thread-safe: one instance per owner (the gating actor, a CLI run).
class definition_pin_store {
public:
  explicit definition_pin_store(std::filesystem::path file);

  static std::filesystem::path default_path(const std::filesystem::path& home,
                                            std::string_view config_dir = ".mcprt");

  const std::filesystem::path& path() const { return store_.path(); }

  /// The record of `server` in `project_root`, whatever its hash.
  std::optional<pin_record> get(const std::string& project_root, const std::string& server);

  /// Pins `kind`'s listing under `hash` unless that kind is pinned under it
  /// already; a record of another hash is replaced. Answers whether it
  /// pinned. Throws std::runtime_error when the file cannot be written.
  bool pin(const std::string& project_root, const std::string& server, const std::string& hash,
           definition_kind kind, const kind_pins& listing);

  /// Records (or, with an empty digest, clears) the held-back difference
  /// of the record pinned under `hash`; answers whether anything changed.
  bool hold(const std::string& project_root, const std::string& server, const std::string& hash,
            const std::string& digest, const std::string& changes);

  /// Forgets the server's pins (a new decision was made); answers whether
  /// there were any.
  bool forget(const std::string& project_root, const std::string& server);

  void reload() { store_.reload(); }
  std::vector<std::string> take_warnings() { return store_.take_warnings(); }

private:
  json_file_store store_;
};

} // namespace mcprt
