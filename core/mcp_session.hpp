#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcprt/version.hpp"
#include "core/client_features.hpp"
#include "core/line_reader.hpp"
#include "core/mcp_headers.hpp"
#include "core/tool_filter.hpp"

namespace mcprt {

/// MCP revisions we speak, newest first; initialize offers the first.
inline constexpr std::array<std::string_view, 4> supported_protocol_versions = {
    "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
inline constexpr std::string_view latest_protocol_version = supported_protocol_versions[0];

bool is_supported_protocol_version(std::string_view v);

/// The stateless revision (no initialize: every request carries the
/// revision, the client's identity and capabilities in `_meta`), spoken to
/// a server whose `server/discover` offers it (options::probe_modern).
inline constexpr std::string_view modern_protocol_version = "2026-07-28";

/// JSON-RPC errors 2026-07-28 defines; a server that answers with one is a
/// modern server, whatever else it says.
inline constexpr int error_header_mismatch = -32020;
inline constexpr int error_missing_client_capability = -32021;
inline constexpr int error_unsupported_protocol_version = -32022;

/// Discovery (initialize + tools/list + prompts/list) must finish within
/// this. A remote server that takes longer is unlikely to become usable,
/// while a local one may be an `npx` that downloads its package first.
inline constexpr std::chrono::milliseconds default_local_discovery_timeout{30000};
inline constexpr std::chrono::milliseconds default_remote_discovery_timeout{5000};

/// The server's `timeout` wins; otherwise the default for its transport.
std::chrono::milliseconds discovery_timeout_for(bool remote,
                                                std::optional<std::chrono::milliseconds> configured);

/// A tool call without a configured timeout gets the reference's
/// MCP_DEFAULT_TIMEOUT_MSEC: long enough for slow tools, short enough that
/// a lost response cannot pin a caller forever.
inline constexpr std::chrono::milliseconds default_call_timeout{600000};

/// Codes for errors the session makes up itself (the MCP SDKs use the same
/// numbers for "connection closed" and "request timeout").
inline constexpr int error_connection_closed = -32000;
inline constexpr int error_request_timeout = -32001;
inline constexpr int error_not_ready = -32002;
/// The server answered, but the answer was refused (nested too deep or too
/// large to accept): the request fails at once instead of timing out.
inline constexpr int error_response_refused = -32003;
inline constexpr int error_method_not_found = -32601;
inline constexpr int error_invalid_params = -32602;

struct mcp_prompt {
  std::string name;
  std::string description;
  nlohmann::json raw = nlohmann::json::object();

  friend bool operator==(const mcp_prompt& a, const mcp_prompt& b) { return a.raw == b.raw; }
  friend bool operator!=(const mcp_prompt& a, const mcp_prompt& b) { return !(a == b); }
};

struct mcp_server_info {
  std::string name;
  std::string version;
  nlohmann::json raw = nlohmann::json::object();
};

enum class session_state { created, initializing, discovering, ready, failed, closed };

std::string to_string(session_state s);

struct rpc_error {
  int code = 0;
  std::string message;
  nlohmann::json data; // null when the server sent none
};

enum class call_outcome {
  ok,        // `result` is the server's result, passed through (also isError ones)
  rpc_error, // the server answered with a JSON-RPC error
  timed_out, // no answer in time; notifications/cancelled was sent
  cancelled, // the caller cancelled; notifications/cancelled was sent
  rejected,  // never sent: not ready, unknown or filtered tool, bad arguments
  closed,    // the connection failed or closed while the call was in flight
};

std::string to_string(call_outcome o);

struct call_result {
  std::uint64_t token = 0;
  call_outcome outcome = call_outcome::ok;
  nlohmann::json result;       // set when outcome == ok
  std::optional<rpc_error> error; // set otherwise
};

/// A server request only the host can answer (an elicitation under the
/// `ask` policy, or sampling). The caller passes it on, with the server's
/// name, and hands the answer back through answer_host_request /
/// fail_host_request with the same token.
struct host_request {
  std::uint64_t token = 0;
  std::string method;    // "elicitation/create", "sampling/createMessage", or (an input only) "roots/list"
  nlohmann::json params; // the server's params, as sent (an object)
  /// 2026-07-28: the call whose input_required result asks for it (its
  /// token), and the server's key for it; a server request has neither.
  std::optional<std::uint64_t> call = std::nullopt;
  std::string input_key = {};
  /// 2026-07-28: how many host requests that input_required result made at
  /// once (this one among them), so that a host can ask for them together.
  std::size_t round_size = 0;
};

/// A notifications/progress for a call that asked for progress.
struct call_progress {
  std::uint64_t token = 0;     // the call's token
  double progress = 0;         // finite, and larger than the call's last one
  std::optional<double> total; // finite, when the server sent one
  std::string message;         // valid UTF-8, at most max_progress_message bytes; may be empty
};

/// A server's log message (notifications/message), bounded: `level` one of
/// RFC 5424's eight names, `logger` at most 256 bytes, `data` a stub
/// `{"truncated": true, "bytes": N}` past max_log_data_bytes of JSON.
struct server_log_message {
  std::string level;
  std::string logger;
  nlohmann::json data;
};

inline constexpr std::size_t max_log_data_bytes = 16 * 1024;

/// What the caller must do after each input.
struct session_effects {
  std::vector<std::string> send; // JSON-RPC messages, one line each, no trailing newline
  /// HTTP headers of some of them, by index into `send`, in order: what
  /// 2026-07-28 mirrors from a request's body (options::http_headers).
  std::vector<std::pair<std::size_t, std::vector<std::pair<std::string, std::string>>>> send_headers;
  bool ready = false;            // discovery finished: tools and prompts are usable
  bool tools_changed = false;    // visible_tools() differs from what was last reported
  bool prompts_changed = false;  // prompts() differs from what was last reported
  bool pong = false;             // a ping we sent was answered
  std::optional<std::string> failure; // fatal: tear the connection down, with this reason
  std::vector<call_result> completed_calls;
  /// New requests for the host to answer.
  std::vector<host_request> host_requests;
  /// Host requests that no longer want an answer (the server cancelled,
  /// it timed out, or the session ended): the host may drop them; an
  /// answer that still comes is ignored.
  std::vector<std::uint64_t> withdrawn_host_requests;
  /// Progress of calls made with want_progress, in arrival order.
  std::vector<call_progress> progress;

  // -- resources --
  /// URIs of subscribed resources the server says changed
  /// (notifications/resources/updated), each once per input.
  std::vector<std::string> resources_updated;
  /// notifications/resources/list_changed came.
  bool resources_changed = false;
  /// Log messages of the server, in arrival order (the gateway).
  std::vector<server_log_message> logs;

  bool empty() const {
    return send.empty() && !ready && !tools_changed && !prompts_changed && !pong && !failure &&
           completed_calls.empty() && host_requests.empty() && withdrawn_host_requests.empty() &&
           progress.empty() && resources_updated.empty() && !resources_changed && logs.empty();
  }
};

/// The client side of one MCP connection, sans-I/O: lines or bytes in,
/// messages to send and events out; time is always passed in and nothing
/// here blocks, reads a clock or touches a socket.
///
/// Lifecycle: start() sends initialize (offering the newest revision) ->
/// the server's answer must name a revision we speak -> notifications/
/// initialized -> tools/list and prompts/list, each only if the server
/// advertised the capability, following nextCursor -> ready. All of it
/// within `discovery_timeout`. Afterwards list_changed notifications re-list
/// (one re-list at a time; changes that arrive meanwhile cause exactly one
/// more), tool calls are routed with per-request timeouts and server pings
/// are answered. Server requests for roots, elicitation and sampling are
/// answered as `options::features` says (docs/client-features.md); any
/// other server request gets "Method not found".
///
/// After `failure` is reported the session is inert: every call returns
/// empty effects except that new tool calls are rejected.
class mcp_session {
public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;

  struct options {
    std::string client_name = "mcprt";
    std::string client_version = MCPRT_VERSION;
    std::chrono::milliseconds discovery_timeout = default_local_discovery_timeout;
    /// nullopt: calls never time out.
    std::optional<std::chrono::milliseconds> call_timeout = default_call_timeout;
    /// A ping not answered within this fails the session: it is the
    /// liveness check, and a server that cannot answer it is wedged.
    std::chrono::milliseconds ping_timeout{30000};
    /// Re-lists a server's list_changed asks for start at most this often
    /// (per list): a server that floods list_changed costs one listing per
    /// interval, and its clients one notification.
    std::chrono::milliseconds relist_interval{500};
    /// Guards against a server whose cursors never end.
    std::size_t max_list_pages = 1000;
    /// Deepest nesting of arrays and objects accepted in one message. A
    /// server's output is parsed within it (and within the line limit), so
    /// a hostile answer cannot exhaust the stack of whoever walks it later.
    std::size_t max_message_depth = 128;
    std::optional<std::vector<std::string>> include_tools;
    std::optional<std::vector<std::string>> exclude_tools;
    line_reader_limits limits;
    /// Roots and elicitation: what the session advertises and how it
    /// answers the server's requests for them.
    client_features features;
    /// Longest progress message passed on (cut on a character boundary).
    std::size_t max_progress_message = 1024;
    /// Host requests waiting for an answer at once; more are refused with
    /// an error, so a server cannot pile up work for the host.
    std::size_t max_pending_host_requests = 16;
    /// A host request unanswered this long is answered for the host (an
    /// elicitation declined, sampling refused) so the server never waits
    /// forever; nullopt: it waits as long as the session lives.
    std::optional<std::chrono::milliseconds> host_request_timeout = std::chrono::minutes(10);
    /// request(): resources/list and resources/templates/list follow
    /// nextCursor up to this many pages or until this many items are
    /// gathered; past either the result carries the server's nextCursor,
    /// so the caller can go on from there and nothing is lost.
    std::size_t max_request_pages = 100;
    std::size_t max_request_items = 10000;
    /// Distinct resource URIs subscribed at once; more are refused.
    std::size_t max_resource_subscriptions = 1024;
    /// start() asks `server/discover` at modern_protocol_version first. A
    /// server that lists that revision is spoken to statelessly; any other
    /// answer (an error, a refusal, a list without it) falls back to
    /// initialize and the revisions before it, as the revision's
    /// backward-compatibility rules say. Off: initialize at once.
    bool probe_modern = false;
    /// The transport is streamable HTTP: at the modern revision each
    /// request's Mcp-Method and Mcp-Name, and a tool's `x-mcp-header`
    /// parameters as Mcp-Param-*, come with it (session_effects::
    /// send_headers), and a tool whose annotations break the rules is left
    /// out of the list, as the revision requires.
    bool http_headers = false;
    /// At the modern revision, follow the server's list changes and the
    /// updates of subscribed resources on a `subscriptions/listen` request
    /// kept open, opened again when the server ends it (over HTTP: a POST
    /// whose event stream the transport holds open; io/http_transport).
    bool listen_modern = false;
    /// At the modern revision a roots/list input is the one request's, not
    /// the session's: offered to the host first (a host_request), and
    /// answered with `features.roots` when the host does not answer it.
    bool host_answers_input_roots = false;
  };

  explicit mcp_session(options opts);

  session_effects start(time_point now);

  /// Raw transport bytes (stdio): split into lines, then as on_line.
  session_effects on_bytes(const char* data, std::size_t n, time_point now);
  /// One message (a line of stdio, or an HTTP/SSE body); may be garbage.
  /// Invalid UTF-8 is replaced by U+FFFD before parsing, so one stray
  /// Latin-1 byte costs a character, not the message; every string the
  /// session keeps or reports is therefore valid UTF-8. A message nested
  /// deeper than `max_message_depth` or longer than the line limit is never
  /// built: when it answers a request we wait for, that request fails with
  /// `error_response_refused`, otherwise it counts as garbage.
  session_effects on_line(std::string_view line, time_point now);
  /// Fires every deadline at or before `now`.
  session_effects on_tick(time_point now);

  /// Completes at once with `rejected` if the session is not ready, the
  /// tool is unknown or filtered out, or `arguments` is not an object (null
  /// counts as {}). `token` is the caller's; it comes back in call_result.
  session_effects call_tool(std::uint64_t token, std::string name, nlohmann::json arguments,
                            time_point now);
  /// The same, asking for progress when `want_progress`: the request
  /// carries `_meta.progressToken` (unique per call in this session), and
  /// each notifications/progress for it that moves forward comes back as a
  /// call_progress effect until the call completes.
  session_effects call_tool(std::uint64_t token, std::string name, nlohmann::json arguments,
                            time_point now, bool want_progress);
  /// Abandons a call: notifications/cancelled is sent and the call
  /// completes as `cancelled`. Unknown tokens are ignored.
  session_effects cancel_call(std::uint64_t token, std::string reason);
  session_effects send_ping(time_point now);

  /// A client request other than tools/call, one of `client_request_methods`,
  /// completing through completed_calls like a call (same timeout, same
  /// cancel_call). Completes at once with `rejected` when the session is not
  /// ready, the method is not one of them (error_method_not_found), the
  /// server did not advertise its capability (error_method_not_found, saying
  /// which), or `params` are not what the method needs (error_invalid_params).
  /// The two listings follow nextCursor within max_request_pages /
  /// max_request_items and answer every item in one result.
  session_effects request(std::uint64_t token, std::string method, nlohmann::json params,
                          time_point now);
  /// URIs subscribed through request() and not unsubscribed since; updates
  /// for any other URI are dropped.
  const std::set<std::string>& resource_subscriptions() const { return subscriptions_; }

  /// Replaces the roots offered to the server; when they differ and the
  /// session is past initialize, notifications/roots/list_changed goes out.
  /// Ignored when roots were not advertised (features.roots unset), since
  /// capabilities cannot change after initialize.
  session_effects set_roots(std::vector<mcp_root> roots);
  const std::optional<std::vector<mcp_root>>& roots() const { return opts_.features.roots; }

  /// The host's answer to a host_request: `result` goes to the server as
  /// the request's result. Unknown or withdrawn tokens are ignored.
  session_effects answer_host_request(std::uint64_t token, nlohmann::json result);
  /// The host could not answer: the server gets `error`.
  session_effects fail_host_request(std::uint64_t token, rpc_error error);
  std::size_t pending_host_requests() const { return host_pending_.size(); }

  /// Re-filters the tool view without reconnecting.
  session_effects set_tool_filter(std::optional<std::vector<std::string>> include,
                                  std::optional<std::vector<std::string>> exclude);

  /// The transport is gone (process exited, HTTP session closed): in-flight
  /// calls complete as `closed`. Reports failure with `reason` unless the
  /// session already failed or closed.
  session_effects on_transport_closed(std::string reason);
  /// We close on purpose: in-flight calls complete as `closed`, no failure.
  session_effects close();

  /// When on_tick must be called next; nullopt when nothing is pending.
  std::optional<time_point> next_deadline() const;

  session_state state() const { return state_; }
  const std::optional<std::string>& failure_reason() const { return failure_; }
  const std::optional<std::string>& negotiated_protocol() const { return protocol_; }
  /// The revision every message must declare on the transport (streamable
  /// HTTP's MCP-Protocol-Version): the modern one while probing and once
  /// chosen, the negotiated one after initialize, none while initialize is
  /// out.
  std::optional<std::string> wire_protocol() const;
  /// Speaking modern_protocol_version (no initialize was sent).
  bool modern() const { return modern_; }
  /// Tools left out for invalid x-mcp-header annotations: name -> why.
  const std::map<std::string, std::string>& rejected_tools() const { return rejected_tools_; }
  const mcp_server_info& server_info() const { return server_info_; }
  const nlohmann::json& server_capabilities() const { return server_caps_; }
  const std::optional<std::string>& instructions() const { return instructions_; }
  /// Every tool the server listed, unfiltered.
  const std::vector<mcp_tool>& tools() const { return tools_; }
  /// The tools after includeTools / excludeTools.
  std::vector<mcp_tool> visible_tools() const;
  const std::vector<mcp_prompt>& prompts() const { return prompts_; }
  std::size_t in_flight_calls() const;
  /// Responses whose id matched nothing we were waiting for (late answers
  /// to timed-out calls among them).
  std::size_t unknown_responses() const { return unknown_responses_; }
  const line_reader& reader() const { return reader_; }

private:
  enum class request_kind { initialize, list_tools, list_prompts, call, ping, discover, listen };

  struct retryable;
  struct pending_request {
    request_kind kind;
    std::uint64_t token = 0;
    std::optional<time_point> deadline;
    std::chrono::milliseconds timeout{0};
    bool wants_progress = false;        // calls: _meta.progressToken is the request id
    std::optional<double> last_progress{}; // the last progress passed on
    /// 2026-07-28 tools/call, prompts/get, resources/read: the request as
    /// sent, to retry it with the inputs an input_required result asks for.
    std::shared_ptr<const retryable> retry = nullptr;
  };
  struct retryable {
    std::string method;
    nlohmann::json params;
    std::vector<std::pair<std::string, std::string>> headers;
    int round = 0; // input rounds answered so far
  };
  // A call whose server asked for input (SEP-2322), while the host answers:
  // by the call's token.
  struct input_round {
    pending_request p;
    std::optional<nlohmann::json> request_state; // echoed exactly, only when sent
    nlohmann::json responses = nlohmann::json::object();
    std::size_t outstanding = 0; // host requests not yet answered
  };
  std::map<std::uint64_t, input_round> input_rounds_;
  // The subscriptions/listen request open (its id), and when to open one
  // again after the server ended or refused it.
  std::optional<std::int64_t> listen_id_;
  std::optional<time_point> listen_due_;
  bool listen_acknowledged_ = false; // the open listen's stream has begun

  void begin_listen(session_effects& fx);
  void end_listen(session_effects& fx, const std::string& why);
  /// roots/list's answer: the session's roots.
  nlohmann::json roots_answer() const;
  /// What the elicitation policy answers by itself; nullopt: the host asks.
  /// `input`: asked for in an input_required round (2026-07-28), whose URL
  /// mode carries no elicitationId.
  std::optional<nlohmann::json> elicitation_without_host(const nlohmann::json& params, bool input = false) const;
  void on_input_required(const pending_request& p, const nlohmann::json& result, session_effects& fx,
                         time_point now);
  void input_answered(std::uint64_t call, const std::string& key, nlohmann::json answer, session_effects& fx);
  void input_failed(std::uint64_t call, const rpc_error& error, session_effects& fx);
  void retry_with_inputs(std::uint64_t call, session_effects& fx);

  // One paginated listing (tools or prompts). A list_changed during a run
  // only sets `rerun`, so a burst of notifications costs one more run.
  struct list_job {
    bool running = false;
    bool rerun = false;
    bool done_once = false;
    /// When the last re-list (not the discovery listing) started, and when
    /// a deferred one is due.
    std::optional<time_point> relisted_at;
    std::optional<time_point> due_at;
    std::optional<std::int64_t> request_id;
    std::size_t pages = 0;
    nlohmann::json items = nlohmann::json::array();
  };

  bool live() const;
  /// `headers`: Mcp-Param-* fields to send with it (options::http_headers).
  std::int64_t send_request(session_effects& fx, std::string_view method, nlohmann::json params,
                            pending_request p, std::vector<std::pair<std::string, std::string>> headers = {});
  void send_json(session_effects& fx, const nlohmann::json& msg);
  void fail(session_effects& fx, std::string reason);
  void complete_all_calls(session_effects& fx, const std::string& why);

  bool refuse_answer(std::string_view line, const std::string& why, session_effects& fx,
                     time_point now);
  void handle_message(const nlohmann::json& msg, session_effects& fx, time_point now);
  void handle_response(const nlohmann::json& msg, session_effects& fx, time_point now);
  void handle_request(const nlohmann::json& msg, session_effects& fx, time_point now);
  void answer_elicitation(const nlohmann::json& id, const nlohmann::json& params,
                          session_effects& fx, time_point now);
  void ask_host(const nlohmann::json& id, const std::string& method, const nlohmann::json& params,
                session_effects& fx, time_point now);
  void respond(session_effects& fx, const nlohmann::json& id, nlohmann::json result);
  void respond_error(session_effects& fx, const nlohmann::json& id, int code,
                     const std::string& message, nlohmann::json data = nullptr);
  void end_host_requests(session_effects& fx, const std::string& why);
  /// The server's id of a pending host request, which is then no longer
  /// pending; none for an unknown token or a session that is not live.
  std::optional<nlohmann::json> take_host_request(std::uint64_t token);
  nlohmann::json client_capabilities() const;
  void handle_notification(const nlohmann::json& msg, session_effects& fx, time_point now);
  void handle_progress(const nlohmann::json& params, session_effects& fx);
  void handle_log(const nlohmann::json& params, session_effects& fx);

  void on_initialize_result(const nlohmann::json& result, session_effects& fx, time_point now);
  void send_initialize(session_effects& fx);
  void on_discover_result(const nlohmann::json& result, session_effects& fx, time_point now);
  void on_discover_error(const nlohmann::json& error, session_effects& fx);
  void begin_discovery(session_effects& fx, time_point now);
  /// `_meta` every request carries at a modern revision.
  void add_request_meta(nlohmann::json& params) const;
  nlohmann::json request_meta_; // its fields, made once
  void begin_list(request_kind kind, session_effects& fx, time_point now);
  void request_page(request_kind kind, const std::optional<std::string>& cursor,
                    session_effects& fx, time_point now);
  void on_list_page(request_kind kind, const nlohmann::json& result, session_effects& fx,
                    time_point now);
  void on_list_error(request_kind kind, const std::string& why, session_effects& fx,
                     time_point now);
  void finish_list(request_kind kind, session_effects& fx, time_point now);
  void maybe_ready(session_effects& fx);
  list_job& job(request_kind kind) { return kind == request_kind::list_tools ? tools_job_ : prompts_job_; }

  options opts_;
  line_reader reader_;
  session_state state_ = session_state::created;
  std::optional<std::string> failure_;
  std::optional<std::string> protocol_;
  std::map<std::string, std::vector<param_header>> param_headers_; // by tool, when any
  std::map<std::string, std::string> rejected_tools_;
  bool probing_ = false; // server/discover is out
  bool discover_retried_ = false;
  bool modern_ = false;
  mcp_server_info server_info_;
  nlohmann::json server_caps_ = nlohmann::json::object();
  std::optional<std::string> instructions_;
  std::vector<mcp_tool> tools_;
  std::vector<mcp_prompt> prompts_;
  list_job tools_job_;
  list_job prompts_job_;
  std::optional<time_point> discovery_deadline_;
  std::int64_t next_id_ = 1;
  std::map<std::int64_t, pending_request> pending_;
  std::size_t unknown_responses_ = 0;

  // Server requests handed to the host, by our token.
  struct host_pending {
    nlohmann::json id; // the server's request id
    std::string method;
    std::optional<time_point> deadline;
    /// An input a call's input_required result asked for: the call's token
    /// and the input's key (no server request to answer).
    std::optional<std::uint64_t> input_of = std::nullopt;
    std::string input_key = {};
  };
  std::map<std::uint64_t, host_pending> host_pending_;
  std::uint64_t next_host_token_ = 1;

  // A listing request() gathers across pages, by the caller's token.
  struct paged_request {
    std::string method;
    std::string key; // the result's array: "resources" or "resourceTemplates"
    nlohmann::json items = nlohmann::json::array();
    std::size_t pages = 0;
  };
  std::map<std::uint64_t, paged_request> paged_;
  std::set<std::string> subscriptions_;
  /// An answer to a listing's page: the next page goes out, or the listing
  /// completes. False when `p` belongs to no listing.
  bool continue_paged(const pending_request& p, const nlohmann::json& result, session_effects& fx);
  void handle_resource_notification(const std::string& method, const nlohmann::json& msg,
                                    session_effects& fx);
};

/// The methods mcp_session::request() sends.
inline constexpr std::array<std::string_view, 9> client_request_methods = {
    "resources/list",   "resources/templates/list", "resources/read",     "resources/subscribe",
    "resources/unsubscribe", "prompts/get",          "completion/complete",
    "prompts/list", "logging/setLevel"};

} // namespace mcprt
