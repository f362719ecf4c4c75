// The actor system of a host (or any peer) that talks to mcprt over CAF's
// middleman: mcprt's message types and the middleman.
#pragma once

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include "mcprt/runtime.hpp"

namespace mcprt::test {

struct host_config : caf::actor_system_config {
  host_config() {
    mcprt::add_mcprt_types(*this);
    load<caf::io::middleman>();
  }
};

} // namespace mcprt::test
