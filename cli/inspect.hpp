#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mcprt::cli {

struct inspect_options {
  std::vector<std::string> command; // stdio: program and arguments
  std::optional<std::string> http_url;
  std::vector<std::string> headers; // NAME:VALUE
  std::optional<long long> timeout_ms;
  bool json = false;
};

/// Connects once, prints server, protocol, tools and prompts, shuts the
/// server down. Returns the process exit code (0 ok, 1 failed, 2 usage).
int run_inspect(const inspect_options& opts);

} // namespace mcprt::cli
