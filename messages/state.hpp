#pragma once

// What the runtime answers about the workspace: why a server is out, the
// gating and session snapshots, restart and shutdown results. Part of the
// installed API (mcprt/runtime.hpp includes it).

#include <cstdint>
#include <string>
#include <vector>

#include "core/tool_sets.hpp"
#include "messages/events.hpp"
#include "messages/messages.hpp"

namespace mcprt {

/// Why a server is not served, and what to do about it.
struct unavailability {
  std::string server;
  std::string reason; // to_string(unavailable_reason), or budget_exhausted
  std::string remedy;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, unavailability& x) {
  return f(caf::meta::type_name("mcprt.unavailability"), x.server, x.reason, x.remedy);
}

// -- gating and sessions -----------------------------------------------

/// One configured server as the gating actor sees it (for snapshots).
struct gated_server {
  std::string name;
  std::string scope;
  std::string transport;
  std::string fingerprint; // connection id
  bool admitted = false;
  std::string reason;   // empty when admitted
  std::string approval; // pending | approved | rejected; empty if not gated
  /// What the gateway puts before its tool and prompt names (the entry's
  /// `"prefix"`, else `<name>__`).
  std::string prefix;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gated_server& x) {
  return f(caf::meta::type_name("mcprt.gated_server"), x.name, x.scope, x.transport, x.fingerprint, x.admitted,
           x.reason, x.approval, x.prefix);
}

struct gating_snapshot {
  bool trusted = true;
  uint64_t revision = 0;
  std::vector<gated_server> servers; // sorted by name
  std::vector<std::string> promptable;
  std::vector<std::string> errors; // settings files currently failing to parse
  std::vector<tool_set> tool_sets; // mcp.toolSets of every scope, by name
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gating_snapshot& x) {
  return f(caf::meta::type_name("mcprt.gating_snapshot"), x.trusted, x.revision, x.servers, x.promptable,
           x.errors, x.tool_sets);
}

/// One server a session runs (or tried to).
struct session_server {
  std::string name;
  std::string scope;     // where its config came from (session: the host's own)
  std::string transport;
  std::string connection_id;
  connection_status status = connection_status::connecting;
  int32_t pid = -1;
  uint32_t tools = 0; // after the session's tool filter
  uint32_t prompts = 0;
  std::string last_error;
  std::string sandbox; // connection_info::sandbox
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_server& x) {
  return f(caf::meta::type_name("mcprt.session_server"), x.name, x.scope, x.transport, x.connection_id, x.status,
           x.pid, x.tools, x.prompts, x.last_error, x.sandbox);
}

struct session_snapshot {
  std::string session;
  uint64_t generation = 0; // passes run so far
  bool in_progress = false;
  std::string last_error;
  std::vector<session_server> servers; // sorted by name
  std::vector<unavailability> skipped; // budget refusals of the last pass
  std::vector<unavailability> failed;  // servers that failed to connect in the last pass (remedy: the error)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_snapshot& x) {
  return f(caf::meta::type_name("mcprt.session_snapshot"), x.session, x.generation, x.in_progress, x.last_error,
           x.servers, x.skipped, x.failed);
}

// -- the pool --------------------------------------------------------------

struct restart_result {
  std::string id;
  bool restarted = false;
  int64_t duration_ms = 0;
  std::string reason; // why not, when restarted is false
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, restart_result& x) {
  return f(caf::meta::type_name("mcprt.restart_result"), x.id, x.restarted, x.duration_ms, x.reason);
}

struct drain_result {
  uint64_t drained = 0;
  uint64_t forced = 0;
  std::vector<std::string> errors;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, drain_result& x) {
  return f(caf::meta::type_name("mcprt.drain_result"), x.drained, x.forced, x.errors);
}

} // namespace mcprt

CAF_BEGIN_TYPE_ID_BLOCK(mcprt_state, caf::id_block::mcprt_events::end)
  CAF_ADD_TYPE_ID(mcprt_state, (mcprt::unavailability))
  CAF_ADD_TYPE_ID(mcprt_state, (mcprt::gated_server))
  CAF_ADD_TYPE_ID(mcprt_state, (mcprt::gating_snapshot))
  CAF_ADD_TYPE_ID(mcprt_state, (mcprt::session_server))
  CAF_ADD_TYPE_ID(mcprt_state, (mcprt::session_snapshot))
  CAF_ADD_TYPE_ID(mcprt_state, (mcprt::restart_result))
  CAF_ADD_TYPE_ID(mcprt_state, (std::vector<mcprt::restart_result>))
  CAF_ADD_TYPE_ID(mcprt_state, (mcprt::drain_result))
CAF_END_TYPE_ID_BLOCK(mcprt_state)
