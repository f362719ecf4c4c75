#pragma once

// INTERNAL (not installed): what travels between a connection, its
// subscribers, the callers of its tools and the host handler, and the
// connection's actor interface.

#include <cstdint>
#include <string>
#include <vector>

#include "messages/messages.hpp"
#include "messages/state.hpp"

namespace mcprt {

/// A connection's status change, published to its subscribers.
struct client_update {
  std::string server;
  std::string connection_id;
  uint64_t generation = 0;
  connection_status status = connection_status::connecting;
  uint32_t tools = 0;
  uint32_t prompts = 0;
  int32_t pid = -1; // -1: no process (HTTP, or not started)
  std::string error; // empty unless status is error/disconnected with a reason
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, client_update& x) {
  return f(caf::meta::type_name("mcprt.client_update"), x.server, x.connection_id, x.generation,
           x.status, x.tools, x.prompts, x.pid, x.error);
}

/// includeTools / excludeTools; `has_*` false means "not set".
struct tool_filter_spec {
  bool has_include = false;
  std::vector<std::string> include;
  bool has_exclude = false;
  std::vector<std::string> exclude;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_filter_spec& x) {
  return f(caf::meta::type_name("mcprt.tool_filter_spec"), x.has_include, x.include,
           x.has_exclude, x.exclude);
}

/// Progress of one tool call that asked for it, to the caller's
/// progress_sink_actor. `call_id` is the caller's; doubles are finite and
/// never subnormal (they cross CAF nodes intact).
struct call_progress_update {
  std::string server;
  std::string call_id;
  double progress = 0;
  bool has_total = false;
  double total = 0;
  std::string message;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, call_progress_update& x) {
  return f(caf::meta::type_name("mcprt.call_progress_update"), x.server, x.call_id, x.progress,
           x.has_total, x.total, x.message);
}

} // namespace mcprt

// -- atoms -----------------------------------------------------------------------

CAF_ADD_ATOM(mcprt, mcprt::atom, subscribe, "subscribe")
CAF_ADD_ATOM(mcprt, mcprt::atom, info, "info")
CAF_ADD_ATOM(mcprt, mcprt::atom, call, "call")
CAF_ADD_ATOM(mcprt, mcprt::atom, filter, "filter")
CAF_ADD_ATOM(mcprt, mcprt::atom, stop, "stop")
CAF_ADD_ATOM(mcprt, mcprt::atom, ping, "ping")
CAF_ADD_ATOM(mcprt, mcprt::atom, mcp_request, "mcp_req")
// INTERNAL: delivered by I/O adapters and timers to the connection actor.
CAF_ADD_ATOM(mcprt, mcprt::atom, io_out, "io_out")
CAF_ADD_ATOM(mcprt, mcprt::atom, io_err, "io_err")
CAF_ADD_ATOM(mcprt, mcprt::atom, io_exit, "io_exit")
CAF_ADD_ATOM(mcprt, mcprt::atom, http_msg, "http_msg")
CAF_ADD_ATOM(mcprt, mcprt::atom, http_gone, "http_gone")
CAF_ADD_ATOM(mcprt, mcprt::atom, http_err, "http_err")
CAF_ADD_ATOM(mcprt, mcprt::atom, http_auth, "http_auth")
CAF_ADD_ATOM(mcprt, mcprt::atom, http_closed, "http_done")
CAF_ADD_ATOM(mcprt, mcprt::atom, tick, "tick")
// Cancels a tool call by the caller's call id.
CAF_ADD_ATOM(mcprt, mcprt::atom, cancel, "cancel")
CAF_ADD_ATOM(mcprt, mcprt::atom, host_answer, "host_ans")
CAF_ADD_ATOM(mcprt, mcprt::atom, roots, "roots")

// -- requests for the host ------------------------------------------

namespace mcprt {

/// A server request only the host can answer (sampling, or elicitation under
/// `ask`), as a connection forwards it to the host handler.
struct forwarded_host_request {
  std::string server;        // the server's name
  std::string connection_id; // internal; never shown outside the runtime
  std::string method;        // "sampling/createMessage" or "elicitation/create"
  json_value params;         // the server's params: untrusted
  /// The tool of the one call in flight on this connection when exactly one
  /// is (the call the request most likely belongs to); empty otherwise.
  std::string tool;
  /// 2026-07-28: an input a request's input_required result asked for. The
  /// request's key in the call broker (empty: a call made without one), the
  /// server's key for the input, and how many inputs the round asked the
  /// host for at once.
  std::string call_key;
  std::string input_key;
  std::uint64_t round_size = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, forwarded_host_request& x) {
  return f(caf::meta::type_name("mcprt.forwarded_host_request"), x.server, x.connection_id, x.method, x.params,
           x.tool, x.call_key, x.input_key, x.round_size);
}

// -- actor interfaces ------------------------------------------------------------

/// The EVENT SINK interface: whoever wants connection updates.
using event_sink_actor = caf::typed_actor<caf::reacts_to<client_update>>;

/// Whoever asked for the progress of a tool call.
using progress_sink_actor = caf::typed_actor<caf::reacts_to<call_progress_update>>;

/// The CONNECTION actor interface: one live MCP connection.
using connection_actor = caf::typed_actor<
  // Current state, tools and prompts.
  caf::replies_to<atom::info>::with<connection_info>,
  // Calls a tool; the result is the server's JSON result, passed through.
  caf::replies_to<atom::call, std::string, json_value>::with<json_value>,
  // The same call under the caller's call id (unique among its calls in
  // flight here), for cancel; with a valid sink, the server is asked for
  // progress and each step goes to the sink.
  caf::replies_to<atom::call, std::string, json_value, std::string, progress_sink_actor>::with<json_value>,
  // Cancels the call of that call id (notifications/cancelled goes out; the
  // call fails with errc::cancelled, a late answer is dropped). False when
  // no such call is in flight.
  caf::replies_to<atom::cancel, std::string>::with<bool>,
  // Adds a subscriber for client_update events.
  caf::reacts_to<atom::subscribe, event_sink_actor>,
  // Re-filters the tool view without reconnecting.
  caf::reacts_to<atom::filter, tool_filter_spec>,
  // Pings the server; answers the round trip in microseconds.
  caf::replies_to<atom::ping>::with<int64_t>,
  // A client request other than tools/call (resources/*, prompts/get,
  // completion/complete: mcp_session::request): method, params -> result.
  caf::replies_to<atom::mcp_request, std::string, json_value>::with<json_value>,
  // The same under the call broker's key for it: the inputs a 2026-07-28
  // server asks for during it name the request they belong to.
  caf::replies_to<atom::mcp_request, std::string, json_value, std::string>::with<json_value>,
  // Shuts the server down cleanly (stdin, SIGTERM, SIGKILL), then quits.
  caf::replies_to<atom::stop>::with<bool>,
  // INTERNAL: stdout bytes, a stderr line, the process ended (its
  // description: "exit code 3", "killed by SIGKILL (...)").
  caf::reacts_to<atom::io_out, std::string>,
  caf::reacts_to<atom::io_err, std::string>,
  caf::reacts_to<atom::io_exit, std::string>,
  // INTERNAL: HTTP transport: a message, session expired, error, closed.
  caf::reacts_to<atom::http_msg, std::string>,
  caf::reacts_to<atom::http_gone>,
  caf::reacts_to<atom::http_err, std::string>,
  caf::reacts_to<atom::http_auth, std::string>,
  caf::reacts_to<atom::http_closed>,
  // INTERNAL: a protocol deadline may have passed.
  caf::reacts_to<atom::tick>,
  // Replaces the roots offered to the server (notifications/roots/list_changed).
  caf::reacts_to<atom::roots, std::vector<mcp_root>>>;

} // namespace mcprt

namespace mcprt {

/// The HOST HANDLER interface: where connections send the requests only the
/// host can answer. A request is (token, request); the token is the
/// connection's own and comes back in `host_withdrawn` when the server no
/// longer wants the answer (cancelled, timed out, connection ended).
using host_handler_actor = caf::typed_actor<
  caf::replies_to<atom::host_request, uint64_t, forwarded_host_request>::with<host_reply>,
  caf::reacts_to<atom::host_withdrawn, uint64_t>>;

} // namespace mcprt

CAF_BEGIN_TYPE_ID_BLOCK(mcprt_connection, caf::id_block::mcprt_state::end)
  CAF_ADD_TYPE_ID(mcprt_connection, (mcprt::client_update))
  CAF_ADD_TYPE_ID(mcprt_connection, (mcprt::tool_filter_spec))
  CAF_ADD_TYPE_ID(mcprt_connection, (mcprt::event_sink_actor))
  CAF_ADD_TYPE_ID(mcprt_connection, (mcprt::connection_actor))
  CAF_ADD_TYPE_ID(mcprt_connection, (mcprt::call_progress_update))
  CAF_ADD_TYPE_ID(mcprt_connection, (mcprt::progress_sink_actor))
  CAF_ADD_TYPE_ID(mcprt_connection, (mcprt::forwarded_host_request))
  CAF_ADD_TYPE_ID(mcprt_connection, (mcprt::host_handler_actor))
CAF_END_TYPE_ID_BLOCK(mcprt_connection)
