#pragma once

// The connection fingerprint that leaves the runtime (snapshot, events,
// restart results, `explain`) is a keyed digest of the internal connection
// id. The internal id hashes the transport fields, `env` and `headers`
// values included, with plain SHA-256: shown as it is, a short secret (a
// PIN in an env var) could be brute-forced from it offline. Keyed with a
// per-installation secret, the shown value says "same config or not" and
// nothing more. The internal id stays byte-compatible with the reference
// (pool keys); only what is shown changes.

#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace mcprt {

struct fingerprint_key {
  std::array<unsigned char, 32> bytes{};
};

/// A fresh random key (getrandom).
fingerprint_key random_fingerprint_key();

/// `<name>::<first 16 hex of HMAC-SHA256(key, internal_id)>`, where name is
/// the part of `internal_id` before its last `::` (all of it when there is
/// none). Same key and id, same digest.
std::string keyed_connection_id(std::string_view internal_id, const fingerprint_key& key);

/// `<home>/<config_dir>/fingerprint.key`, next to the approvals.
std::filesystem::path default_fingerprint_key_path(const std::filesystem::path& home,
                                                   std::string_view config_dir = ".mcprt");

struct fingerprint_key_result {
  enum class status {
    loaded,      // an existing key file was read
    created,     // no file existed; a new key was written
    refused,     // the file exists but is not safe to use (see `error`)
    unavailable, // it could not be read or created (see `error`)
  };
  status outcome = status::unavailable;
  std::optional<fingerprint_key> key; // set for loaded and created
  std::string error;                  // names the path and what to do

  bool ok() const { return key.has_value(); }
};

/// Reads the key file at `path`, or creates it when it does not exist.
///
/// Reading: opened without following a symlink and without blocking (a
/// FIFO planted there cannot hang the caller); it must be a regular file
/// owned by the effective user, with no permission bits for group or
/// others, and exactly 32 bytes long. Anything else is `refused` with a
/// message saying what to fix; the file is never changed or replaced.
///
/// Creating: the parent directories are created with mode 0700 when
/// missing; the key is written to a temporary file (mode 0600, fsync) that
/// is then hard-linked to `path`, which never replaces an existing file: of
/// two processes creating it at once, one wins and both end up with its key.
fingerprint_key_result load_or_create_fingerprint_key(const std::filesystem::path& path);

} // namespace mcprt
