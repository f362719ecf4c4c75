#pragma once

// The commands that talk to a running daemon over its HTTP API: status,
// events, restart, call, and approve / reject when a daemon runs.

#include <optional>
#include <string>

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

} // namespace mcprt::cli
