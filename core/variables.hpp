#pragma once

// Variables in a server entry's values, as `.mcp.json` files (Claude Code)
// and VS Code write them. Pure: every value comes from a variable_context;
// process_environment() is the one lookup that reads the process.
//
// The forms, inside one string:
//   ${NAME}            NAME's value; unset -> missing_variable. Set but
//                      empty is a value (the empty string).
//   ${NAME:-default}   NAME's value, or `default` when NAME is unset OR
//                      empty (the shell's `:-`). The default is literal text
//                      up to the FIRST `}` and may be empty; it is never
//                      expanded, and a default holding `${` is unsupported:
//                      `${A:-${B}}` is an error, whatever A is, rather than
//                      a value with a stray `}` or a literal `${B` in it.
//   ${env:NAME}        NAME's value; unset -> missing_variable (no default).
//   ${workspaceFolder} ${workspaceFolderBasename} ${userHome}
//                      from the context; these names are looked up there,
//                      never in the environment (also with `:-`). An empty
//                      one counts as unset: missing_variable, or the default.
//   ${pathSeparator} ${/}  "/".
//   ${input:ID}        ID = [A-Za-z0-9_.-]+, the value from ctx.input; no
//                      value (or no input lookup) -> missing_input, so the
//                      caller can mark the server as needing input.
// NAME = [A-Za-z_][A-Za-z0-9_]*.
//
// Everything else:
//   - `$` not followed by `{` is literal text (`$HOME`, `$$`, a trailing `$`);
//   - a `${` with no `}` anywhere after it is literal text, and so is the
//     rest of the string;
//   - a `${` whose next byte is not a letter, `_` (or the `/` of `${/}`) is
//     literal: those two bytes are copied and scanning resumes right after
//     them, so `${1}`, `${#}` and `${ X }` (shell forms, e.g. in `sh -c`)
//     stay as written and `${${HOME}}` gives `${` + home + `}`;
//   - a `${` + letter or `_` ... up to the first `}` that is none of the
//     forms above is an error, `unsupported` (`${config:x}`, `${command:y}`,
//     `${foo:bar}`, `${VAR-x}`, `${VAR:=x}`, `${env:1}`, `${input:}`): a
//     server must never start with a placeholder left in its arguments.
// Substituted values are never expanded again: a value holding `${X}` stays
// as it is.
//
// Nothing here ever puts a value (the environment's, an input's or a
// default's, any of which may be a secret) into a problem or a message.

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mcprt {

/// Where variable values come from. Lookups return nullopt when unset.
struct variable_context {
  /// ${VAR}, ${VAR:-default}, ${env:VAR}; an empty function = nothing set.
  std::function<std::optional<std::string>(const std::string&)> env;
  /// ${input:ID}; an empty function = no inputs.
  std::function<std::optional<std::string>(const std::string&)> input;
  std::string workspace_folder; // ${workspaceFolder}; "" = none
  std::string user_home;        // ${userHome}; "" = unknown
  /// When set, every value taken from `env` or `input` is appended with the
  /// placeholder it replaced (`${GH_TOKEN}`), so that messages about the
  /// server can show the placeholder instead (see server_config::secrets).
  std::vector<std::pair<std::string, std::string>>* substitutions = nullptr;
};

/// A variable that could not be expanded. Never carries a value.
struct expansion_problem {
  /// invalid_value: every variable expanded, but the value is not valid
  /// where it goes (a line break in a header, a NUL); said in `detail`.
  enum class kind { missing_variable, missing_input, unsupported, too_long, invalid_value };
  kind what = kind::unsupported;
  /// As written inside ${...}: "GITHUB_TOKEN", "env:GITHUB_TOKEN",
  /// "input:token", "config:x". Escaped for display and cut after 64 bytes.
  /// A form that could hold a default or other literal text (`VAR:-x`,
  /// `VAR-x`, `foo bar`) is shown only up to its operator, then "..."
  /// (`VAR:-...`). For too_long: the variable whose value crossed the
  /// bound, or "" when literal text did.
  std::string variable;
  /// Where in the server entry: "command", "args[2]", "env.TOKEN",
  /// "headers.Authorization", "url", "httpUrl", "cwd" (set by
  /// expand_server_spec; "" from expand_variables). Keys are shown as
  /// config_error::path_string shows them: escaped, cut after 64 bytes.
  std::string key_path;
  /// invalid_value: what the settings validator said (never a value).
  std::string detail;

  /// "args[2]: variable GITHUB_TOKEN is not set and has no default",
  /// "env.TOKEN: input 'token' has no stored value",
  /// "url: unsupported variable config:x". Printable; never a value.
  std::string message() const;
};

struct expanded_text {
  std::string value; // "" when `problem` is set (never a partial expansion)
  std::optional<expansion_problem> problem;
};

/// Cheap check: whether `text` contains "${" (it may still expand to itself).
bool has_variables(std::string_view text);

/// `text` with its variables expanded, or the first problem. The result is
/// at most max_expanded_bytes long; beyond it, kind::too_long (counted as
/// the output grows: a huge expansion is never built).
expanded_text expand_variables(std::string_view text, const variable_context& ctx);

struct expanded_spec {
  nlohmann::json spec; // the input unchanged when `problem` is set
  std::optional<expansion_problem> problem;
};

/// Expands the string values of a server entry's `command`, `args` (each
/// element), `env` (values only, not names), `cwd`, `url`, `httpUrl` and
/// `headers` (values only); every other key, and any value of another type
/// (the settings validator refuses those elsewhere), is copied unchanged.
/// Returns the expanded spec, or the FIRST problem (keys in the spec
/// object's order, array elements in order) with its key_path set. Strings
/// without "${" are copied as they are, whatever their size; a spec without
/// any comes back unchanged. Besides each string's bound, the strings that
/// are expanded add up to at most max_expanded_spec_bytes (too_long past
/// it): a 16 MiB file of `"${HOME}",` elements must not become gigabytes.
expanded_spec expand_server_spec(const nlohmann::json& spec, const variable_context& ctx);

/// Whether any string expand_server_spec would expand contains "${",
/// without copying anything: gating asks it of every server on every pass.
bool spec_has_variables(const nlohmann::json& spec);

/// The process environment as a lookup: reads ::getenv at call time. The
/// one impure piece here, and the `env` the runtime uses by default. Like
/// getenv, not safe against a concurrent setenv.
std::function<std::optional<std::string>(const std::string&)> process_environment();

/// Largest expanded string: 1 MiB. Beyond it: kind::too_long.
inline constexpr std::size_t max_expanded_bytes = 1u << 20;

/// Largest sum of the expanded strings of one server entry. A process's
/// arguments and environment must fit the kernel's ARG_MAX (2 MiB on a
/// default Linux) anyway.
inline constexpr std::size_t max_expanded_spec_bytes = 4u << 20;

} // namespace mcprt
