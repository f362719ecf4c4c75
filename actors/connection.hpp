#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <caf/fwd.hpp>

#include "core/server_config.hpp"
#include "messages/pool.hpp"

namespace mcprt::io {
class reactor;
class http_client;
class http_auth;
} // namespace mcprt::io

namespace mcprt {

/// The I/O the connection runs on: one reactor thread serves every stdio
/// server's pipes, a fixed pool serves every HTTP server.
struct connection_io {
  io::reactor* reactor = nullptr;
  io::http_client* http = nullptr;
  /// The authorization of a streamable-HTTP server's requests (its OAuth
  /// client); unset or null: none.
  using auth_factory = std::function<std::shared_ptr<io::http_auth>(const server_config&)>;
  auth_factory http_auth;
};

/// Spawns the actor that owns one live MCP connection: it starts the server
/// (stdio process, streamable-HTTP or legacy HTTP+SSE session), runs the
/// protocol through core/mcp_session, publishes every status change as a
/// client_update, and serves tool calls.
connection_actor spawn_connection(caf::actor_system& sys, connection_config cfg, connection_io io);

} // namespace mcprt
