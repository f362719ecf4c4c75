#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mcprt {

/// The URL of a streamable-HTTP MCP server, parsed; `target` is path plus
/// query, as sent. (The daemon's own address in daemon.json is stricter and
/// parsed by `parse_http_url` in core/daemon_identity.)
struct http_url {
  std::string scheme; // "http" or "https"
  std::string host;   // IPv6 literals without brackets
  int port = 0;
  std::string target;  // "/mcp?x=1"
  std::string display; // scheme://host:port/path, query replaced by "?…": for messages

  /// scheme://host:port (IPv6 in brackets), for the HTTP client.
  std::string origin() const;

  /// Accepts http://host[:port][/path][?query][#fragment] and https://…;
  /// rejects other schemes, user info, bad ports, spaces and control
  /// characters. On failure returns nullopt and sets `error`, which never
  /// echoes the URL's query or user info (they may carry credentials).
  static std::optional<http_url> parse(std::string_view url, std::string* error = nullptr);
};

/// A peer's address as `--fleet-budget` takes it: `HOST:PORT` or
/// `[IPV6]:PORT`, port 1-65535, at most 300 bytes.
struct host_port {
  std::string host;
  uint16_t port = 0;
};

std::optional<host_port> parse_host_port(std::string_view text);

} // namespace mcprt
