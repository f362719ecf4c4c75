#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/server_config.hpp"

namespace mcprt {

/// A settings file that could not be used, with the position of the problem.
struct settings_error {
  std::string path;
  int line = 0;   // 1-based; 0 when the file could not be read at all
  int column = 0; // 1-based
  std::string message;
};

/// Which client's layout to read: `.mcprt/` (default), `.qwen/`, `.gemini/`.
struct profile {
  std::string dir_name = ".mcprt";
  static std::optional<profile> parse(std::string_view name); // mcprt|qwen|gemini
};

/// The settings files of one workspace, by scope.
struct settings_paths {
  std::filesystem::path user;      // <home>/.mcprt/settings.json
  std::filesystem::path project;   // <ws>/.mcp.json
  std::filesystem::path workspace; // <ws>/.mcprt/settings.json
};
settings_paths resolve_settings_paths(const std::filesystem::path& home,
                                      const std::filesystem::path& workspace,
                                      const profile& p = {});

/// One parsed settings file. A missing file is valid and empty; a file with
/// an error has `error` set and empty `content`/`servers`, so a caller that
/// holds a last good document keeps using it.
struct settings_document {
  std::string path;
  config_scope scope = config_scope::user;
  bool exists = false;
  nlohmann::json content = nlohmann::json::object();
  server_map servers;
  std::optional<std::vector<std::string>> allowed; // mcp.allowed
  std::optional<std::vector<std::string>> excluded; // mcp.excluded
  std::optional<settings_error> error;

  bool ok() const { return !error.has_value(); }
};

/// Parses settings text. `.mcp.json` and `--mcp-config` files carry only
/// `mcpServers`; settings files may also carry `mcp.allowed` / `mcp.excluded`.
/// Comments (// and /* */) are accepted, as editors of these files write them.
settings_document parse_settings_text(std::string path, config_scope scope, std::string_view text);

/// Builds a document from JSON content that was read before (the watcher
/// hands its last good content over as JSON). Servers whose entry equals
/// the one in `previous` keep their parse instead of being parsed again.
/// Errors carry no position (line and column 0).
settings_document parse_settings_value(std::string path, config_scope scope, nlohmann::json content,
                                       const settings_document* previous = nullptr);

/// Reads and parses a file; a file that does not exist yields an empty,
/// valid document with `exists == false`.
settings_document load_settings_file(const std::filesystem::path& path, config_scope scope);

/// The merged view of all scopes.
struct assembled_settings {
  server_map servers; // each remembers its scope
  std::optional<std::vector<std::string>> allowed; // nullopt: no scope sets it
  std::vector<std::string> excluded;
};

/// Layers documents (lowest priority first): a higher scope replaces a
/// same-named server whole. `mcp.excluded` lists add up across scopes;
/// `mcp.allowed` lists intersect (each scope that sets one can only narrow
/// admission). `overlay` (top tier: --mcp-config, host-provided servers)
/// wins over every document.
assembled_settings assemble(const std::vector<const settings_document*>& layers,
                            const server_map& overlay = {});

} // namespace mcprt
