#pragma once

// The values a host sees: errors, a connection's tools and capabilities,
// the requests only the host can answer and the host's actor form. Part of
// the installed API (mcprt/runtime.hpp includes it). Every type that crosses
// an actor boundary has an `inspect` overload and a type id, so the same
// actors can be reached from another CAF node over caf::io; the internal
// messages and actor interfaces are in messages/connection.hpp and the
// headers after it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/type_id.hpp>
#include <caf/typed_actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/error.hpp>
#include <nlohmann/json.hpp>

#include "core/client_features.hpp"
#include "core/untrusted_text.hpp"

namespace mcprt {

// -- errors -------------------------------------------------------------------

/// Errors mcprt actors answer requests with (category atom "mcprt").
enum class errc : uint8_t {
  none = 0,
  budget_exhausted,
  pool_draining,
  spawn_failed,
  timeout,
  not_connected,
  unknown_tool,
  tool_error,       // the server answered the call with a JSON-RPC error
  protocol_error,
  transport_not_supported,
  unavailable,      // gating keeps the server out (see messages/unavailable_error.hpp)
  unknown_server,   // no server of that name is configured
  not_gated,        // approve/reject of a server that needs no approval
  io_error,         // a file could not be read or written
  too_many_calls,   // the server has as many tool calls in flight as allowed
  unknown_session,  // no open session of that id (closed, or never opened)
  // -- resources, prompts and completion --
  not_advertised,   // the server did not advertise the capability a request needs
  bad_request,      // the request's parameters are not what its method needs
  cancelled,        // the caller cancelled the tool call
  // -- OAuth --
  needs_auth,       // the server wants an authorization a person must give (mcprt auth)
  // -- remote hosts --
  disconnected,     // the remote workspace node went away (runtime::connect)
  // -- definitions pinned at approval --
  definitions_changed, // the tool differs from its definition pinned at approval (mcprt approve)
};

std::string to_string(errc x);
caf::error make_error(errc x, std::string message = {});

/// Renders mcprt errors readably; register with
/// `cfg.add_error_category(caf::atom("mcprt"), render_error)`.
std::string render_error(uint8_t code, caf::atom_value category, const caf::message& context);

/// Registers all of mcprt's type ids (every block, public and internal) and
/// its error category.
void add_mcprt_types(caf::actor_system_config& cfg);

// -- payloads -------------------------------------------------------------------

/// A JSON value in a message, serialized as its text.
struct json_value {
  nlohmann::json value;
};

// Serialized as text: a value holding a server's invalid UTF-8 must not
// throw on the way out, and text from another node is parsed within bounds
// (a deep value would otherwise be built here, on an actor's stack).
template <class Inspector>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, json_value& x) {
  auto text = dump_json(x.value);
  return f(caf::meta::type_name("mcprt.json"), text);
}

template <class Inspector>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, json_value& x) {
  std::string text;
  auto load = [&]() -> caf::error {
    json_limits limits;
    limits.max_depth = 128;
    limits.replace_invalid_utf8 = true;
    auto parsed = parse_bounded_json(text, limits);
    x.value = parsed.ok() ? std::move(parsed.value) : nlohmann::json(nlohmann::json::value_t::discarded);
    return caf::none;
  };
  return f(caf::meta::type_name("mcprt.json"), text, caf::meta::load_callback(load));
}

/// `needs_auth`: the server refused us and only a person can authorize
/// (`mcprt auth`); it is not restarted meanwhile.
enum class connection_status : uint8_t { connecting, connected, disconnected, error, needs_auth };

std::string to_string(connection_status x);

struct tool_info {
  std::string name;
  std::string description;
  json_value input_schema;
  /// The tool as the server listed it (title, annotations, outputSchema,
  /// ...), for the gateway to pass on whole.
  json_value raw;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_info& x) {
  return f(caf::meta::type_name("mcprt.tool_info"), x.name, x.description, x.input_schema, x.raw);
}

struct prompt_info {
  std::string name;
  std::string description;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prompt_info& x) {
  return f(caf::meta::type_name("mcprt.prompt_info"), x.name, x.description);
}

/// Everything a connection knows about itself.
struct connection_info {
  std::string server;
  std::string connection_id;
  uint64_t generation = 0;
  connection_status status = connection_status::connecting;
  int32_t pid = -1;
  std::string server_name;
  std::string server_version;
  std::string protocol;
  std::vector<tool_info> tools; // after includeTools / excludeTools
  std::vector<prompt_info> prompts;
  std::vector<std::string> stderr_tail;
  std::string last_error;
  /// The server's `capabilities` from initialize (an object; empty before).
  json_value capabilities;
  /// Tools the server offers that differ from the definitions pinned at its
  /// approval (new or changed; not in `tools`): a call of one fails with
  /// the reason and `mcprt approve SERVER`. The server's own names.
  std::vector<std::string> held_tools;
  /// A stdio server's sandbox as a JSON object text (policy, what is in
  /// force, what is missing); "" for none.
  std::string sandbox;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, connection_info& x) {
  return f(caf::meta::type_name("mcprt.connection_info"), x.server, x.connection_id, x.generation,
           x.status, x.pid, x.server_name, x.server_version, x.protocol, x.tools, x.prompts,
           x.stderr_tail, x.last_error, x.capabilities, x.held_tools, x.sandbox);
}

// -- requests for the host ------------------------------------------

/// The host's answer: `result` when `error_code` is 0, else a JSON-RPC error.
struct host_reply {
  json_value result;
  int32_t error_code = 0;
  std::string error_message;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, host_reply& x) {
  return f(caf::meta::type_name("mcprt.host_reply"), x.result, x.error_code, x.error_message);
}

/// A request only the host can answer, as a host's own actor receives it
/// (`host_handlers::actor`; the callback form gets `server_request`). The
/// same fields: `params` is the server's, UNTRUSTED; the call it belongs to
/// is named when known (`call_id` empty: none).
struct server_request_message {
  std::string id;
  std::string server;
  std::string method;
  json_value params;
  std::string call_session;
  std::string call_tool;
  std::string call_id;
  /// 2026-07-28: as server_request's input_key and input_round.
  std::string input_key;
  std::uint64_t input_round = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, server_request_message& x) {
  return f(caf::meta::type_name("mcprt.server_request_message"), x.id, x.server, x.method, x.params,
           x.call_session, x.call_tool, x.call_id, x.input_key, x.input_round);
}

/// Roots cross actor boundaries when the host changes them.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, mcp_root& x) {
  return f(caf::meta::type_name("mcprt.mcp_root"), x.uri, x.name);
}

} // namespace mcprt

CAF_ADD_ATOM(mcprt, mcprt::atom, host_request, "host_req")
CAF_ADD_ATOM(mcprt, mcprt::atom, host_withdrawn, "host_wdrn")

namespace mcprt {

/// A HOST's actor, the actor form of the host's handlers: it answers each
/// request (its reply goes to the server: `host_reply::result`, or a
/// JSON-RPC error; a request that fails, e.g. the actor is gone, answers
/// -32603) and hears of a request no longer wanted by its id.
using host_actor = caf::typed_actor<
  caf::replies_to<atom::host_request, server_request_message>::with<host_reply>,
  caf::reacts_to<atom::host_withdrawn, std::string>>;

} // namespace mcprt

CAF_BEGIN_TYPE_ID_BLOCK(mcprt, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(mcprt, (mcprt::json_value))
  CAF_ADD_TYPE_ID(mcprt, (mcprt::connection_status))
  CAF_ADD_TYPE_ID(mcprt, (mcprt::tool_info))
  CAF_ADD_TYPE_ID(mcprt, (mcprt::prompt_info))
  CAF_ADD_TYPE_ID(mcprt, (mcprt::connection_info))
  CAF_ADD_TYPE_ID(mcprt, (std::vector<mcprt::tool_info>))
  CAF_ADD_TYPE_ID(mcprt, (std::vector<mcprt::prompt_info>))
  // requests for the host
  CAF_ADD_TYPE_ID(mcprt, (mcprt::host_reply))
  CAF_ADD_TYPE_ID(mcprt, (mcprt::mcp_root))
  CAF_ADD_TYPE_ID(mcprt, (std::vector<mcprt::mcp_root>))
  CAF_ADD_TYPE_ID(mcprt, (mcprt::server_request_message))
  CAF_ADD_TYPE_ID(mcprt, (mcprt::host_actor))
CAF_END_TYPE_ID_BLOCK(mcprt)
