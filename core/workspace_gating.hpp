#pragma once

#include <map>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "core/approvals_store.hpp"
#include "core/gating.hpp"
#include "core/settings.hpp"
#include "core/workspace_view.hpp"

namespace mcprt {

/// What one session may run now (the launch bound intersected with
/// `mcp.allowed`, minus `mcp.excluded`, minus gated servers not approved;
/// nothing when untrusted), and why the rest may not.
struct session_admission {
  bool trusted = true;
  server_map admitted;
  struct out_entry {
    std::string name;
    unavailable_reason reason;
  };
  std::vector<out_entry> unavailable; // sorted by name; includes `removed`
  std::vector<std::string> promptable;
  gating_lists lists;
};

/// A settings layer's content as the watcher kept it (its last good JSON).
struct settings_content {
  std::string path;
  config_scope scope = config_scope::user;
  bool exists = false;
  nlohmann::json content;
  std::optional<settings_format> format;
};

/// The gating actor's model, free of actors and I/O except the approvals
/// store it is handed: the last good settings documents, the top tier read
/// once at start, the merged map and the gating computed from them.
class workspace_gating {
public:
  /// Reads the top tier (`--mcp-config`) once; the settings layers arrive
  /// through `set_documents`.
  /// `inputs` holds the values of `${input:ID}` (none without it).
  workspace_gating(workspace_options opts, approvals_store& approvals, input_store* inputs = nullptr);

  /// Replaces the settings layers (user, project, workspace) with their last
  /// good documents and recomputes. Answers whether the change gate opens:
  /// the merged servers or the gating lists differ from before (lists
  /// compared as sets; a missing `mcp.allowed`, allow all, differs from `[]`).
  bool set_documents(std::vector<settings_document> docs);

  /// The same from the JSON contents a watcher kept for the layers (in
  /// layer order). Entries unchanged since the documents in force are moved
  /// over, not parsed or copied; when the files keep their layers and
  /// lists, only the servers an edit touched are merged and gated again, so
  /// the cost of an edit follows the edit, not the number of servers.
  bool set_contents(std::vector<settings_content> files);

  /// Frees what set_contents replaced. A caller in a hurry calls it after
  /// it has passed the new state on.
  void release_replaced() { retired_.clear(); }

  /// Recomputes after a decision or an input was stored; answers whether
  /// the gate opens: the lists, or what is admitted and how it runs (an
  /// input's new value is a new expanded config), changed.
  bool refresh();

  /// Admission of the workspace servers plus a session's own servers: its
  /// top-tier servers win over same-named settings servers and need no
  /// approval, but do obey the allow and exclude lists; those of a gated
  /// scope (a remote host's) are gated as a project's and lose to a
  /// settings server of the same name.
  /// With `with_configs` false, `admitted` stays empty (the lists and
  /// reasons are filled): for a caller that takes configs one by one
  /// through admitted_config.
  session_admission admit(const server_map& session_servers, bool with_configs = true) const;

  /// The config a session with no servers of its own runs for `name` (its
  /// variables expanded); null when `name` is not admitted.
  const server_config* admitted_config(const std::string& name) const;

  /// Every configured server has a version number that changes whenever
  /// what a session would run for it changes: its entry, its admission or
  /// its expanded config; a server that leaves the settings gets one too.
  /// This log holds each name once, keyed by the version of its latest
  /// change: a session synced at version V needs only what follows V.
  const std::map<uint64_t, std::string>& changes() const { return changes_; }
  uint64_t latest_version() const { return next_version_; }

  /// The reason `name` is out for a session with no servers of its own.
  std::optional<unavailable_reason> reason(const std::string& name) const;

  /// Errors of failing files (the top tier, and those the watcher reports).
  const std::vector<settings_error>& top_tier_errors() const { return top_errors_; }

  const assembled_settings& merged() const { return merged_; }
  const std::vector<settings_document>& documents() const { return docs_; }
  const gating_result& gating() const { return gating_; }
  const std::string& project_root() const { return project_root_; }
  const workspace_options& options() const { return opts_; }
  approvals_store& approvals() const { return *approvals_; }
  input_store* inputs() const { return inputs_; }

  /// variable_errors_of the current gating.
  std::vector<std::pair<std::string, settings_error>> variable_errors() const;

private:
  gating_result compute(const assembled_settings& merged) const;
  /// Merges and gates every server of docs_ again.
  bool recompute();
  /// Merges and gates again only `touched` (names whose entry changed in
  /// some layer); nullopt when that cannot stand for a full recompute (a
  /// server came or went while an allow-list intersection depends on
  /// which servers exist).
  std::optional<bool> recompute_touched(std::vector<std::string> touched);
  /// Gives a new version to every server that changed from the state
  /// before (`old_*`) to the current one, or left.
  void update_versions(const server_map& old_merged, const gating_result& old_gating);
  /// Gives `name` a new version: it changed, or left.
  void bump(const std::string& name);

  workspace_options opts_;
  approvals_store* approvals_;
  input_store* inputs_;
  std::string project_root_;
  server_map top_tier_;
  std::vector<settings_error> top_errors_;
  std::vector<settings_document> docs_;
  std::vector<settings_document> retired_;
  assembled_settings merged_;
  gating_result gating_;
  removal_tracker removals_;
  std::map<uint64_t, std::string> changes_;
  std::map<std::string, uint64_t> last_change_; // name → its key in changes_
  uint64_t next_version_ = 0;
};

/// A settings document from the JSON content a watcher kept for it;
/// servers unchanged since `previous` keep their parse.
settings_document document_from_json(std::string path, config_scope scope, bool exists,
                                     nlohmann::json content, const settings_document* previous = nullptr,
                                     std::optional<settings_format> format = std::nullopt);

} // namespace mcprt
