#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_file_store.hpp"

namespace mcprt {

/// The user's decision about one gated server, for one config hash.
enum class approval_state { pending, approved, rejected };

std::string to_string(approval_state s);
std::optional<approval_state> parse_approval_state(std::string_view s);

/// Hash-bound approval decisions for servers from gated scopes (the
/// workspace settings and `.mcp.json`): a record whose hash differs from the
/// server's current config is `pending` again, and records are never
/// deleted (a server removed and re-added unchanged keeps its decision).
/// They are persisted in one JSON file shared by every mcprt process of a user:
///
///   { "<abs project root>": { "<server>": {"hash": "<hex>",
///                                          "status": "approved"|"rejected"} } }
///
/// A decision holds only for the config hash it was made for; any other hash
/// reads `pending`. Records are never deleted when a server leaves the
/// config, so removing and re-adding an identical server keeps its decision.
///
/// Reads never throw on bad content: a malformed file or record produces a
/// warning (collected, never printed: core has no output channel) and is
/// treated as absent; before the next write the malformed file is copied to
/// `<file>.corrupt-<UTC timestamp>` so that nothing is overwritten unseen.
///
/// Writes are atomic (temp file + fsync + rename + directory fsync, mode
/// 0600) and serialised across processes by an exclusive flock on
/// `<file>.lock`; each write re-reads the file under that lock, so decisions
/// made concurrently by other processes are never lost. That discipline is
/// json_file_store's; this class only knows what a decision looks like.
///
/// Not thread-safe: one instance per owner (the gating actor, a CLI run).
class approvals_store {
public:
  explicit approvals_store(std::filesystem::path file);

  /// `<home>/<config_dir>/mcp-approvals.json`; `config_dir` follows the
  /// settings profile (`.mcprt`, or `.qwen` / `.gemini` for those layouts).
  static std::filesystem::path default_path(const std::filesystem::path& home,
                                            std::string_view config_dir = ".mcprt");

  /// The key a project root is stored under: absolute and lexically
  /// normalised, no trailing separator. Symlinks are not resolved, so the
  /// key matches what the user typed or the working directory reported.
  static std::string normalize_project_root(const std::string& project_root);

  const std::filesystem::path& path() const {
    return store_.path();
  }

  /// The decision for `server` in `project_root` if it was made for
  /// `config_hash`, else `pending`. Re-reads the file when it changed on disk
  /// (another process decided), so a long-lived store sees fresh decisions.
  approval_state state(const std::string& project_root, const std::string& server,
                       const std::string& config_hash);

  /// Records `decided` (approved or rejected) for the hash. Throws
  /// std::invalid_argument for `pending`, and std::runtime_error naming the
  /// path and the OS error when the file cannot be read or written; on
  /// failure the file on disk and this store's view are unchanged.
  void set(const std::string& project_root, const std::string& server,
           const std::string& config_hash, approval_state decided);

  /// Drops the cached content; the next call reads the file again.
  void reload();

  /// Problems found while reading, oldest first, each naming the file.
  const std::vector<std::string>& warnings() const {
    return store_.warnings();
  }

  /// Returns and clears the collected warnings.
  std::vector<std::string> take_warnings();

private:
  json_file_store store_;
};

} // namespace mcprt
