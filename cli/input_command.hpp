#pragma once

// `mcprt input set|unset|list`: the values of `${input:ID}` placeholders
// (VS Code's .vscode/mcp.json), stored beforehand because mcprt never
// prompts while it runs. The store is core/input_store.

#include <memory>

namespace CLI {
class App;
}

namespace mcprt::cli {

class input_command {
public:
  /// Adds `input` and its subcommands to `app`.
  explicit input_command(CLI::App& app);
  ~input_command();
  input_command(const input_command&) = delete;
  input_command& operator=(const input_command&) = delete;

  /// True when the parsed command line named `input`.
  bool given() const;

  /// Runs it: 0 on success, 1 when the store cannot be read or written,
  /// 2 on bad usage (a bad id, an empty or too long value, no workspace).
  int run();

private:
  struct state;
  std::unique_ptr<state> s_;
};

} // namespace mcprt::cli
