#pragma once

// What a stdio server may do: the sandbox settings, the policy they make
// for one server, and the arguments that carry it out (the reaper image's
// `sandbox` mode, io/reaper_image/sandbox.cpp). Pure: no I/O. See
// docs/sandbox.md.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mcprt {

struct server_config;
struct config_error;

/// One `"sandbox"` value as written: `true`, `false`, `"required"`, or an
/// object `{"read": [...], "write": [...], "network": [...], "required":
/// bool}` (which means "on", with these additions).
struct sandbox_spec {
  enum class kind { on, off, required };
  kind mode = kind::on;
  std::vector<std::string> read, write, network;
  bool widens() const { return mode == kind::off || !read.empty() || !write.empty() || !network.empty(); }
};

/// Limits on one spec: entries per list, and bytes per entry.
inline constexpr std::size_t max_sandbox_entries = 64;
inline constexpr std::size_t max_sandbox_path_bytes = 4096;

/// Parses a `"sandbox"` value found at `path` (the error names it and the
/// offending position, and never quotes a value). A path must be absolute,
/// or start with `~` or `${workspaceFolder}`; a network entry is `host` or
/// `host:port` (`[v6]:port`).
struct sandbox_spec_read {
  std::optional<sandbox_spec> spec;
  std::optional<std::string> error;
  std::vector<std::string> error_path;
  bool index_last = false;
};
sandbox_spec_read parse_sandbox_spec(const nlohmann::json& v, const std::vector<std::string>& path);

/// `"inheritEnv"`: `true` (the runtime's whole environment but `MCPRT_*`)
/// or a list of variable names.
struct inherit_env_spec {
  bool all = false;
  std::vector<std::string> names;
};
sandbox_spec_read parse_inherit_env(const nlohmann::json& v, const std::vector<std::string>& path,
                                    inherit_env_spec& out);

/// `mcp.sandbox`: which servers run sandboxed when their entry does not say.
enum class sandbox_default { project, all, off };
std::optional<sandbox_default> parse_sandbox_default(std::string_view s);
std::string to_string(sandbox_default d);

/// What the settings files say about sandboxes beyond the entries: the
/// default from the user's settings (which may widen it) and from the
/// workspace's (which arrive with a repository: they may only narrow), and
/// the owner's per-server policies (`mcp.sandboxFor`, user settings only).
struct sandbox_settings {
  std::optional<sandbox_default> user_default;
  std::optional<sandbox_default> workspace_default;
  std::map<std::string, sandbox_spec> owner_for;
};

/// The sandbox one server gets, paths not yet resolved.
struct sandbox_setting {
  bool enabled = false;
  bool required = false;
  std::vector<std::string> read, write, network;
  bool inherit_all_env = false;
  std::vector<std::string> inherit_env;
  /// What was written but not honoured, and why (warnings, explain).
  std::vector<std::string> notes;
  /// A canonical text of everything that changes how the server runs: part
  /// of its connection id, so a new policy is a new process.
  std::string key() const;
  nlohmann::json to_json() const;
};

/// Field by field: what servers_equal asks on every reload, without
/// writing key() out.
bool operator==(const sandbox_setting& a, const sandbox_setting& b);
inline bool operator!=(const sandbox_setting& a, const sandbox_setting& b) {
  return !(a == b);
}

/// to_json's inverse (a setting that crossed to another node); nullopt
/// for anything to_json does not write.
std::optional<sandbox_setting> sandbox_setting_from_json(const nlohmann::json& j);

/// The sandbox of `c` under `s`. Servers of a gated scope (they arrive
/// with the workspace) can only narrow: their own `false` and their lists
/// are not honoured (a note says so); only the owner's `mcp.sandboxFor`
/// widens them.
sandbox_setting effective_sandbox(const server_config& c, const sandbox_settings& s);

/// Where the policy's paths point.
struct sandbox_context {
  std::string home;                    // the owner's home (--home, else $HOME)
  std::string env_home;                // $HOME, when it differs
  std::vector<std::string> state_dirs; // ".mcprt", the profile's directory
  std::string workspace;               // the workspace folder, canonical
  std::vector<std::string> other_homes; // other users' home directories
  std::string tmp_parent = "/tmp";
};

/// The owner's secrets, relative to a home: hidden from every sandbox.
const std::vector<std::string>& secret_paths_in_home();

/// `~`, `~/x`, `${workspaceFolder}`, `${workspaceFolder}/x` or an absolute
/// path, lexically normalised; "" for anything else.
std::string expand_sandbox_path(const std::string& p, const sandbox_context& ctx);

/// A policy with absolute paths.
struct sandbox_plan {
  bool required = false;
  std::vector<std::string> hide;    // read as empty
  std::vector<std::string> write;   // writable (besides the private TMPDIR)
  std::vector<std::string> network; // egress allow-list
  std::vector<std::string> lifted;  // deny entries lifted by `read`
  long max_processes = 128;
  long long max_memory = 4LL << 30; // bytes, where a memory cgroup can be made
  std::string tmp_parent = "/tmp";
};

/// `keep` are paths the server needs (its cwd, its command): a deny entry
/// that contains one is not hidden.
sandbox_plan plan_sandbox(const sandbox_setting& s, const sandbox_context& ctx, const std::vector<std::string>& keep);

/// Takes out of `plan.hide` every path that is or holds one of `keep`
/// (absolute paths): what plan_sandbox does with its `keep`, for a path
/// known only later (the command once resolved).
void keep_visible(sandbox_plan& plan, const std::vector<std::string>& keep);

/// What the machine offers, from the image's `sandbox-probe` line.
struct sandbox_support {
  bool image = false; // the reaper runs its own image (the sandbox lives there)
  bool userns = false, mountns = false, netns = false, pidns = false, proc = false, seccomp = false;
  int landlock = 0;
  bool cgroup_pids = false, cgroup_memory = false; // this user may make child cgroups
  bool root = false; // RLIMIT_NPROC does not bind root: its cap needs a cgroup
  std::string why_none; // when !image, or the probe failed
};
sandbox_support parse_sandbox_probe(std::string_view line);

/// The protections, by the names events, snapshots and explain use.
namespace protection {
inline constexpr const char* secrets = "secrets-hidden";
inline constexpr const char* writes = "writes-confined";
inline constexpr const char* network = "network-isolated";
inline constexpr const char* egress = "egress-allow-list";
inline constexpr const char* pid = "pid-namespace";
inline constexpr const char* scope = "signal-and-socket-scope";
inline constexpr const char* syscalls = "syscall-filter";
inline constexpr const char* privileges = "no-new-privileges";
inline constexpr const char* processes = "process-cap";
inline constexpr const char* memory = "memory-cap";
} // namespace protection

/// How to start one sandboxed server: the image's arguments after argv[0]
/// ("sandbox", options, "--"; the caller appends the path and argv), what
/// is in force and what is missing (each with why).
struct sandbox_launch {
  std::vector<std::string> args;
  std::vector<std::string> in_force;
  std::vector<std::string> missing; // "name: why"
  int forward_port = 0;             // nonzero: fd 3 goes to the egress proxy
  bool complete() const;            // nothing missing but what no policy requires
  nlohmann::json to_json() const;
};
inline constexpr int sandbox_forward_port = 3128;
sandbox_launch plan_launch(const sandbox_plan& p, const sandbox_support& s);

/// The environment a server starts with: the safe names of `parent`
/// (HOME, LOGNAME, PATH, SHELL, TERM, USER, LANG, LANGUAGE, LC_*, TZ,
/// TMPDIR), whatever `inherit` adds, then the entry's own `env`. Never a
/// `MCPRT_*` name from `parent`, whatever `inherit` says.
std::map<std::string, std::string> server_environment(const std::map<std::string, std::string>& parent,
                                                      const std::map<std::string, std::string>& entry_env,
                                                      bool inherit_all, const std::vector<std::string>& inherit);
bool is_safe_environment_name(std::string_view name);

} // namespace mcprt
