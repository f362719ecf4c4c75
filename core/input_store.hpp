#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_file_store.hpp"

namespace mcprt {

/// The values of `${input:ID}` placeholders (VS Code's `.vscode/mcp.json`),
/// which VS Code prompts for and mcprt never does: a user stores them
/// beforehand (`mcprt input set ID`). They are persisted per project in one
/// JSON file shared by every mcprt process of a user:
///
///   { "<abs project root>": { "<input id>": "<value>" } }
///
/// The values are secrets (API keys, tokens): no warning, exception or
/// message this class produces quotes one. Ids and project roots are not
/// secret, but an id that is not valid is never quoted either (it may be a
/// value pasted in the wrong place).
///
/// Bounds: at most `max_ids_per_project` ids per project and
/// `max_value_bytes` bytes per value; a file beyond them keeps the first ids
/// (in byte order) and the values within the bound, and warns about the rest.
///
/// The file discipline (atomic 0600 writes, a cross-process flock, re-read on
/// change, a malformed file backed up before it is replaced, a write never
/// going through a symlink at the path) is json_file_store's.
///
/// Not thread-safe: one instance per owner (the gating actor, a CLI run).
class input_store {
public:
  static constexpr std::size_t max_ids_per_project = 1000;
  static constexpr std::size_t max_value_bytes = std::size_t{64} << 10;

  explicit input_store(std::filesystem::path file);

  /// `<home>/<config_dir>/mcp-inputs.json`; `config_dir` follows the
  /// settings profile (`.mcprt`, or `.qwen` / `.gemini` for those layouts).
  static std::filesystem::path default_path(const std::filesystem::path& home,
                                            std::string_view config_dir = ".mcprt");

  const std::filesystem::path& path() const {
    return store_.path();
  }

  /// The stored value of input `id` in `project_root` (normalised with
  /// approvals_store::normalize_project_root), or nullopt. Re-reads the file
  /// when it changed on disk, so a long-lived store sees values that another
  /// process stored.
  std::optional<std::string> get(const std::string& project_root, const std::string& id);

  /// The ids with a stored value in `project_root`, sorted (byte order).
  std::vector<std::string> ids(const std::string& project_root);

  /// Stores `value` for `id` in `project_root`, replacing any old value.
  /// Throws std::invalid_argument (never quoting the value) for an id that
  /// input_id_problem refuses, a value longer than max_value_bytes, holding a
  /// NUL character or invalid UTF-8, or a new id in a project that already
  /// has max_ids_per_project; and std::runtime_error naming the path and the
  /// OS error when the file cannot be read or written. On failure the file on
  /// disk and this store's view are unchanged. An empty value is stored (the
  /// command refuses one; the store does not judge).
  void set(const std::string& project_root, const std::string& id, const std::string& value);

  /// Removes the value of `id` in `project_root`; true when one was stored.
  /// A project left with no ids is removed from the file. Throws like set()
  /// for I/O errors; a missing file stays missing.
  bool unset(const std::string& project_root, const std::string& id);

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

/// Why `id` cannot name an input, or nullopt. Ids are `[A-Za-z0-9_.-]{1,64}`
/// (VS Code allows more, but every id seen in the wild fits, and a bounded
/// alphabet keeps ids safe to print and to put in a file name or URL). The
/// reason never quotes `id`.
std::optional<std::string> input_id_problem(std::string_view id);

} // namespace mcprt
