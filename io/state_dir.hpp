#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace mcprt::io {

/// A directory of mcprt's own inside a directory someone else controls:
/// `<workspace>/.mcprt`, where a cloned repository decides what is there.
/// No write through it follows a symbolic link the repository planted.
///
/// - The directory itself must not be a symbolic link (it is opened with
///   O_NOFOLLOW | O_DIRECTORY; opening fails otherwise, with an error that
///   says so). The parent's own path is the caller's, and trusted.
/// - Every file is reached by name from that open directory (openat,
///   renameat, unlinkat), never by a path that is resolved again.
/// - A file is replaced atomically: written under a random name created with
///   O_EXCL | O_NOFOLLOW, then renamed over the old one (which replaces a
///   symbolic link there instead of following it).
class state_dir {
public:
  /// Opens PARENT/NAME, creating it (mode 0700) when it does not exist.
  /// nullopt with `error` set when it cannot, or when NAME is a symbolic
  /// link, not a directory, not this user's, or writable by others (then
  /// another user could swap the files in it).
  static std::optional<state_dir> open(const std::filesystem::path& parent, const std::string& name,
                                       std::string& error);

  state_dir(const state_dir&) = delete;
  state_dir& operator=(const state_dir&) = delete;
  state_dir(state_dir&& other) noexcept;
  state_dir& operator=(state_dir&& other) noexcept;
  ~state_dir();

  const std::filesystem::path& path() const { return path_; }

  /// Writes NAME with `text` and mode 0600, atomically.
  bool write_atomically(const std::string& name, std::string_view text, std::string& error) const;

  /// Creates NAME holding `text` (mode 0600) unless something is there
  /// already: written under a random name, then hard-linked into place, so
  /// that a reader never sees it half written and two processes doing this
  /// at once end up with one file. False with `existed` set when NAME was
  /// there (it is left alone), with `error` set when the write failed.
  bool create_once(const std::string& name, std::string_view text, bool& existed, std::string& error) const;

  /// Opens NAME with `flags` (O_NOFOLLOW and O_CLOEXEC are added; with
  /// O_CREAT the mode is 0600). A symbolic link at NAME is removed and the
  /// open tried once more: a file of ours is never a link, so the link was
  /// planted. -1 with `error` set when it fails.
  int open_file(const std::string& name, int flags, std::string& error) const;

  /// Creates NAME empty (mode 0600) in place of whatever was there, a
  /// symbolic link included, and opens it for writing.
  int create_fresh(const std::string& name, std::string& error) const;

  /// Removes NAME (a file, or a link without following it). False when
  /// there was nothing to remove or it could not be removed.
  bool remove(const std::string& name) const;

private:
  /// A fresh file under a random name holding `text`; its name, or "" with
  /// `error` set.
  std::string write_temporary(const std::string& name, std::string_view text, std::string& error) const;
  state_dir(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::filesystem::path path_;
};

/// `bytes` random bytes from the kernel, as lower-case hex.
std::string random_hex(std::size_t bytes);

/// A file only its owner may have made or changed (a token, a key, a
/// certificate), read whole, and what was wrong with it otherwise. The
/// caller words the error: each knows what the file is for.
struct owner_file {
  enum class problem { none, cannot_open, symlink, not_regular, not_ours, mode, too_large, cannot_read };
  problem what = problem::none;
  std::string text;
  int error_number = 0; // cannot_open, cannot_read
  unsigned uid = 0;     // not_ours: whose it is
  std::string mode;     // mode: the file's, as "0640"
};

/// Opens PATH (never blocking on a FIFO; with `no_links`, a symbolic link
/// is `symlink`), and reads it when it is a regular file of this user with
/// none of the `forbidden` mode bits (022: nobody else may write it; 077:
/// nor read it) and at most `max` bytes.
owner_file read_owner_file(const std::filesystem::path& path, unsigned forbidden, std::size_t max, bool no_links);

/// A mode's permission bits as four octal digits ("0600").
std::string octal_mode(unsigned mode);

} // namespace mcprt::io
