#pragma once

#include <filesystem>
#include <string>

namespace mcprt::io {

/// The owner's TLS identity for CAF's middleman: one self-signed EC P-256
/// certificate that is also the only CA either end trusts, and its key. A
/// CAF port then admits exactly those who can read the key file, which is
/// the owner (and root), as the owner's token file does for the HTTP API.
struct owner_tls_files {
  std::filesystem::path certificate; // also the CA file
  std::filesystem::path key;
};

struct owner_tls_result {
  owner_tls_files files;
  std::string error; // empty when `files` can be used
};

/// `<home>/.mcprt/caf/key.pem` and `cert.pem`, made the first time and
/// never overwritten after (two processes starting at once end up with one
/// identity: the key is made once, and a certificate is only ever made for
/// the key that won). The directories are mode 0700 and must be ours.
///
/// Refused, with an error that says why and what to do: a key or
/// certificate that is a symbolic link, not a regular file, not ours, a key
/// that others may read or write, a certificate that others may write, a
/// certificate not made for the key, one that has expired.
owner_tls_result load_owner_tls(const std::filesystem::path& home);

} // namespace mcprt::io
