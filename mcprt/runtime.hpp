#pragma once

// The embeddable mcprt runtime: a host hands it its caf::actor_system and
// a workspace; the runtime keeps one set of MCP server connections per
// session in step with the settings files, under the workspace's budget.
// This header is the whole installed API: the actors behind it (watcher,
// gating, pool, budget, event bus, reconcilers, call broker) and their
// messages are internal and not installed.
//
//   mcprt::runtime_options opts;
//   opts.workspace = "/path/to/project";
//   auto rt = mcprt::runtime::start(sys, opts);        // caf::expected
//   auto session = (*rt)->open_session();
//   auto result = (*rt)->call_tool(session, "fs", "read_file", {{"path", "a.txt"}});
//   (*rt)->shutdown();                                   // no child left
//
// The actor system must have mcprt's types: call mcprt::add_mcprt_types(cfg)
// on its config. mcprt::use_mcprt_scheduler(cfg) runs it on mcprt's fair
// scheduler with one worker per core (mcprt/scheduler.hpp says why); a host
// that keeps CAF's own scheduler can skip it. A host on glibc may also call
// mcprt::tune_allocator_for_messages() first thing in main (process-wide;
// the same header says why). The plain member functions block the calling
// thread (never call them from inside an actor); `call_tool_async`,
// `mcp_request_async` and the `..._async` forms return at once and answer
// through a callback, and `set_roots` only sends. Events arrive at
// subscribers asynchronously. Servers' sampling and `ask` elicitation
// requests reach the host through `runtime_options::host`
// (docs/client-features.md).

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <nlohmann/json.hpp>

#include "core/budget_mode.hpp"
#include "core/client_features.hpp"
#include "core/server_config.hpp"
#include "mcprt/authorization.hpp"
#include "mcprt/scheduler.hpp"
#include "messages/events.hpp"
#include "messages/messages.hpp"
#include "messages/state.hpp"
#include "messages/unavailable_error.hpp"

namespace mcprt {

// -- requests for the host -------------------------------------------

/// The runtime's tool call a host request belongs to.
struct host_call_ref {
  std::string session;
  std::string server;
  std::string tool;
  /// The call's id, as call_tool_async returned it: what
  /// runtime::cancel_call takes and progress names.
  std::string call_id;
};

/// A request a server sent that only the host can answer: sampling
/// (`sampling/createMessage`) or an elicitation (`elicitation/create`, form
/// mode, under the `ask` policy).
struct server_request {
  /// Opaque, unique in the runtime; withdrawals name it.
  std::string id;
  /// The server's name, as configured.
  std::string server;
  std::string method;
  /// The server's params, as it sent them (a JSON object). UNTRUSTED: a
  /// server wrote them; show them escaped, bound what you walk.
  nlohmann::json params;
  /// The tool call the request belongs to, when known. A connection knows
  /// the tool of each call in flight on it; when exactly one is in flight
  /// there, that call's tool is taken, and when exactly one call of the
  /// runtime to that server and tool is in flight, it is named here. Any
  /// other case (no call, several, a request a server sends on its own)
  /// gives none. Servers that run a request inside a call (the usual way)
  /// and get one call at a time are always attributed.
  std::optional<host_call_ref> call;
  /// The ids of every call of the runtime in flight to that server when
  /// the request came: whom it may concern, when `call` cannot say.
  std::vector<std::string> in_flight_calls;
  /// 2026-07-28: the request is an input the server asked for in an
  /// input_required result of `call` (a tool call, prompts/get or
  /// resources/read; always named). The server's key for it (not empty),
  /// and how many inputs of that round come to the host (this one among
  /// them), so that a host can ask for them together. A 2025 server's
  /// request has neither (empty, 0).
  std::string input_key;
  std::size_t input_round = 0;
};

/// Answers one server_request, exactly once: the first `answer` or `fail`
/// wins, later ones do nothing. Copies share the request; when the last
/// copy goes unanswered the server gets an error (-32603, "the host dropped
/// the request"). Thread-safe: answer from any thread, at any time, while
/// the actor system lives. An answer to a withdrawn request is ignored.
class host_responder {
public:
  struct state;
  explicit host_responder(std::shared_ptr<state> s) : state_(std::move(s)) {}
  /// The request's result: for sampling a CreateMessageResult (`role`,
  /// `content`, `model`, ...), for an elicitation `{action, content?}`. Must
  /// be a JSON object, else the server gets -32603.
  void answer(nlohmann::json result) const;
  /// The server gets a JSON-RPC error (e.g. -1 "User rejected sampling request").
  void fail(int code, std::string message) const;
  /// Whether this request was answered already (by any copy).
  bool answered() const;

private:
  std::shared_ptr<state> state_;
};

/// A host's handlers. They run on the runtime's one host thread
/// ("mcprt-host"), never on an actor thread, one at a time in the order the
/// requests arrived: return promptly (keep the responder and answer later,
/// from any thread) so the next request is not held up. A handler may call
/// the runtime's blocking functions. An exception thrown by a handler drops
/// its responder (the server gets an error).
struct host_handlers {
  /// Set: every connection advertises `sampling` and hands requests here.
  std::function<void(server_request, host_responder)> sampling;
  /// Set: the `ask` elicitation policy hands form-mode and URL-mode
  /// requests here (`params.mode == "url"`: show `params.url`, an http(s)
  /// URL the server chose, and answer accept when the user agreed to open it).
  /// Unset: `ask` behaves as `decline`.
  std::function<void(server_request, host_responder)> elicitation;
  /// Set: a 2026-07-28 server's `roots/list` input (one request's, not the
  /// connection's) comes here first; answer `{"roots": [...]}`, or fail to
  /// have it answered with the runtime's roots, as it is when unset.
  std::function<void(server_request, host_responder)> roots;
  /// The request with this id no longer wants an answer: the server
  /// cancelled it, the session answered it for the host after its timeout
  /// (10 minutes), or the connection ended. Drop its prompt.
  std::function<void(const std::string& id)> withdrawn;
  /// The actor form, for a host that is itself actors: set, requests go to
  /// this actor instead of the callbacks above (which are then ignored), as
  /// `(host_request, server_request_message) -> host_reply`, and
  /// withdrawals as `(host_withdrawn, id)`. It may reply later through a
  /// response promise; the runtime does not wait on a thread for it.
  host_actor actor;
  /// What the actor answers (advertised to servers as for the callbacks).
  bool actor_samples = true;
  bool actor_elicits = true;
  /// Whether the actor is offered a 2026-07-28 request's roots/list input
  /// (as `roots` is; it may fail it to leave the runtime's roots).
  bool actor_lists_roots = false;

  bool answers_sampling() const { return actor ? actor_samples : static_cast<bool>(sampling); }
  bool answers_elicitation() const { return actor ? actor_elicits : static_cast<bool>(elicitation); }
  bool answers_roots() const { return actor ? actor_lists_roots : static_cast<bool>(roots); }
};

struct runtime_options {
  /// The project folder: `.mcp.json` and `<profile dir>/settings.json` live
  /// here; it is also the approvals' project root.
  std::filesystem::path workspace;
  /// User settings live in `<home>/<profile dir>/`. Empty: $HOME.
  std::filesystem::path home;
  /// Settings layout: mcprt (`.mcprt/`), qwen (`.qwen/`), gemini (`.gemini/`).
  std::string profile = "mcprt";
  /// Top tier servers for every session (`--mcp-config FILE`), read once.
  std::optional<std::filesystem::path> mcp_config;
  /// The launch bound (`--allowed-mcp-server-names`): settings can narrow it,
  /// never widen it.
  std::optional<std::vector<std::string>> allowed_server_names;
  /// In an untrusted folder no server starts.
  bool trusted = true;
  /// Workspace budget (pool mode) or per-session budget (no pool).
  std::optional<std::size_t> budget;
  budget_mode mode = budget_mode::off;
  /// false: the kill switch (MCPRT_NO_POOL=1); sessions own their servers.
  bool pool = true;
  /// Trailing debounce of settings edits.
  std::chrono::milliseconds debounce{300};
  /// How long an unreferenced pool entry lingers before it is closed.
  std::chrono::milliseconds drain_delay{30000};
  /// Watch the settings files with inotify; false: only `reload()` reads them.
  bool watch = true;
  /// Where approvals are stored. Empty: `<home>/<profile dir>/mcp-approvals.json`.
  std::filesystem::path approvals_file;
  /// Where the values of `${input:ID}` are stored (`mcprt input set`).
  /// Empty: `<home>/<profile dir>/mcp-inputs.json`.
  std::filesystem::path inputs_file;
  /// Where OAuth credentials of remote servers are stored (mode 0600).
  /// Empty: `<home>/<profile dir>/mcp-oauth.json`.
  std::filesystem::path oauth_file;
  /// The per-installation key of the fingerprints shown outside the runtime
  /// (snapshot, events, restart results; `mcprt explain` reads the same
  /// default file). Created on first use (32 random bytes, mode 0600).
  /// Empty: `<home>/<profile dir>/fingerprint.key`. A key file that is a
  /// symlink, not a regular file, or accessible to others makes start fail;
  /// one that cannot be created (a read-only home) gives a key for this run
  /// only, with a warning in the log.
  std::filesystem::path fingerprint_key_file;
  /// How many of the latest events `replay` can still return.
  std::size_t event_history = 1024;
  /// Calls in flight per server (tool calls and the other client
  /// requests), every session and remote host together; one more fails at
  /// once with errc::too_many_calls naming the server. 0: no bound.
  std::size_t max_calls_per_server = 16;
  /// After the I/O thread handled something, how long it keeps looking for
  /// the next event before it sleeps: a call to a stdio server answers
  /// sooner (a wake-up from sleep costs more than the look), for CPU spent
  /// right after work only. Zero: it sleeps at once.
  std::chrono::microseconds io_poll_before_sleep{50};
  /// How servers' elicitation requests are answered unless their settings
  /// entry says otherwise (`"elicitation"`). `ask` needs a host handler;
  /// without one it behaves as `decline`.
  elicitation_policy elicitation = elicitation_policy::decline;
  /// Offer the workspace folder to servers as their one root (`roots/list`).
  bool workspace_root = true;
  /// Requests only the host can answer (sampling, `ask` elicitations).
  /// Fixed at start: capabilities are advertised when a server connects.
  host_handlers host;
  /// The host's roots: set, they replace the workspace root (even when
  /// `workspace_root` is false); `runtime::set_roots` changes them later.
  std::optional<std::vector<mcp_root>> roots;
  /// `HOST:PORT` of a fleet budget server (`mcprt budget-server`):
  /// every server the pool spawns also takes a slot of the fleet's budget
  /// (docs/distribution.md). Needs the pool, and an actor system that
  /// loaded CAF's middleman and OpenSSL manager with an identity the budget
  /// server trusts: `mcprt::use_owner_tls(cfg)` (mcprt/owner_tls.hpp) for
  /// the owner's own, or `openssl_certificate`, `openssl_key` and
  /// `openssl_cafile` of a fleet CA.
  std::optional<std::string> fleet_budget;
  /// Over TLS with mutual authentication, as every budget server mcprt
  /// starts requires. False only for a budget server an embedder published
  /// over plain CAF itself.
  bool fleet_tls = true;
};

// -- progress and cancel of tool calls ----------------------------------

/// One step of a tool call's progress, as its server reported it
/// (`notifications/progress`): the same record the bus carries as a
/// `call_progress` event (messages/events.hpp). `call_id` is the one in
/// call_options::call_id, or the runtime's; `progress` increases from step to
/// step (the session drops repeats and steps back); `message` is the
/// server's text, cut to at most 1024 bytes. UNTRUSTED: show it escaped.
using tool_call_progress = events::call_progress;

/// Receives the progress of one call, on the same actor thread as the
/// call's answer and never after it (nor after the answer has begun to be
/// delivered). Hand the step over and return; never block, never call the
/// runtime's blocking member functions from it (`cancel_call` is fine).
using progress_callback = std::function<void(const tool_call_progress&)>;

/// A call id a caller may choose: 1 to 128 bytes of ASCII letters, digits
/// and `-` `_` `.` `:` (it is shown in events and URLs as it is).
bool is_valid_call_id(const std::string& id);

/// How a tool call waits.
struct call_options {
  /// For the answer, from the call on (connecting retries included).
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  /// A server that is admitted but still connecting (just approved,
  /// starting, restarting) is asked again every 50 ms for this long, on an
  /// actor timer: no thread waits for it. 0: its errc::not_connected at once.
  std::chrono::milliseconds wait_connecting{0};
  // -- progress and cancel; tool calls only, not mcp_request --
  /// The call's id for `runtime::cancel_call` and in progress: empty, the
  /// runtime makes one ("call-N"). A chosen one must pass is_valid_call_id
  /// and be unused by the calls in flight, else the call fails at once with
  /// errc::bad_request. mcp_request takes one too, but only to name the
  /// request in server_request::call (a 2026-07-28 server's inputs during
  /// it); it makes none, and cancel_call does not reach it.
  std::string call_id;
  /// Set: the server is asked for progress and each step comes here.
  progress_callback progress;
  /// True: the server is asked for progress and each step is published on
  /// the bus as event_kind::call_progress (the daemon's SSE stream).
  bool progress_events = false;
  /// Set: called with the id the call's connection knows it by (what
  /// events::server_log's call_ids hold: the call id itself, one id end to
  /// end), on the calling thread, before the call is sent anywhere, so that
  /// nothing about it can come first.
  std::function<void(const std::string& wire_id)> on_wire;
};

/// Receives what `call_tool_async` answers, exactly once: on the thread
/// that runs the call broker (a scheduler worker, or the I/O thread that
/// read the server's answer; a call still in flight at `shutdown()`
/// included), or on the calling thread when the call fails before it starts.
/// Hand the result over and return: never block, never call the runtime's
/// blocking member functions from it.
using call_callback = std::function<void(caf::expected<nlohmann::json>)>;

/// Applies MCPRT_NO_POOL, MCPRT_BUDGET and MCPRT_BUDGET_MODE to `opts`
/// (values already set in `opts` win for budget and mode). Returns one
/// message per bad value; `opts` keeps its previous value for those.
std::vector<std::string> apply_environment(runtime_options& opts);

/// How runtime::connect reaches a workspace node.
struct connect_options {
  /// For the connection and the node's first answer.
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
  /// Over TLS with mutual authentication, as every `mcprt serve --caf-port`
  /// listens: the actor system loaded caf::openssl::manager with this
  /// host's certificate, key and CA; `mcprt::use_owner_tls(cfg)`
  /// (mcprt/owner_tls.hpp) does that with the owner's own identity. false
  /// only for a node published without TLS, which mcprt never does.
  bool tls = true;
};

class runtime {
public:
  /// Spawns the workspace actors, reads every settings file and starts
  /// watching. Fails on bad options (no workspace, unknown profile, enforce
  /// without a budget) or when the I/O threads cannot start.
  static caf::expected<std::unique_ptr<runtime>> start(caf::actor_system& sys, runtime_options opts);

  /// The same interface against the workspace of a remote node, `mcprt
  /// serve --caf-port PORT` on `host` (docs/distribution.md). The
  /// actor system must have loaded caf::io::middleman (and mcprt's types).
  /// Sessions, tool calls, events and the rest go to the node; the
  /// differences from an embedded runtime:
  ///  - When the node goes away, every call in flight fails at once with
  ///    errc::disconnected, and so does every later one; each subscriber
  ///    gets a last event of kind `disconnected`. Call `connect` again for
  ///    a new runtime. The node closes the sessions of a host that went
  ///    away.
  ///  - `open_session` answers an empty id when the node cannot open one.
  ///    The servers a host brings are gated as a project's: each runs once
  ///    the node's owner approves it (`mcprt approve NAME` there, bound to
  ///    its config), and a settings server of the same name wins. At most
  ///    256 sessions per host, 256 servers per session.
  ///  - The node hands a host only its facade: `set_roots` does nothing
  ///    (the node's servers see the node owner's roots), and a call's
  ///    progress reaches its callback, not the node's event stream.
  ///  - Requests for the host (sampling, `ask` elicitations) stay with the
  ///    node's own handlers; `authorize` opens no browser (the URL is
  ///    answered; a `browser_command` is refused).
  ///  - `shutdown` closes this host's sessions and leaves the node running.
  /// Fails when nothing answers at host:port, or what answers is not an
  /// mcprt workspace node.
  static caf::expected<std::unique_ptr<runtime>> connect(caf::actor_system& sys, const std::string& host,
                                                         uint16_t port, connect_options opts = {});

  /// Whether this runtime is a remote node's (runtime::connect).
  bool remote() const;
  /// False once the remote node has gone away (always true when embedded).
  bool connected() const;

  /// Shuts down if `shutdown()` was not called.
  ~runtime();

  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// Opens a session with its own top-tier servers (they win over settings
  /// servers of the same name and need no approval); its first reconcile
  /// starts at once. Returns the session id.
  std::string open_session(std::vector<server_config> servers = {});

  /// Lets go of every connection of the session (pool entries drain).
  void close_session(const std::string& session);

  /// Calls a tool of a server the session runs. Fails with errc::unavailable
  /// naming the reason and the remedy ("pending approval — run `mcprt
  /// approve NAME`"; `unavailability_of(error)` gives them as values) when
  /// gating keeps the server out, errc::unknown_tool,
  /// errc::unknown_server, errc::unknown_session for a session that is not
  /// open, or the server's own error.
  caf::expected<nlohmann::json> call_tool(const std::string& session, const std::string& server,
                                          const std::string& tool, nlohmann::json arguments = nlohmann::json::object(),
                                          std::chrono::milliseconds timeout = std::chrono::seconds(60));

  /// The same call without blocking: returns at once; `done` gets the
  /// result, or errc::too_many_calls when `server` already has
  /// `max_calls_per_server` calls in flight (counted for blocking calls too).
  /// Returns the call's id (opts.call_id, or the runtime's own), for
  /// `cancel_call`; the progress asked for in `opts` reaches opts.progress
  /// and/or the bus.
  std::string call_tool_async(const std::string& session, const std::string& server, const std::string& tool,
                              nlohmann::json arguments, call_callback done, call_options opts = {});

  /// Cancels the tool call of `call_id` (from call_tool_async): it fails at
  /// once with errc::cancelled. A call parked while its server connects or
  /// awaits approval never reaches the server; one out on a connection is
  /// cancelled there (`notifications/cancelled`), and its late answer is
  /// dropped. Returns false when no call of that id is in flight. Only
  /// sends: it never blocks.
  bool cancel_call(const std::string& call_id);

  /// The id the connection knows a tool call in flight by (what a
  /// `server_log` event's `call_ids` name): `call_id` itself while the call
  /// is in flight, empty otherwise.
  std::string wire_id(const std::string& call_id) const;

  /// The session's tools of one server (after includeTools / excludeTools).
  caf::expected<std::vector<tool_info>> tools(const std::string& session, const std::string& server);

  /// What the session's connection to `server` knows: its tools after the
  /// filter (each with the server's whole tool object in `raw`), its
  /// capabilities, name and version. errc::unavailable when it is not live.
  caf::expected<connection_info> server_info(const std::string& session, const std::string& server);

  /// The session's reconciler state: its servers and their status, the
  /// budget refusals and failures of its last pass.
  caf::expected<session_snapshot> session_state(const std::string& session);

  /// Every configured server: admitted or why not, and its gateway prefix.
  caf::expected<gating_snapshot> gating_state();

  // -- resources, prompts and completion ---------------------------
  //
  // Each answers the server's JSON result, bounded as tool results are (line
  // limit and nesting depth). They travel like call_tool: gated (errc::
  // unavailable for a server that is out), parked while the server
  // connects, counted against max_calls_per_server, and timed out and
  // cancelled by the same rules. They also fail with errc::not_advertised
  // when the server did not advertise the capability (resources, prompts,
  // completions, resources.subscribe), errc::bad_request for parameters the
  // method cannot take, and errc::tool_error for the server's own error.

  /// Any of resources/list, resources/templates/list, resources/read,
  /// resources/subscribe, resources/unsubscribe, prompts/get,
  /// completion/complete, with the MCP params as given.
  void mcp_request_async(const std::string& session, const std::string& server, const std::string& method,
                         nlohmann::json params, call_callback done, call_options opts = {});
  caf::expected<nlohmann::json> mcp_request(const std::string& session, const std::string& server,
                                            const std::string& method, nlohmann::json params,
                                            std::chrono::milliseconds timeout = std::chrono::seconds(60));
  /// {"resources": [...]}: every page, gathered (at most 100 pages or 10,000
  /// items; past that the result also carries "nextCursor", and
  /// mcp_request("resources/list", {"cursor": ...}) goes on from there).
  caf::expected<nlohmann::json> resources(const std::string& session, const std::string& server);
  /// {"resourceTemplates": [...]}, gathered like resources().
  caf::expected<nlohmann::json> resource_templates(const std::string& session, const std::string& server);
  /// {"contents": [...]}
  caf::expected<nlohmann::json> read_resource(const std::string& session, const std::string& server,
                                              const std::string& uri);
  /// {"description"?, "messages": [...]}; `arguments` an object of strings.
  caf::expected<nlohmann::json> get_prompt(const std::string& session, const std::string& server,
                                           const std::string& name,
                                           nlohmann::json arguments = nlohmann::json::object());
  /// {"completion": {"values", ...}}. `ref` is {"type": "ref/prompt", "name"}
  /// or {"type": "ref/resource", "uri"}; `argument` {"name", "value"};
  /// `context` null or {"arguments": {...}}.
  caf::expected<nlohmann::json> complete(const std::string& session, const std::string& server,
                                         nlohmann::json ref, nlohmann::json argument,
                                         nlohmann::json context = nullptr);
  /// Updates then arrive as event_kind::resource_updated {server, uri}.
  /// The connection is shared in pool mode: a subscription is the
  /// connection's, so one session's unsubscribe ends it for all, and a
  /// restarted connection starts with none.
  caf::expected<nlohmann::json> subscribe_resource(const std::string& session, const std::string& server,
                                                   const std::string& uri);
  caf::expected<nlohmann::json> unsubscribe_resource(const std::string& session, const std::string& server,
                                                     const std::string& uri);

  /// Subscribes `sink` to events of `kinds` (empty: all); answers the
  /// sequence number of the last event published before (replay from there
  /// with `replay` to close the gap).
  caf::expected<uint64_t> subscribe(event_subscriber_actor sink, std::vector<event_kind> kinds = {});
  void unsubscribe(event_subscriber_actor sink);
  /// Events with a sequence number above `after` still in the replay ring.
  std::vector<event> replay(uint64_t after);

  /// The workspace snapshot (`GET /workspace/mcp`): servers, reconcile state,
  /// pool, budgets, capabilities. Secrets never appear in it.
  nlohmann::json snapshot();

  /// Reads every settings file now and reconciles every session.
  caf::expected<bool> reload();

  /// Stores the decision for the server's current config and reconciles.
  caf::expected<bool> approve(const std::string& server);
  caf::expected<bool> reject(const std::string& server);

  /// Why `server` is out (empty reason: admitted or never configured).
  caf::expected<unavailability> unavailable_reason(const std::string& server);

  /// Restarts every pool entry of a server (pool mode only).
  caf::expected<std::vector<restart_result>> restart(const std::string& server);

  // -- without blocking -----------------------------------------------
  //
  // The same operations in a form that returns at once: the answer goes to
  // `done` exactly once, on one of the runtime's actor threads (or on the
  // calling thread when the runtime has stopped or its remote node went
  // away). Hand it over and return: never block in `done`, never call the
  // blocking member functions from it.

  template <class T>
  using result_callback = std::function<void(caf::expected<T>)>;

  void snapshot_async(std::function<void(nlohmann::json)> done);
  void reload_async(result_callback<bool> done);
  void approve_async(const std::string& server, result_callback<bool> done);
  void reject_async(const std::string& server, result_callback<bool> done);
  void restart_async(const std::string& server, result_callback<std::vector<restart_result>> done);
  /// As `replay`: the events above `after` still in the replay ring.
  void replay_async(uint64_t after, std::function<void(std::vector<event>)> done);
  /// As `open_session`: the new session's id (empty when none opened).
  /// Embedded, the session opens at once and `done` runs on the calling
  /// thread.
  void open_session_async(std::vector<server_config> servers, std::function<void(std::string)> done);
  /// As `close_session`: `done` runs once the session's connections are let go.
  void close_session_async(const std::string& session, std::function<void()> done);
  void unavailable_reason_async(const std::string& server, result_callback<unavailability> done);
  void gating_state_async(result_callback<gating_snapshot> done);
  void session_state_async(const std::string& session, result_callback<session_snapshot> done);
  void server_info_async(const std::string& session, const std::string& server,
                         result_callback<connection_info> done);
  /// As `authorize`: the authorization URL once known (no thread waits for
  /// it; the flow runs on a thread of its own).
  void authorize_async(const std::string& server, authorize_options options, result_callback<std::string> done);
  void forget_authorization_async(const std::string& server, result_callback<bool> done);

  /// Starts the OAuth authorization of a streamable-HTTP server (`mcprt
  /// auth`) and returns its authorization URL once known; empty when no
  /// person is needed (client credentials) and it is done. The flow goes on
  /// in the background: the redirect comes to a loopback listener of this
  /// process, the tokens are stored in `oauth_file`, and every session
  /// reconciles, connecting the server. A failure is published as
  /// `auth_required`. Fails with errc::unknown_server, errc::unavailable
  /// (not admitted) or errc::needs_auth (no URL: why).
  caf::expected<std::string> authorize(const std::string& server, authorize_options options = {});

  /// Forgets the stored OAuth credentials of a server's URL (`mcprt auth
  /// --logout`); false when there were none. A live connection keeps its
  /// token until it reconnects.
  caf::expected<bool> forget_authorization(const std::string& server);

  /// The host:port pairs this process listens on (the daemon's HTTP API,
  /// once bound): no OAuth request of this runtime goes there, whatever an
  /// authorization server's metadata names (a route of the daemon would
  /// run with its authority). Replaces the previous list; a remote node's
  /// clients run on the node, so there it does nothing.
  void set_own_listeners(std::vector<listen_endpoint> listeners);

  /// Stops watching, closes every session and drains the pool: no child
  /// process is left when it returns. Idempotent.
  drain_result shutdown(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  /// Replaces the roots offered to servers: connections that offered roots
  /// send `notifications/roots/list_changed` (when the list differs), and
  /// connections started later offer these. A connection that offered no
  /// roots (none were set when it started) keeps offering none.
  void set_roots(std::vector<mcp_root> roots);

  std::vector<std::string> capabilities() const;
  const runtime_options& options() const;

  /// How a connection id is shown outside the runtime: `name::` and 16 hex
  /// of HMAC-SHA256(installation key, internal id). The internal id hashes
  /// env and headers values with plain SHA-256, so it never leaves.
  std::string shown_connection_id(const std::string& internal_id) const;

  /// What the runtime is made of; internal (not installed).
  struct impl;

private:
  friend struct runtime_access;
  explicit runtime(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace mcprt
