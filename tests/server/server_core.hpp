// Shared pieces of mcprt-test-server: options, logging, thread lifetime and
// the transport-independent MCP request handling.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace mcprt_test_server {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;

inline constexpr const char* k_server_name = "mcprt-test-server";
inline constexpr const char* k_server_version = "0.1.0";
inline constexpr const char* k_latest_protocol = "2025-11-25";

// Negative durations mean "feature off".
struct options {
  int http_port = -1; // -1: stdio transport
  bool sse_responses = false;
  int tools = 0;
  int prompts = 0;
  int page_size = 50;
  std::string name_prefix;
  int startup_delay_ms = 0;
  int crash_after_ms = -1;
  bool exit_on_initialize = false;
  bool hang_on_initialize = false;
  bool garbage = false;
  int list_changed_after_ms = -1;
  int stderr_lines = 0;
  bool ignore_sigterm = false;
  bool spawn_child = false;
  int ping_client_after_ms = -1;
  bool request_sampling = false;
  // Adds the tool ask_client {method, params}: sends that request to the
  // client and returns its whole reply (JSON-RPC result or error) as text.
  bool client_tool = false;
  // --rug-pull TEXT: adds the tool rug_pull; a call of it makes echo's
  // description TEXT on that connection and sends tools/list_changed (a
  // server changing a tool after its approval).
  bool rug_pull = false;
  std::string rug_pull_text;
  // --hostile: adds the tool attack (hostile.cpp).
  bool hostile = false;
  // --conformance: instead of the usual content, exactly the tools,
  // resources, prompts, logging and completion that the official MCP
  // conformance suite's server scenarios call (conformance.cpp).
  bool conformance = false;

  // -- hostile output (--invalid-utf8) --------------------------------------
  // Where to put bytes that are not UTF-8: "stderr", "stdout" (a raw
  // non-JSON line), "result" (echo's text), "description" (every tool's),
  // "server-info" (serverInfo.name).
  std::vector<std::string> invalid_utf8;
  bool invalid_utf8_in(const char* where) const {
    for (auto& w : invalid_utf8)
      if (w == where) return true;
    return false;
  }

  // Containment faults (issue #13): descendants that try to outlive the
  // server, and a server that stops talking without exiting.
  std::string pid_file; // "<kind> <pid>" lines: server, group, setsid, daemon
  bool grandchild_in_group = false;
  bool grandchild_setsid = false;
  bool grandchild_daemon = false;
  int close_stdout_after_ms = -1; // counted from the first tools/list answer

  // Progress and cancel: every notifications/cancelled received
  // appends "cancelled <requestId>" to this file.
  std::string cancel_file;
  std::string method_log; // append the method of every request received

  // OAuth 2.1 (--oauth): /mcp demands a bearer token that this
  // same server issues as its own authorization server, so mcprt's OAuth
  // client can be tested end to end without Node.
  bool oauth = false;
  std::vector<std::string> oauth_scopes; // --oauth-scope, space-separated, repeatable
  int oauth_token_ttl_s = 3600;
  std::string oauth_revoke_file; // its appearance revokes every token
  std::string oauth_log;         // one line per OAuth event, never a token
  // What a hostile or broken authorization server says, for the client's
  // endpoint rules: JSON objects merged into the metadata ("{base}" in a
  // string value becomes this server's http://127.0.0.1:PORT), a file
  // merged at each request while it exists, the `iss` of the redirect, and
  // a /register that never answers.
  std::string oauth_metadata;          // into /.well-known/oauth-authorization-server
  std::string oauth_resource_metadata; // into the protected-resource metadata
  std::string oauth_metadata_file;
  std::optional<std::string> oauth_redirect_iss;
  bool oauth_register_hang = false;
};

enum class parse_outcome { run, exit_ok, exit_usage };

// Prints --help / --version / errors itself.
parse_outcome parse_options(int argc, char** argv, options& out);

// One whole line on stderr; several threads log at once.
void log_line(const std::string& line);

// -- hostile output (--invalid-utf8) ------------------------------------------
// nlohmann::json cannot hold bytes that are not UTF-8, so message text
// carries this marker and serialize_message() swaps in the raw bytes.
inline constexpr const char* k_invalid_utf8_marker = "@@mcprt-invalid-utf8@@";
// A Latin-1 "é", a lone 0xff and a truncated sequence.
inline constexpr const char* k_invalid_utf8_bytes = "caf\xe9 \xff\xfe \xe2\x82";
// One JSON-RPC message as the wire carries it (no newline).
std::string serialize_message(const json& msg);

bool is_supported_protocol(const std::string& version);

// Owns every thread the server starts so shutdown can wake and join them,
// and doubles as the monitor for state that threads wait on.
class lifetime {
public:
  lifetime() = default;
  lifetime(const lifetime&) = delete;
  lifetime& operator=(const lifetime&) = delete;
  ~lifetime();

  // Waits for the time to come or for shutdown, whichever is first (the
  // timed features: start-up delay, crash-after, list_changed-after...);
  // false when shutdown came first.
  bool wait_until_or_stop(steady::time_point t);
  bool wait_for_or_stop(std::chrono::milliseconds d) { return wait_until_or_stop(steady::now() + d); }

  // Waits until pred() holds (evaluated under the monitor lock), the
  // deadline passes or shutdown starts; returns pred()'s final value.
  template <class Pred>
  bool wait_until(steady::time_point deadline, Pred pred) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, deadline, [&] { return stop_ || pred(); });
    return pred();
  }

  // Runs fn under the monitor lock, then wakes every waiter.
  template <class Fn>
  void update(Fn fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn();
    }
    cv_.notify_all();
  }

  void request_stop();
  bool stopping();

  // Workers serve client requests and are drained before shutdown so
  // in-flight calls still get answered; background threads (timers,
  // server-initiated requests) are simply woken and joined.
  // Workers come from a pool that grows whenever every worker is busy, so
  // a call never waits behind a sleeping one, and a stream of short calls
  // does not start a thread each (which cost more than the call itself).
  void spawn_worker(std::function<void()> fn);
  void spawn_background(std::function<void()> fn) { spawn(background_, std::move(fn)); }
  void join_workers();
  void join_background() { join(background_); }

private:
  struct task {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void spawn(std::vector<task>& group, std::function<void()> fn);
  void join(std::vector<task>& group);

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::mutex threads_mu_;
  std::vector<task> background_;
  // The worker pool.
  void work();
  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::deque<std::function<void()>> pool_queue_;
  std::size_t pool_idle_ = 0; // workers waiting for a job
  bool pool_closing_ = false;
  std::vector<std::thread> pool_threads_;
};

// One client connection: the stdio pipe pair, or one HTTP session.
class peer {
public:
  virtual ~peer() = default;
  // Server-initiated traffic: notifications and requests to the client.
  virtual void send(const json& msg) = 0;

  std::atomic<bool> late_tool{false};
  // --rug-pull: rug_pull was called; echo's description is the new text.
  std::atomic<bool> rug_pulled{false};
  // --conformance: test_trigger_tool_change / test_trigger_prompt_change
  // flip these, each adding or removing one entry of its list.
  std::atomic<bool> extra_tool{false};
  std::atomic<bool> extra_prompt{false};
  std::atomic<bool> initialized{false};
  // logging/setLevel's level as an index into k_log_levels; 0 (debug) lets
  // every notifications/message through.
  std::atomic<int> log_level{0};

  // What the client declared in initialize; a server must not ask for
  // sampling or elicitation that the client did not offer.
  void set_client_capabilities(json caps) {
    std::lock_guard<std::mutex> lock(caps_mu_);
    client_capabilities_ = std::move(caps);
  }
  bool client_offers(const char* capability) const {
    std::lock_guard<std::mutex> lock(caps_mu_);
    return client_capabilities_.is_object() && client_capabilities_.contains(capability);
  }

private:
  mutable std::mutex caps_mu_;
  json client_capabilities_ = json::object();
};

// RFC 5424 severities as MCP names them, least severe first.
inline constexpr const char* k_log_levels[] = {"debug",    "info",     "notice", "warning",
                                               "error",    "critical", "alert",  "emergency"};

// Thrown by request handlers; handle_request turns it into a JSON-RPC error.
struct rpc_error {
  int code;
  std::string message;
};

enum class message_kind { request, notification, response, invalid };
message_kind classify(const json& msg);

json make_error(const json& id, int code, const std::string& message);
// The -32600 reply for something classify() called invalid.
json invalid_request(const json& msg);

class handler {
public:
  handler(const options& opts, lifetime& life) : opts_(opts), life_(life) {}

  // nullopt: the request deliberately stays unanswered (--hang-on-initialize).
  std::optional<json> handle_request(const std::shared_ptr<peer>& p, const json& req);
  void handle_notification(const std::shared_ptr<peer>& p, const json& note);
  // A reply from the client to something the server asked.
  void handle_response(const json& resp);

private:
  json initialize(const json& params) const;
  json list_tools(const peer& p, const json& params) const;
  json call_tool(const std::shared_ptr<peer>& p, const json& params);
  json list_prompts(const json& params) const;
  json get_prompt(const json& params) const;
  json tool_at(std::size_t index) const;
  std::size_t tool_count(const peer& p) const;
  // The client's reply (a whole JSON-RPC response), nullopt when none came
  // within k_client_reply_timeout.
  std::optional<json> ask_client(const std::shared_ptr<peer>& p, const std::string& method,
                                 const json& params);

  // --conformance (conformance.cpp): the result of one request, nullopt
  // for a method this mode does not offer.
  std::optional<json> conformance_request(const std::shared_ptr<peer>& p, const std::string& method,
                                          const json& params);
  json conformance_initialize_capabilities() const;
  json conformance_call_tool(const std::shared_ptr<peer>& p, const json& params);
  // A notifications/message to the client unless its level is below the
  // one logging/setLevel chose.
  void send_log(peer& p, const std::string& level, const json& data);

  const options& opts_;
  lifetime& life_;
  std::atomic<std::uint64_t> next_request_id_{1};
  // Guarded by life_'s monitor; empty optional = still waiting for the reply.
  std::map<std::string, std::optional<json>> pending_;
};

/// The attack tool of --hostile (hostile.cpp): `kind` says what to try,
/// and the answer {"ok": bool, "detail": text} says whether it worked.
nlohmann::json hostile_attack(const nlohmann::json& args);

} // namespace mcprt_test_server
