#pragma once

#include <filesystem>

#include <caf/actor_system_config.hpp>
#include <caf/error.hpp>

namespace mcprt {

/// Sets up `cfg` for CAF's middleman over TLS with the owner's identity,
/// which every CAF port of mcprt requires (`mcprt serve --caf-port`,
/// `mcprt budget-server`): loads caf::io::middleman and
/// caf::openssl::manager, with `openssl_certificate`, `openssl_key` and
/// `openssl_cafile` naming `<home>/.mcprt/caf/cert.pem` and `key.pem`
/// (made the first time, mode 0600 in a 0700 directory; the certificate
/// is its own CA). Then `runtime::connect(sys, host, port)` reaches a node
/// the same owner serves, with no other step.
///
/// `home` empty: $HOME. Call it before the actor system is made. An error
/// (and `cfg` untouched) when the identity cannot be made or is unsafe: a
/// key file others may read, a file that is not ours, a symbolic link.
caf::error use_owner_tls(caf::actor_system_config& cfg, std::filesystem::path home = {});

} // namespace mcprt
