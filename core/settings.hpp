#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/definition_pins.hpp"
#include "core/server_config.hpp"
#include "core/tool_sets.hpp"

namespace mcprt {

/// A settings file that could not be used, with the position of the problem.
/// `message` is printable (no control characters) and never quotes a value
/// from the file; `path` is the file's path as given, which a caller that
/// prints it as text escapes (escape_for_display).
struct settings_error {
  std::string path;
  int line = 0;   // 1-based; 0 when the file could not be read at all
  int column = 0; // 1-based, in characters
  std::string message;
};

/// Which client's files to read. `mcprt` (default), `qwen` and `gemini` are
/// the settings layout of `.mcprt/`, `.qwen/`, `.gemini/` plus `.mcp.json`;
/// `vscode`, `cursor` and `claude` read those clients' own MCP files (see
/// settings_sources). `dir_name` is where mcprt keeps its own state under
/// the home directory (approvals, OAuth tokens, stored inputs, the
/// fingerprint key): mcprt never writes into another client's directory.
struct profile {
  std::string name = "mcprt";
  std::string dir_name = ".mcprt";
  static std::optional<profile> parse(std::string_view name); // mcprt|qwen|gemini|vscode|cursor|claude
  /// The names parse accepts, for the commands' --profile checks.
  static const std::vector<std::string>& names();
};

/// The home directory user settings, approvals and the fingerprint key live
/// under: `home_flag` (--home) when given, else `home_env` ($HOME) when set
/// and not empty, made absolute against the current directory. Every command
/// and the runtime resolve it here, so they never disagree. Without either
/// there is no home: nullopt and `error` says how to name one (guessing "/"
/// or the current directory would read and write files nobody chose).
std::optional<std::filesystem::path> resolve_home(std::string_view home_flag, const char* home_env,
                                                  std::string* error = nullptr);

/// How a file spells its servers.
enum class settings_format {
  /// `mcpServers`, and `mcp.allowed` / `mcp.excluded` (settings.json of
  /// mcprt, Qwen Code, Gemini CLI).
  settings,
  /// `mcpServers` only (`.mcp.json`, Cursor's `mcp.json`, --mcp-config).
  mcp_json,
  /// VS Code's `mcp.json`: `servers` (and `inputs`, whose values come from
  /// mcprt's input store, never from a prompt).
  vscode,
  /// Claude Code's `~/.claude.json`: only its top-level `mcpServers` (the
  /// user scope); everything else in that file is Claude Code's own state
  /// and is neither read nor kept.
  claude_user,
};

std::string to_string(settings_format f);

/// What a file in `scope` is read as when nobody says: settings.json for
/// the user and workspace scopes, `.mcp.json` for the others.
settings_format default_format(config_scope scope);

/// One settings file of a workspace.
struct settings_source {
  config_scope scope = config_scope::user;
  std::filesystem::path path;
  settings_format format = settings_format::settings;
};

/// The files a profile reads, lowest priority first:
/// - mcprt|qwen|gemini: <home>/<dir>/settings.json (user), <ws>/.mcp.json
///   (project), <ws>/<dir>/settings.json (workspace);
/// - vscode: <home>/.config/Code/User/mcp.json (user), <ws>/.vscode/mcp.json
///   (project);
/// - cursor: <home>/.cursor/mcp.json (user), <ws>/.cursor/mcp.json (project);
/// - claude: <home>/.claude.json (user), <ws>/.mcp.json (project).
/// Project and workspace files are gated, user files trusted, whatever the
/// client: a file that arrives with a cloned repository is never trusted.
std::vector<settings_source> settings_sources(const std::filesystem::path& home,
                                              const std::filesystem::path& workspace,
                                              const profile& p = {});

/// The format `path` is read in among `sources`; default_format(scope)
/// when it is not one of them.
settings_format format_of(const std::vector<settings_source>& sources, const std::string& path,
                          config_scope scope);

/// One parsed settings file. A missing file is valid and empty; a file with
/// an error has `error` set and empty `content`/`servers`, so a caller that
/// holds a last good document keeps using it.
struct settings_document {
  std::string path;
  config_scope scope = config_scope::user;
  settings_format format = settings_format::settings;
  bool exists = false;
  nlohmann::json content = nlohmann::json::object();
  server_map servers;
  std::optional<std::vector<std::string>> allowed; // mcp.allowed
  std::optional<std::vector<std::string>> excluded; // mcp.excluded
  tool_set_map tool_sets; // mcp.toolSets
  std::optional<mcprt::sandbox_default> default_sandbox; // mcp.sandbox
  std::map<std::string, sandbox_spec> sandbox_for; // mcp.sandboxFor (honoured from user settings)
  std::optional<pin_mode> pin_definitions; // mcp.pinDefinitions
  std::optional<settings_error> error;

  bool ok() const { return !error.has_value(); }
};

/// Parses settings text in `format` (default_format(scope) when nullopt).
/// `.mcp.json` and `--mcp-config` files carry only `mcpServers`; settings
/// files may also carry `mcp.allowed` / `mcp.excluded`; VS Code files name
/// the object `servers`. A Claude Code user file keeps only `mcpServers` as
/// its content: the rest is that client's state, not ours to hold.
/// Comments (// and /* */) and a UTF-8 byte-order mark are accepted, as
/// editors of these files write them. The text is input from whoever wrote
/// the repository: it must be UTF-8 (an invalid byte is an error at its
/// position), at most `max_settings_bytes` long and nested at most
/// `max_settings_depth` deep, and no error message quotes it (key paths are
/// escaped for display, values never appear).
settings_document parse_settings_text(std::string path, config_scope scope, std::string_view text,
                                      std::optional<settings_format> format = std::nullopt);

/// Builds a document from JSON content that was read before (the watcher
/// hands its last good content over as JSON). Servers whose entry equals
/// the one in `previous` keep their parse instead of being parsed again.
/// Errors carry no position (line and column 0). The content is validated as
/// `parse_settings_text` does, except for the number of servers: a host may
/// hand over more than a file may hold.
settings_document parse_settings_value(std::string path, config_scope scope, nlohmann::json content,
                                       const settings_document* previous = nullptr,
                                       std::optional<settings_format> format = std::nullopt);

/// As parse_settings_value, for the owner of `previous` who replaces it with
/// the result: unchanged entries are moved over from it, not copied.
/// Afterwards `previous.servers` holds only the entries that were edited or
/// removed, and `fresh` has gained the names parsed anew (added or edited).
settings_document take_settings_value(std::string path, config_scope scope, nlohmann::json content,
                                      settings_document& previous, std::vector<std::string>& fresh,
                                      std::optional<settings_format> format = std::nullopt);

/// Limits on a settings file: the largest one read, the deepest nesting of
/// objects and arrays parsed (a settings file needs about five levels), the
/// servers one file may define and the entries of one `mcp.allowed` /
/// `mcp.excluded` list, each at most `max_pattern_bytes` long. Gating
/// matches every name against every list entry on each reload: these keep
/// that work small whatever a repository's files hold.
inline constexpr std::size_t max_settings_bytes = 16u << 20;
inline constexpr std::size_t max_settings_depth = 64;
inline constexpr std::size_t max_servers_per_file = 2000;
inline constexpr std::size_t max_list_entries = 100;
inline constexpr std::size_t max_pattern_bytes = 256;

/// A list of name patterns in settings (`mcp.allowed`, a tool set's
/// `tools`): an array of at most max_list_entries strings, each at most
/// max_pattern_bytes. `where` names it in the error ("mcp.allowed"), `path`
/// is its place in the file. Empty strings are kept: the caller decides.
struct pattern_list_read {
  std::vector<std::string> patterns;
  std::string error; // empty: read
  std::vector<std::string> error_path;
};
pattern_list_read read_pattern_list(const nlohmann::json& list, const std::string& where,
                                    const std::vector<std::string>& path);

/// What reading a settings file found.
struct settings_read {
  enum class outcome { read, missing, failed };
  outcome result = outcome::missing;
  std::string bytes;  // when read
  std::string reason; // when failed: why, never the file's content
};

/// Reads the file at `path` (following symlinks) so that nothing there can
/// block or exhaust the reader, which runs on an actor thread:
/// - the open never waits (O_NONBLOCK: a FIFO opens at once), and then only
///   a regular file is read (fstat on the descriptor, so nothing can be
///   swapped in between); a FIFO, a device (`/dev/zero`), a socket or a
///   directory is `failed`, saying what it is;
/// - more than `max_bytes` is `failed`, whatever the file claims its size is;
/// - only "it does not exist" is `missing`: ENOENT, ENOTDIR, a dangling
///   symlink. Every other error (EACCES, ELOOP, EIO, ENAMETOOLONG, ...) is
///   `failed`, so a caller keeps the last good content instead of taking the
///   file's servers away.
settings_read read_settings_bytes(const std::filesystem::path& path, std::size_t max_bytes = max_settings_bytes);

/// Reads and parses a file; a file that does not exist yields an empty,
/// valid document with `exists == false`; a file that cannot be read is an
/// error (line and column 0) with `exists == true`.
settings_document load_settings_file(const std::filesystem::path& path, config_scope scope,
                                     std::optional<settings_format> format = std::nullopt);

/// The merged view of all scopes.
struct assembled_settings {
  server_map servers; // each remembers its scope
  std::optional<std::vector<std::string>> allowed; // nullopt: no scope sets it
  std::vector<std::string> excluded;
  /// `mcp.toolSets` of every scope; a higher scope replaces a same-named
  /// set whole.
  tool_set_map tool_sets;
};

/// Layers documents (lowest priority first): a higher scope replaces a
/// same-named server whole. `mcp.excluded` lists add up across scopes;
/// `mcp.allowed` lists intersect (each scope that sets one can only narrow
/// admission). `overlay` (top tier: --mcp-config, host-provided servers)
/// wins over every document.
assembled_settings assemble(const std::vector<const settings_document*>& layers,
                            const server_map& overlay = {});

/// The sandbox keys of `layers` (`mcp.sandbox`, `mcp.sandboxFor`), and
/// what they make of one stdio server (its effective_sandbox and, with it,
/// its connection id). assemble applies them to every server.
sandbox_settings sandbox_settings_of(const std::vector<const settings_document*>& layers);
void apply_sandbox(server_config& cfg, const sandbox_settings& s);

} // namespace mcprt
