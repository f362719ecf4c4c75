#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mcprt {

/// One JSON object persisted in a file that every mcprt process of a user
/// shares (the approvals store, the OAuth token store). It holds the file
/// discipline those stores need, so that each of them only says what its
/// records look like:
///
/// Reads never throw on bad content: an unreadable, oversized or malformed
/// file produces a warning (collected, never printed: core has no output
/// channel) and reads as an empty object; before the next write a malformed
/// file is copied to `<file>.corrupt-<UTC timestamp>` so that nothing is
/// overwritten unseen. An unreadable file (a directory, a FIFO, a device) is
/// never replaced: writing throws instead.
///
/// Writes are atomic (temp file + fsync + rename + directory fsync, mode
/// 0600, parent directories created mode 0700) and serialised across
/// processes by an exclusive flock on `<file>.lock`; each write re-reads the
/// file under that lock, so records written concurrently by other processes
/// are never lost.
///
/// A long-lived reader sees other processes' writes: the file's identity
/// (device, inode, size, mtime) is compared on each read, and the file is
/// read again only when it changed.
///
/// Warnings and exceptions name the file and the OS error, never the file's
/// content beyond what the validator chooses to quote: the OAuth store keeps
/// secrets here.
///
/// Not thread-safe: one instance per owner.
class json_file_store {
public:
  /// Checks a freshly parsed top-level object: drops (or repairs) the records
  /// it cannot use and appends one message per problem. Any problem makes the
  /// file count as malformed, so it is backed up before the next write
  /// replaces the dropped records. Messages are the owner's to word, and
  /// should name the file.
  using validator = std::function<void(nlohmann::json& doc, std::vector<std::string>& problems)>;

  /// `label` starts every message about the file ("approvals file",
  /// "OAuth credentials file"), so a user can tell the stores apart.
  json_file_store(std::filesystem::path file, std::string label, validator validate = {});

  const std::filesystem::path& path() const { return file_; }

  /// The validated document, always an object. Re-reads the file only when
  /// it changed on disk; reports the problems of one file version once.
  /// The reference is valid until the next non-const call.
  const nlohmann::json& read();

  /// Applies `mutate` to the document as it is on disk now (read under the
  /// lock, validated) and writes the result; an unchanged document is not
  /// rewritten. Throws std::runtime_error naming the path and the OS error
  /// when the file cannot be read, locked or written, and
  /// std::invalid_argument when the result holds invalid UTF-8; an exception
  /// from `mutate` propagates. On any failure the file is unchanged and the
  /// view is what is on disk.
  void update(const std::function<void(nlohmann::json&)>& mutate);

  /// Drops the cached document; the next read() reads the file again.
  void reload();

  /// Problems found while reading, and backups made, oldest first.
  const std::vector<std::string>& warnings() const { return warnings_; }

  /// Returns and clears the collected warnings.
  std::vector<std::string> take_warnings();

private:
  // Identifies one version of the file without reading it: a rename over
  // the file changes the inode, an in-place edit changes size or mtime.
  struct file_stamp {
    bool exists = false;
    unsigned long long dev = 0;
    unsigned long long ino = 0;
    long long size = 0;
    long long mtime_ns = 0;
    bool operator==(const file_stamp& other) const;
  };

  // Result of reading and validating the file.
  struct loaded {
    nlohmann::json data = nlohmann::json::object();
    std::string bytes;
    bool malformed = false;
    file_stamp stamp;
    std::vector<std::string> problems;
  };

  // Stamps the open descriptor `fd`, or the path when `fd` is negative; a
  // stamp with `exists == false` when that fails.
  file_stamp stat_file(int fd = -1) const;
  // Reads the file; with `strict`, an unreadable (not absent) file throws
  // instead of reading as empty, because a write must not replace it.
  loaded load(bool strict);
  // Makes `l` the cached view, reporting its problems once per file version.
  void adopt(loaded&& l);
  void back_up_malformed(const std::string& bytes);
  std::string quoted_file() const;

  std::filesystem::path file_;
  std::string label_;
  validator validate_;
  bool cached_ = false;
  nlohmann::json data_ = nlohmann::json::object();
  file_stamp stamp_;
  std::vector<std::string> warnings_;
};

} // namespace mcprt
