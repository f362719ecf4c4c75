#pragma once

// Remote hosts: a workspace node (`mcprt serve --caf-port`)
// publishes one facade actor over CAF's middleman (mutual TLS), and
// `runtime::connect` gives a C++ host the `runtime` interface against it.
// The facade is the only actor of the node a host ever holds: it speaks in
// sessions and servers, checks that a session is the asking host's, and
// passes on to the node's own actors only what a host may ask of them. A
// host's servers are gated like a project's, never top tier. A type-id
// block of its own, chained after the fleet's; both ends register it
// (add_mcprt_types).

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
CAF_ADD_ATOM(mcprt, mcprt::atom, gating, "gating")

namespace mcprt {

/// What a host learns when it says hello: the options a host's
/// `runtime::options()` and `capabilities()` show. No actor handles.
struct workspace_info {
  std::string workspace;
  std::string profile;
  std::string version; // the node's mcprt version
  bool trusted = true;
  bool pool = true;
  bool limited = false; // a budget is set
  uint64_t budget = 0;
  std::string mode; // off | warn | enforce
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, workspace_info& x) {
  return f(caf::meta::type_name("mcprt.workspace_info"), x.workspace, x.profile, x.version, x.trusted, x.pool,
           x.limited, x.budget, x.mode);
}

/// A connected host's own actor. The node monitors it: when the host goes
/// away (it ends, its process dies, the connection breaks), the node closes
/// the sessions it opened.
using remote_host_actor = caf::typed_actor<caf::reacts_to<atom::ping>>;

/// The actor `mcprt serve --caf-port` publishes. Session operations take
/// the session's id first and fail with errc::unknown_session for a
/// session another host (or the node itself) opened.
using workspace_node_actor = caf::typed_actor<
  // hello(host): the workspace's options; the node starts watching the host.
  caf::replies_to<atom::hello, remote_host_actor>::with<workspace_info>,
  // open(host, the session's own servers): its id. The servers are gated
  // as a project's (approval bound to their config) and a settings server
  // of the same name wins.
  caf::replies_to<atom::open, remote_host_actor, std::vector<server_config>>::with<std::string>,
  // close(session): true when it was open.
  caf::replies_to<atom::close, std::string>::with<bool>,
  // -- one session's servers --
  // call(session, server, tool, arguments, call id, progress sink).
  caf::replies_to<atom::call, std::string, std::string, std::string, json_value, std::string,
                  progress_sink_actor>::with<json_value>,
  // cancel(session, call id): true when the call was there to cancel.
  caf::replies_to<atom::cancel, std::string, std::string>::with<bool>,
  // mcp_request(session, server, method, params): another client request.
  caf::replies_to<atom::mcp_request, std::string, std::string, std::string, json_value>::with<json_value>,
  caf::replies_to<atom::tools, std::string, std::string>::with<std::vector<tool_info>>,
  caf::replies_to<atom::info, std::string, std::string>::with<connection_info>,
  caf::replies_to<atom::snapshot, std::string>::with<session_snapshot>,
  // -- the workspace --
  // The node's workspace snapshot, as runtime::snapshot() gives it there.
  caf::replies_to<atom::snapshot>::with<json_value>,
  caf::replies_to<atom::gating>::with<gating_snapshot>,
  caf::replies_to<atom::reload>::with<bool>,
  caf::replies_to<atom::approve, std::string>::with<bool>,
  caf::replies_to<atom::reject, std::string>::with<bool>,
  caf::replies_to<atom::reason, std::string>::with<unavailability>,
  caf::replies_to<atom::restart, std::string>::with<std::vector<restart_result>>,
  // authorize(server, callback timeout ms, URL timeout ms): the URL. The
  // node opens no browser for a host.
  caf::replies_to<atom::authorize, std::string, uint64_t, uint64_t>::with<std::string>,
  caf::replies_to<atom::forget, std::string>::with<bool>,
  // How the node shows an internal connection id (its own key).
  caf::replies_to<atom::shown_id, std::string>::with<std::string>,
  // -- events: a host subscribes its own sinks --
  caf::replies_to<atom::subscribe, event_subscriber_actor, std::vector<event_kind>>::with<uint64_t>,
  caf::reacts_to<atom::unsubscribe, event_subscriber_actor>,
  caf::replies_to<atom::replay, uint64_t>::with<std::vector<event>>>;

/// Registers the remote type ids (add_mcprt_types calls it).
void add_remote_types(caf::actor_system_config& cfg);

} // namespace mcprt

CAF_BEGIN_TYPE_ID_BLOCK(mcprt_remote, caf::id_block::mcprt_fleet::end)
  CAF_ADD_TYPE_ID(mcprt_remote, (mcprt::workspace_info))
  CAF_ADD_TYPE_ID(mcprt_remote, (mcprt::remote_host_actor))
  CAF_ADD_TYPE_ID(mcprt_remote, (mcprt::workspace_node_actor))
CAF_END_TYPE_ID_BLOCK(mcprt_remote)
