#pragma once

// Remote hosts: a workspace node (`mcprt serve --caf-port`)
// publishes one actor over CAF's middleman, and `runtime::connect` gives a
// C++ host the `runtime` interface against it. The node hands out its
// workspace actors (bus, gating, watcher, pool, budget) and each session's
// reconciler; a host talks to those through middleman proxies with the same
// messages an embedded runtime sends. What only the node's runtime object
// can do (open and close sessions, the snapshot, restart, OAuth, roots, the
// shown connection ids) goes through the node actor. A type-id block of its
// own, chained after the fleet's; both ends register it (add_mcprt_types).

#include <cstdint>
#include <string>
#include <vector>

#include "messages/fleet.hpp"
#include "messages/hot_reload.hpp"
#include "messages/workspace.hpp"

CAF_ADD_ATOM(mcprt, mcprt::atom, hello, "hello")
CAF_ADD_ATOM(mcprt, mcprt::atom, open, "open")
CAF_ADD_ATOM(mcprt, mcprt::atom, close, "close")
CAF_ADD_ATOM(mcprt, mcprt::atom, authorize, "authorize")
CAF_ADD_ATOM(mcprt, mcprt::atom, forget, "forget")
CAF_ADD_ATOM(mcprt, mcprt::atom, shown_id, "shown_id")
CAF_ADD_ATOM(mcprt, mcprt::atom, run, "run")

namespace mcprt {

/// What a host learns when it says hello: the node's workspace actors and
/// the options a host's `runtime::options()` and `capabilities()` show.
struct workspace_handles {
  std::string workspace;
  std::string profile;
  std::string version; // the node's mcprt version
  bool trusted = true;
  bool pool = true;
  bool limited = false; // a budget is set
  uint64_t budget = 0;
  std::string mode; // off | warn | enforce
  event_bus_actor bus;
  event_sink_actor forwarder;
  gating_actor gating;
  watcher_actor watcher;
  pool_actor pool_handle;     // invalid without the pool
  budget_actor budget_handle; // invalid without the pool
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, workspace_handles& x) {
  return f(caf::meta::type_name("mcprt.workspace_handles"), x.workspace, x.profile, x.version, x.trusted, x.pool,
           x.limited, x.budget, x.mode, x.bus, x.forwarder, x.gating, x.watcher, x.pool_handle, x.budget_handle);
}

/// A connected host's own actor. The node monitors it: when the host goes
/// away (it ends, its process dies, the connection breaks), the node closes
/// the sessions it opened.
using remote_host_actor = caf::typed_actor<caf::reacts_to<atom::ping>>;

/// The actor `mcprt serve --caf-port` publishes.
using workspace_node_actor = caf::typed_actor<
  // hello(host): the workspace's actors; the node starts watching the host.
  caf::replies_to<atom::hello, remote_host_actor>::with<workspace_handles>,
  // open(host, the session's own servers): its id and its reconciler.
  caf::replies_to<atom::open, remote_host_actor, std::vector<server_config>>::with<std::string, reconciler_actor>,
  // close(session): true when it was open.
  caf::replies_to<atom::close, std::string>::with<bool>,
  // The node's workspace snapshot, as runtime::snapshot() gives it there.
  caf::replies_to<atom::snapshot>::with<json_value>,
  caf::replies_to<atom::restart, std::string>::with<std::vector<restart_result>>,
  // authorize(server, callback timeout ms, URL timeout ms): the URL. The
  // node opens no browser for a host.
  caf::replies_to<atom::authorize, std::string, uint64_t, uint64_t>::with<std::string>,
  caf::replies_to<atom::forget, std::string>::with<bool>,
  // How the node shows an internal connection id (its own key).
  caf::replies_to<atom::shown_id, std::string>::with<std::string>,
  caf::reacts_to<atom::roots, std::vector<mcp_root>>>;

/// Registers the remote type ids (add_mcprt_types calls it).
void add_remote_types(caf::actor_system_config& cfg);

} // namespace mcprt

CAF_BEGIN_TYPE_ID_BLOCK(mcprt_remote, caf::id_block::mcprt_fleet::end)
  CAF_ADD_TYPE_ID(mcprt_remote, (mcprt::workspace_handles))
  CAF_ADD_TYPE_ID(mcprt_remote, (mcprt::remote_host_actor))
  CAF_ADD_TYPE_ID(mcprt_remote, (mcprt::workspace_node_actor))
CAF_END_TYPE_ID_BLOCK(mcprt_remote)
