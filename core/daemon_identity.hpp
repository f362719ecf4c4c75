#pragma once

// Telling a real `mcprt serve` of a workspace from what a repository can
// forge. A repository controls `<ws>/.mcprt/daemon.json` (git creates it
// owned by the user) and can run an HTTP server that echoes anything, but
// it cannot make a process of the user's be an `mcprt serve` of this
// workspace, nor make that process own a listening socket it does not own.
// The client commands therefore check the recorded pid against /proc and
// connect to the address of a listening socket that process owns, never to
// the URL as written. The parsing is here (pure); cli/daemon_file reads
// /proc.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mcprt {

/// What `<ws>/.mcprt/daemon.json` records.
struct daemon_record {
  std::string url;
  long pid = 0;
  std::string instance;  // random, echoed by the daemon's /healthz
  std::string workspace;
  std::string approvals;
  std::string token_file; // where the daemon's bearer token is (the token never is here)
};

/// The record, or why the text is not one (the message quotes nothing).
struct parsed_daemon_record {
  std::optional<daemon_record> record;
  std::string error;
};
parsed_daemon_record parse_daemon_record(std::string_view text);

/// `http://HOST:PORT` with an optional trailing `/` and nothing else; the
/// host without brackets.
struct http_endpoint {
  std::string host;
  int port = 0;
};
std::optional<http_endpoint> parse_http_url(std::string_view url);

/// A socket in state LISTEN, from /proc/net/tcp or /proc/net/tcp6:
/// its local address in text ("127.0.0.1", "::1", "0.0.0.0", "::"), port
/// and inode (the `socket:[INODE]` of its owner's descriptors).
struct listening_socket {
  std::string address;
  int port = 0;
  unsigned long inode = 0;
};
std::vector<listening_socket> parse_proc_net_tcp(std::string_view text, bool v6);

/// The address a client connects to for a socket listening on `address`:
/// a wildcard becomes its loopback.
std::string connect_address(const std::string& address);

/// `/proc/<pid>/cmdline` split at its NUL bytes.
std::vector<std::string> split_cmdline(std::string_view raw);

/// For the argument vector of `mcprt serve …`, its workspace as given
/// (`--workspace X`, `--workspace=X`, `-w X`, `-wX`; "." without one);
/// nullopt when the vector is not a serve command.
std::optional<std::string> serve_workspace_arg(const std::vector<std::string>& argv);

/// Why `token` (the first line of a token file) is not a bearer token a
/// daemon may require, or "". A token holds at least 128 random bits in a
/// recognisable form: 32 or more hex digits (a line of hex digits alone is
/// read as hex), or 22 or more base64url (or
/// base64) characters with at most two `=` of padding, and nothing else,
/// with at least 8 different characters. Any other line (`{`, an INI or
/// JSON line, a URL with credentials, a word) is some file's first line,
/// not a secret anyone made for this.
std::string weak_token_reason(std::string_view token);

} // namespace mcprt
