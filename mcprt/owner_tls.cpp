#include "mcprt/owner_tls.hpp"

#include <cstdlib>

#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>

#include "io/openssl_error_queue.hpp"
#include "io/owner_tls.hpp"
#include "messages/messages.hpp"

namespace mcprt {

caf::error use_owner_tls(caf::actor_system_config& cfg, std::filesystem::path home) {
  if (home.empty()) {
    const char* env = std::getenv("HOME");
    if (env == nullptr || *env == '\0')
      return make_error(errc::io_error, "use_owner_tls: no home directory given and $HOME is not set");
    home = env;
  }
  auto identity = io::load_owner_tls(home);
  if (!identity.error.empty()) return make_error(errc::io_error, identity.error);
  cfg.openssl_certificate = identity.files.certificate.string();
  cfg.openssl_key = identity.files.key.string();
  // The owner trusts only its own certificate: a peer is the owner or
  // fails the handshake.
  cfg.openssl_cafile = identity.files.certificate.string();
  cfg.load<caf::io::middleman>();
  cfg.load<caf::openssl::manager>();
  io::clear_openssl_errors_before_io();
  return caf::none;
}

} // namespace mcprt
