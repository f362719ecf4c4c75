// The runtime facade: what a runtime on its own workspace and one on a
// remote node's share (the session books, calls through the broker, the
// asker the non-blocking operations ask from). What differs is the side
// (runtime_impl.hpp) that runtime_local.cpp or runtime_remote.cpp chose.

#include "mcprt/runtime.hpp"

#include <cstdlib>
#include <future>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/io_thread_jobs.hpp"
#include "core/mcp_session.hpp"
#include "core/runtime_mode.hpp"
#include "core/untrusted_text.hpp"
#include "io/openssl_error_queue.hpp"
#include "mcprt/runtime_access.hpp"
#include "mcprt/runtime_impl.hpp"

namespace mcprt {

using nlohmann::json;

namespace {

/// Where the blocking forms wait. Called from an I/O callback (a host's
/// callback runs on one), the work the call started must not wait for the
/// end of that thread's turn.
template <class T>
T await_answer(std::future<T>& answer) {
  before_blocking_wait();
  return answer.get();
}

} // namespace

/// Restart results as shown outside the runtime.
void show_restarts(std::vector<restart_result>& rs, const std::function<std::string(const std::string&)>& show_id) {
  for (auto& x : rs) {
    x.id = show_id(x.id);
    x.reason = replace_invalid_utf8(x.reason);
  }
}

caf::behavior runtime_asker(caf::event_based_actor* self, std::shared_ptr<asker_inbox> inbox) {
  close_on_exit(self, inbox);
  return {[self, inbox](atom::run) {
    for (auto& job : inbox->take()) {
      try {
        job(self);
      } catch (const std::exception& e) {
        spdlog::error("runtime: an asker's job failed: {}", escape_for_display(e.what()));
      } catch (...) {
        spdlog::error("runtime: an asker's job failed");
      }
    }
  }};
}

/// What a use of CAF's middleman (`what`) needs of the host's actor system.
caf::error check_middleman(caf::actor_system& sys, bool tls, const std::string& what) {
  if (tls && !sys.has_openssl_manager())
    return make_error(errc::io_error, "runtime: " + what + " over TLS needs CAF's OpenSSL manager: "
                                        "mcprt::use_owner_tls(cfg) (mcprt/owner_tls.hpp), or "
                                        "cfg.load<caf::openssl::manager>() with a certificate, key and CA");
  if (tls && !io::clear_openssl_errors_before_io())
    spdlog::warn("runtime: SSL_read is not mcprt's in this program (are library symbols hidden?): a stranger's "
                 "failed TLS handshake can cut the connection of {}",
                 what);
  if (!sys.has_middleman())
    return make_error(errc::io_error, "runtime: " + what + " needs CAF's middleman: "
                                        "cfg.load<caf::io::middleman>() before the actor system starts");
  return caf::none;
}

std::vector<std::string> apply_environment(runtime_options& opts) {
  std::optional<std::string> budget_flag;
  if (opts.budget) budget_flag = std::to_string(*opts.budget);
  std::optional<std::string> mode_flag;
  if (opts.mode != budget_mode::off) mode_flag = to_string(opts.mode);
  auto r = resolve_runtime_mode(std::getenv("MCPRT_NO_POOL"), std::getenv("MCPRT_BUDGET"),
                                std::getenv("MCPRT_BUDGET_MODE"), budget_flag, mode_flag, !opts.pool);
  if (r.errors.empty()) {
    opts.pool = r.mode.pool;
    opts.budget = r.mode.budget;
    opts.mode = r.mode.mode;
  }
  return r.errors;
}

runtime::runtime(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

bool runtime::remote() const {
  return impl_->ws->remote();
}

bool runtime::connected() const {
  return !impl_->ws->lost();
}

runtime::~runtime() {
  shutdown();
}

std::string runtime::open_session(std::vector<server_config> servers) {
  std::promise<std::string> answer;
  auto result = answer.get_future();
  open_session_async(std::move(servers), [&answer](std::string id) { answer.set_value(std::move(id)); });
  return await_answer(result);
}

void runtime::open_session_async(std::vector<server_config> servers, std::function<void(std::string)> done) {
  impl_->ws->open_session(*impl_, std::move(servers), std::move(done));
}

void runtime::close_session(const std::string& session) {
  std::promise<void> closed;
  auto result = closed.get_future();
  close_session_async(session, [&closed] { closed.set_value(); });
  await_answer(result);
}

void runtime::close_session_async(const std::string& session, std::function<void()> done) {
  impl_->close_session(session, std::move(done));
}

void runtime::impl::close_session(const std::string& id, std::function<void()> done) {
  auto s = find_session(id);
  if (!s) {
    done();
    return;
  }
  // Out of the books first: a second close finds nothing to do.
  {
    std::lock_guard<std::mutex> guard{mtx};
    sessions.erase(id);
    order.erase(std::remove(order.begin(), order.end(), id), order.end());
  }
  ws->close_session(*this, id, *s, std::move(done));
}

void runtime::impl::close_all_sessions() {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> guard{mtx};
    ids = order;
  }
  for (auto& id : ids) {
    std::promise<void> closed;
    auto result = closed.get_future();
    close_session(id, [&closed] { closed.set_value(); });
    await_answer(result);
  }
}

void runtime::unavailable_reason_async(const std::string& server, result_callback<unavailability> done) {
  impl_->ask_async<unavailability>(impl_->gating, std::chrono::seconds(10), std::move(done), atom::reason_v, server);
}

caf::expected<json> runtime::call_tool(const std::string& session, const std::string& server,
                                       const std::string& tool, json arguments, std::chrono::milliseconds timeout) {
  auto answer = std::make_shared<std::promise<caf::expected<json>>>();
  auto result = answer->get_future();
  call_options opts;
  opts.timeout = timeout;
  call_tool_async(
    session, server, tool, std::move(arguments),
    [answer](caf::expected<json> r) { answer->set_value(std::move(r)); }, opts);
  return await_answer(result);
}

std::string runtime::call_tool_async(const std::string& session, const std::string& server, const std::string& tool,
                                     json arguments, call_callback done, call_options opts) {
  return impl_->start_call(session, server, tool, {}, std::move(arguments), std::move(done), std::move(opts));
}

// -- progress and cancel of tool calls ----------------------------------

std::string runtime::wire_id(const std::string& call_id) const {
  return impl_->host_calls->contains(call_id) ? call_id : std::string{};
}

bool runtime::cancel_call(const std::string& call_id) {
  if (!impl_->host_calls->contains(call_id)) return false;
  caf::anon_send(impl_->broker, atom::cancel_v, std::string{}, call_id);
  return true;
}

std::string runtime::impl::start_call(const std::string& session, const std::string& server, const std::string& tool,
                                      const std::string& method, json arguments, call_callback done,
                                      call_options opts) {
  auto& p = *this;
  std::string call_id = opts.call_id;
  if (!call_id.empty() && !is_valid_call_id(call_id)) {
    done(make_error(errc::bad_request, "a call id is 1 to 128 ASCII letters, digits, '-', '_', '.' or ':'"));
    return call_id;
  }
  auto s = p.find_session(session);
  if (!s) {
    done(make_error(errc::unknown_session, "no session " + session));
    return call_id;
  }
  if (auto err = p.ws->lost()) {
    done(std::move(*err));
    return call_id;
  }
  bool tool_call = method.empty();
  if (tool_call) {
    // The id is known before anything goes out: the caller's, or the next
    // "call-N". The broker refuses it too if taken; here the caller hears
    // at once, and `cancel_call` can answer without asking the broker.
    std::lock_guard<std::mutex> guard{p.host_calls->mtx};
    if (call_id.empty()) {
      do
        call_id = "call-" + std::to_string(p.host_calls->next++);
      while (p.host_calls->live.count(call_id));
    } else if (p.host_calls->live.count(call_id)) {
      done(make_error(errc::bad_request, "a call with id " + call_id + " is already in flight"));
      return call_id;
    }
    p.host_calls->live.insert(call_id);
  }
  auto answer = [done = std::move(done), ids = std::weak_ptr<host_call_ids>(p.host_calls), call_id,
                 tool_call](caf::expected<json> r) {
    if (tool_call)
      if (auto i = ids.lock()) i->erase(call_id);
    done(std::move(r));
  };
  call_delivery::progress_fn progress;
  if (tool_call) progress = std::move(opts.progress);
  auto delivery = std::make_shared<call_delivery>(std::move(answer), std::move(progress), server);
  call_request r;
  r.session = session;
  r.target = s->reconciler;
  r.server = server;
  r.tool = tool;
  r.method = method;
  r.arguments = json_value{std::move(arguments)};
  // Another request keeps the caller's id, when it chose one, for cancel
  // and for the inputs a 2026-07-28 server asks for during it.
  r.call_id = call_id;
  r.timeout = opts.timeout;
  r.wait_connecting = opts.wait_connecting;
  r.progress_events = tool_call && opts.progress_events;
  if (tool_call && opts.on_wire) opts.on_wire(call_id);
  post_job(*p.host_call_inbox, p.broker, host_call{std::move(r), std::move(delivery)});
  return call_id;
}

caf::expected<std::vector<tool_info>> runtime::tools(const std::string& session, const std::string& server) {
  auto s = impl_->find_session(session);
  if (!s) return make_error(errc::unknown_session, "no session " + session);
  return impl_->ask<std::vector<tool_info>>(s->reconciler, std::chrono::seconds(30), atom::tools_v, server);
}

caf::expected<connection_info> runtime::server_info(const std::string& session, const std::string& server) {
  auto s = impl_->find_session(session);
  if (!s) return make_error(errc::unknown_session, "no session " + session);
  return impl_->ask<connection_info>(s->reconciler, std::chrono::seconds(30), atom::info_v, server);
}

void runtime::gating_state_async(result_callback<gating_snapshot> done) {
  impl_->ask_async<gating_snapshot>(impl_->gating, std::chrono::seconds(10), std::move(done), atom::snapshot_v);
}

void runtime::session_state_async(const std::string& session, result_callback<session_snapshot> done) {
  auto s = impl_->find_session(session);
  if (!s) {
    done(make_error(errc::unknown_session, "no session " + session));
    return;
  }
  impl_->ask_async<session_snapshot>(s->reconciler, std::chrono::seconds(30), std::move(done), atom::snapshot_v);
}

void runtime::server_info_async(const std::string& session, const std::string& server,
                                result_callback<connection_info> done) {
  auto s = impl_->find_session(session);
  if (!s) {
    done(make_error(errc::unknown_session, "no session " + session));
    return;
  }
  impl_->ask_async<connection_info>(s->reconciler, std::chrono::seconds(30), std::move(done), atom::info_v, server);
}

caf::expected<gating_snapshot> runtime::gating_state() {
  return impl_->ask<gating_snapshot>(impl_->gating, std::chrono::seconds(10), atom::snapshot_v);
}

caf::expected<session_snapshot> runtime::session_state(const std::string& session) {
  auto s = impl_->find_session(session);
  if (!s) return make_error(errc::unknown_session, "no session " + session);
  return impl_->ask<session_snapshot>(s->reconciler, std::chrono::seconds(30), atom::snapshot_v);
}

caf::expected<uint64_t> runtime::subscribe(event_subscriber_actor sink, std::vector<event_kind> kinds) {
  auto r = impl_->ask<uint64_t>(impl_->bus, std::chrono::seconds(10), atom::subscribe_v, sink, std::move(kinds));
  if (r) impl_->ws->subscribed(sink);
  return r;
}

void runtime::unsubscribe(event_subscriber_actor sink) {
  impl_->ws->unsubscribed(sink);
  caf::anon_send(impl_->bus, atom::unsubscribe_v, std::move(sink));
}

std::vector<event> runtime::replay(uint64_t after) {
  auto r = impl_->ask<std::vector<event>>(impl_->bus, std::chrono::seconds(10), atom::replay_v, after);
  return r ? std::move(*r) : std::vector<event>{};
}

nlohmann::json runtime::snapshot() {
  std::promise<json> answer;
  auto result = answer.get_future();
  snapshot_async([&answer](json j) { answer.set_value(std::move(j)); });
  return await_answer(result);
}

void runtime::snapshot_async(std::function<void(json)> done) {
  impl_->ws->snapshot(*impl_, std::move(done));
}

void runtime::reload_async(result_callback<bool> done) {
  impl_->ask_async<bool>(impl_->watcher, std::chrono::seconds(30), std::move(done), atom::reload_v);
}

void runtime::approve_async(const std::string& server, result_callback<bool> done) {
  impl_->ask_async<bool>(impl_->gating, std::chrono::seconds(30), std::move(done), atom::approve_v, server);
}

void runtime::reject_async(const std::string& server, result_callback<bool> done) {
  impl_->ask_async<bool>(impl_->gating, std::chrono::seconds(30), std::move(done), atom::reject_v, server);
}

void runtime::restart_async(const std::string& server, result_callback<std::vector<restart_result>> done) {
  impl_->ws->restart(*impl_, server, std::move(done));
}

void runtime::replay_async(uint64_t after, std::function<void(std::vector<event>)> done) {
  impl_->ask_async<std::vector<event>>(
    impl_->bus, std::chrono::seconds(10),
    [done = std::move(done)](caf::expected<std::vector<event>> r) { done(r ? std::move(*r) : std::vector<event>{}); },
    atom::replay_v, after);
}

caf::expected<bool> runtime::reload() {
  return impl_->ask<bool>(impl_->watcher, std::chrono::seconds(30), atom::reload_v);
}

caf::expected<bool> runtime::approve(const std::string& server) {
  return impl_->ask<bool>(impl_->gating, std::chrono::seconds(30), atom::approve_v, server);
}

caf::expected<bool> runtime::reject(const std::string& server) {
  return impl_->ask<bool>(impl_->gating, std::chrono::seconds(30), atom::reject_v, server);
}

caf::expected<unavailability> runtime::unavailable_reason(const std::string& server) {
  return impl_->ask<unavailability>(impl_->gating, std::chrono::seconds(10), atom::reason_v, server);
}

caf::expected<std::vector<restart_result>> runtime::restart(const std::string& server) {
  std::promise<caf::expected<std::vector<restart_result>>> answer;
  auto result = answer.get_future();
  restart_async(server, [&answer](caf::expected<std::vector<restart_result>> r) { answer.set_value(std::move(r)); });
  return await_answer(result);
}

caf::expected<std::string> runtime::authorize(const std::string& server, authorize_options options) {
  std::promise<caf::expected<std::string>> answer;
  auto result = answer.get_future();
  authorize_async(server, std::move(options), [&answer](caf::expected<std::string> r) { answer.set_value(std::move(r)); });
  return await_answer(result);
}

void runtime::authorize_async(const std::string& server, authorize_options options, result_callback<std::string> done) {
  impl_->ws->authorize(*impl_, server, std::move(options), std::move(done));
}

void runtime::set_own_listeners(std::vector<listen_endpoint> listeners) {
  impl_->ws->set_own_listeners(*impl_, std::move(listeners));
}

caf::expected<bool> runtime::forget_authorization(const std::string& server) {
  std::promise<caf::expected<bool>> answer;
  auto result = answer.get_future();
  forget_authorization_async(server, [&answer](caf::expected<bool> r) { answer.set_value(std::move(r)); });
  return await_answer(result);
}

void runtime::forget_authorization_async(const std::string& server, result_callback<bool> done) {
  impl_->ws->forget_authorization(*impl_, server, std::move(done));
}

drain_result runtime::shutdown(std::chrono::milliseconds timeout) {
  auto& p = *impl_;
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    if (p.stopped) return {};
    p.stopped = true;
  }
  // Authorizations waiting for a browser end first: their threads call
  // back into the runtime.
  if (p.oauth) p.oauth->shutdown();
  // Calls in flight answer now, and every later one fails as it comes.
  if (p.broker)
    (void)p.ask<bool>(p.broker, std::chrono::seconds(10), atom::drain_v,
                      make_error(errc::not_connected, "the runtime stopped before the server answered"));
  return p.ws->shutdown(p, timeout);
}

void runtime::set_roots(std::vector<mcp_root> roots) {
  impl_->ws->set_roots(*impl_, std::move(roots));
}

std::vector<std::string> runtime::capabilities() const {
  runtime_mode m;
  m.pool = impl_->opts.pool;
  m.budget = impl_->opts.budget;
  m.mode = impl_->opts.mode;
  return mcprt::capabilities(m);
}

const runtime_options& runtime::options() const {
  return impl_->opts;
}

std::string runtime::shown_connection_id(const std::string& internal_id) const {
  return impl_->show_id(internal_id);
}

call_broker_actor runtime_access::calls(const runtime& rt) {
  return rt.impl_->broker;
}
event_bus_actor runtime_access::bus(const runtime& rt) {
  return rt.impl_->bus;
}
event_sink_actor runtime_access::event_forwarder(const runtime& rt) {
  return rt.impl_->forwarders->get().first;
}
gating_actor runtime_access::gating(const runtime& rt) {
  return rt.impl_->gating;
}
watcher_actor runtime_access::watcher(const runtime& rt) {
  return rt.impl_->watcher;
}
pool_actor runtime_access::pool(const runtime& rt) {
  return rt.impl_->pool;
}
budget_actor runtime_access::budget(const runtime& rt) {
  return rt.impl_->budget;
}
io::reactor* runtime_access::reactor(const runtime& rt) {
  return rt.impl_->reactor.get();
}
reconciler_actor runtime_access::session(const runtime& rt, const std::string& id) {
  auto s = rt.impl_->find_session(id);
  return s ? s->reconciler : reconciler_actor{};
}

// -- resources, prompts and completion -------------------------------

void runtime::mcp_request_async(const std::string& session, const std::string& server, const std::string& method,
                                json params, call_callback done, call_options opts) {
  if (std::find(client_request_methods.begin(), client_request_methods.end(), method) == client_request_methods.end()) {
    done(make_error(errc::bad_request, "'" + escape_for_display(method)
                                         + "' is not a request mcprt sends for a host (tools/call: call_tool)"));
    return;
  }
  impl_->start_call(session, server, {}, method, std::move(params), std::move(done), opts);
}

caf::expected<json> runtime::mcp_request(const std::string& session, const std::string& server,
                                         const std::string& method, json params, std::chrono::milliseconds timeout) {
  auto answer = std::make_shared<std::promise<caf::expected<json>>>();
  auto result = answer->get_future();
  call_options opts;
  opts.timeout = timeout;
  mcp_request_async(
    session, server, method, std::move(params),
    [answer](caf::expected<json> r) { answer->set_value(std::move(r)); }, opts);
  return await_answer(result);
}

caf::expected<json> runtime::resources(const std::string& session, const std::string& server) {
  return mcp_request(session, server, "resources/list", json::object());
}

caf::expected<json> runtime::resource_templates(const std::string& session, const std::string& server) {
  return mcp_request(session, server, "resources/templates/list", json::object());
}

caf::expected<json> runtime::read_resource(const std::string& session, const std::string& server,
                                           const std::string& uri) {
  return mcp_request(session, server, "resources/read", {{"uri", uri}});
}

caf::expected<json> runtime::get_prompt(const std::string& session, const std::string& server,
                                        const std::string& name, json arguments) {
  json params{{"name", name}};
  if (!arguments.is_null()) params["arguments"] = std::move(arguments);
  return mcp_request(session, server, "prompts/get", std::move(params));
}

caf::expected<json> runtime::complete(const std::string& session, const std::string& server, json ref,
                                      json argument, json context) {
  json params{{"ref", std::move(ref)}, {"argument", std::move(argument)}};
  if (!context.is_null()) params["context"] = std::move(context);
  return mcp_request(session, server, "completion/complete", std::move(params));
}

caf::expected<json> runtime::subscribe_resource(const std::string& session, const std::string& server,
                                                const std::string& uri) {
  return mcp_request(session, server, "resources/subscribe", {{"uri", uri}});
}

caf::expected<json> runtime::unsubscribe_resource(const std::string& session, const std::string& server,
                                                  const std::string& uri) {
  return mcp_request(session, server, "resources/unsubscribe", {{"uri", uri}});
}

} // namespace mcprt
