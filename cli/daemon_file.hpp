#pragma once

// The files the daemon and its clients trust: the bearer token file and
// `<ws>/.mcprt/daemon.json`. Nothing is sent to a daemon before these
// checks pass (core/daemon_identity says why they are enough).

#include <optional>
#include <string>
#include <sys/types.h>

namespace mcprt::cli {

/// `<ws>/.mcprt/daemon.json`.
std::string daemon_file(const std::string& workspace);

/// A bearer token file: a regular file owned by this user that nobody else
/// may read or write (no group or other permission bits), holding one line
/// of printable ASCII. `error` says what is wrong and how to fix it
/// (`chmod 600 FILE`); `flag` names the option in messages.
struct token_file {
  std::string token;
  std::string error;
};
token_file read_token_file(const std::string& path, const std::string& flag = "--token-file");

/// A daemon that passed the local checks: its daemon.json is a regular
/// file of this user that others cannot write, its pid is a live `mcprt
/// serve` of this user for this workspace, and that process owns the
/// socket listening at the recorded port. `url` is that socket's address
/// (a wildcard listener is reached on loopback): the only place a token is
/// sent to.
struct verified_daemon {
  std::string url;
  std::string instance;
  pid_t pid = 0;
  std::string approvals;
  /// Its bearer token, from the owner-only file daemon.json names.
  std::string token;
};

struct daemon_check {
  std::optional<verified_daemon> daemon;
  /// No daemon runs: no file, or its process is gone (a stale file).
  bool absent = false;
  /// Why there is no daemon; names the file and the check that failed.
  std::string error;
};

/// The local checks for the daemon of `workspace` (an absolute, normal
/// path). `check_file` false skips the file's owner and mode (serve only
/// asks whether a daemon of this workspace runs).
daemon_check check_daemon(const std::string& workspace, bool check_file = true);

/// Whether `url` (`http://HOST:PORT`, HOST a loopback address) is served
/// by a live `mcprt serve` of this user: a process of this uid, running
/// this very program as `serve`, owns the socket listening there. The one
/// case where a token goes to an explicit --url from a command line nobody
/// typed at a terminal. "" or why not.
std::string check_owner_daemon_url(const std::string& url);

/// `<home>/.mcprt/token`: the owner's bearer token, which every daemon
/// started without --token-file requires. Made on first use: 256 random
/// bits as hex, mode 0600, in a directory of this user that nobody else can
/// write. `path` is set even when `error` is.
struct owner_token {
  std::string path;
  std::string token;
  std::string error;
};
owner_token load_owner_token(const std::string& home);

/// A random id for a daemon's run (128 bits, hex).
std::string new_instance_id();

} // namespace mcprt::cli
