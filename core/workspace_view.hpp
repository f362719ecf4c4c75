#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/approvals_store.hpp"
#include "core/definition_pin_store.hpp"
#include "core/fingerprint_key.hpp"
#include "core/input_store.hpp"
#include "core/gating.hpp"
#include "core/settings.hpp"

namespace mcprt {

/// Everything that decides which servers a workspace runs, as given at start.
struct workspace_options {
  std::filesystem::path workspace;
  std::filesystem::path home;
  profile settings_profile;
  std::optional<std::filesystem::path> mcp_config;           // top tier
  std::optional<std::vector<std::string>> launch_bound;      // --allowed-mcp-server-names
  bool trusted = true;
  /// Where `${VAR}` and `${env:VAR}` are looked up; empty: the process
  /// environment, read when the settings are (a change of the environment
  /// is not watched).
  std::function<std::optional<std::string>(const std::string&)> environment;
};

/// Splits `a, b,,c` into names; empty entries are dropped.
std::vector<std::string> split_name_list(const std::string& text);

/// One consistent reading of a workspace's settings and decisions.
struct workspace_view {
  std::string workspace; // absolute, normalised: also the approvals' project root
  std::string home;      // as given: files under it are shown as ~/...
  std::string profile = "mcprt";
  std::vector<settings_document> documents; // user, project, workspace[, top tier]
  assembled_settings merged;
  gating_result gating;
  std::vector<settings_error> errors; // files that failed, then variables that cannot be expanded
  std::size_t file_errors = 0;        // how many of `errors` are files that failed
  /// Streamable-HTTP servers: "needs_auth" when the workspace's running
  /// daemon says the server refused it, else "stored" when mcp-oauth.json
  /// holds tokens for it, else "none" (filled by the caller; a server that
  /// needs no OAuth is "none" too).
  std::map<std::string, std::string> oauth;
  /// Definitions pinned at approval, by server (filled by read_definition_pins).
  struct pin_view {
    pin_policy policy;
    /// "unpinned" (pinning off, or nothing listed since the approval),
    /// "pinned", or "held_back": the server offers other definitions.
    std::string state = "unpinned";
    std::size_t tools = 0;
    /// What differs, as the daemon described it (escaped, bounded).
    std::string held_changes;
  };
  std::map<std::string, pin_view> pins;
  /// What this machine offers a sandbox (the CLI probes it); unset, explain
  /// shows the policy without what would be in force.
  std::optional<sandbox_support> sandbox;
};

/// Reads every settings file and computes gating. Files with errors are
/// reported in `errors` and contribute nothing; the rest is still used.
/// `inputs` holds the values of `${input:ID}`; without it none has a value.
workspace_view load_workspace(const workspace_options& opts, approvals_store& approvals,
                              input_store* inputs = nullptr);

/// Fills `v.pins`: for each server whether its definitions are pinned
/// (pinning_for its scope, its entry and the files' mcp.pinDefinitions),
/// and what the store holds under its current approval hash.
void read_definition_pins(workspace_view& v, definition_pin_store& store);

/// The variables of one workspace: its environment (opts.environment),
/// folder, home and stored inputs.
variable_context variables_of(const workspace_options& opts, const std::string& project_root,
                              input_store* inputs);

/// What gate() computes from: the input for compute_gating or
/// regate_server. It points into its arguments, which must outlive it.
gating_input gating_input_of(const assembled_settings& merged, const workspace_options& opts,
                             const std::string& project_root, approvals_store& approvals,
                             const variable_context& variables);

/// Gating for already-loaded documents (the watcher keeps last good ones),
/// with the variables of admitted servers expanded.
gating_result gate(const assembled_settings& merged, const workspace_options& opts,
                   const std::string& project_root, approvals_store& approvals, input_store* inputs = nullptr);

/// Admitted servers whose variables cannot be expanded (not an input
/// without a value: that is `needs_input`, not an error in the file), each
/// with the settings_error that says which variable and where: path, the
/// server's file; message, `mcpServers.<name>.<key>: ...` (`servers.` in a
/// VS Code file), never a value.
std::vector<std::pair<std::string, settings_error>>
variable_errors_of(const gating_result& g, const server_map& merged, const std::vector<settings_document>& docs);

/// `mcprt explain --json`: the servers with scope, transport, fingerprint
/// (the keyed digest the daemon shows, with `key`; null without one) and
/// admission, the gating lists and the settings errors. Text in it comes
/// from settings files and paths: print it with dump_json-style replacement
/// (`error_handler_t::replace`), never a plain `dump`, which throws on a
/// path that is not UTF-8.
nlohmann::ordered_json explain_json(const workspace_view& v, bool trusted,
                                    const std::optional<fingerprint_key>& key = std::nullopt);

/// `mcprt explain`'s table. Every name, path and list entry is escaped for
/// the terminal (escape_for_display): nothing from a settings file can move
/// the cursor, clear the screen or start a line of its own.
void write_explain_table(const workspace_view& v, bool trusted, std::ostream& os);

} // namespace mcprt
