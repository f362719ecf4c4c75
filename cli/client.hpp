#pragma once

// The commands that talk to a running daemon over its HTTP API: status,
// events, restart, call, and approve / reject when a daemon runs.

#include <optional>
#include <string>
#include <vector>

namespace mcprt::cli {

/// How the client commands find and reach the daemon.
struct client_flags {
  std::string workspace = ".";
  std::string url;
  std::string token_file;
  bool json = false;
};

int run_status(const client_flags& f);
/// Follows the event stream; `since` replays what the daemon still holds.
int run_events(const client_flags& f, std::optional<unsigned long long> since);
int run_restart(const client_flags& f, const std::string& name);
int run_call(const client_flags& f, const std::string& server, const std::string& tool, const std::string& args);

/// approve / reject through the running daemon of `f.workspace`. nullopt:
/// no daemon answers, or `own_store` (the approvals file the caller's
/// explicit --home / --profile name; empty when it gave neither) is not the
/// daemon's: the caller writes the store itself.
std::optional<int> decide_via_daemon(const client_flags& f, const std::string& name, bool approve,
                                     const std::string& own_store = {});

/// How `mcprt auth` runs.
struct auth_flags {
  /// Opens the authorization URL (its last argument). Empty: `xdg-open`
  /// when it is installed, else the URL is only printed.
  std::string browser;
  bool logout = false;
  long long timeout_ms = 300000;
};

/// `mcprt auth NAME` through the running daemon of `f.workspace`: the
/// daemon authorizes and serves the redirect; this prints the URL, opens
/// it, and waits until the server connects. nullopt: no daemon answers.
std::optional<int> auth_via_daemon(const client_flags& f, const std::string& name, const auth_flags& a);

/// The servers a running daemon of `workspace` reports `needs_auth` for
/// (explain shows them); empty when no daemon answers. Never prints.
std::vector<std::string> servers_needing_auth(const std::string& workspace);

/// The browser command `mcprt auth` uses for `a.browser` (see auth_flags).
std::string browser_command(const std::string& given);

} // namespace mcprt::cli
