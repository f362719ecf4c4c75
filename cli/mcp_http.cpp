#include "cli/mcp_http.hpp"

#include <algorithm>
#include <atomic>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "cli/event_stream.hpp"
#include "core/ascii.hpp"
#include "core/gateway_session.hpp"
#include "core/mcp_headers.hpp"
#include "core/oauth.hpp"
#include "core/untrusted_text.hpp"
#include "mcprt/gateway.hpp"

namespace mcprt::cli {

using nlohmann::json;

namespace {

http_response rpc_error_response(int status, int code, const std::string& message, const mcp_http::header_list& extra) {
  http_response r;
  r.status = status;
  r.body = dump_json(gateway_session::error(nullptr, code, message)) + "\n";
  r.headers = extra;
  return r;
}

http_response plain_response(int status, const mcp_http::header_list& extra) {
  http_response r;
  r.status = status;
  r.content_type = "text/plain";
  r.headers = extra;
  return r;
}

bool accepts(const http_request& req, std::string_view type) {
  for (auto v : http::header_values(req.headers, "accept")) {
    auto lower = ascii_lower(v);
    if (lower.find(type) != std::string::npos || lower.find("*/*") != std::string::npos) return true;
  }
  return false;
}

/// The one Mcp-Session-Id, "" when absent; nullopt when there are several.
std::optional<std::string> session_header(const http_request& req) {
  auto v = http::header_values(req.headers, "mcp-session-id");
  if (v.empty()) return std::string{};
  if (v.size() > 1) return std::nullopt;
  return std::string{v.front()};
}

std::string new_legacy_id() {
  std::random_device rd;
  char buf[33];
  std::snprintf(buf, sizeof buf, "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return buf;
}

http_response stream_response(std::shared_ptr<event_stream> s, const mcp_http::header_list& extra) {
  http_response r;
  r.content_type = "text/event-stream";
  r.headers = extra;
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.headers.emplace_back("X-Accel-Buffering", "no");
  r.stream = std::move(s);
  return r;
}

/// Messages as SSE `message` events on one stream, in the order sent (the
/// stream drops a frame whose number is not above the last one's, so
/// numbering and queueing happen under one lock).
class sse_channel final : public gateway_channel {
public:
  sse_channel(const std::shared_ptr<event_stream>& s, bool end_on_last) : stream_(s), end_on_last_(end_on_last) {}

  void send(const json& msg, bool last) override {
    auto s = stream_.lock();
    if (!s) return;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      auto n = ++seq_;
      s->push(n, std::make_shared<const std::string>("id: " + std::to_string(n) + "\nevent: message\ndata: "
                                                     + dump_json(msg) + "\n\n"));
    }
    if (last && end_on_last_) s->close();
  }
  bool open() const override { return !stream_.expired(); }
  void close() override {
    if (auto s = stream_.lock()) s->close();
  }

private:
  std::weak_ptr<event_stream> stream_;
  bool end_on_last_;
  std::mutex mtx_;
  uint64_t seq_ = 0;
};

/// A request's answer as a JSON body. An initialize answer waits for its
/// session's id (the response header carries it).
class json_channel final : public gateway_channel {
public:
  json_channel(std::shared_ptr<http_exchange> ex, mcp_http::header_list extra, bool session_known)
    : ex_(std::move(ex)), extra_(std::move(extra)), session_known_(session_known) {}

  void send(const json& msg, bool last) override {
    if (!last) return; // progress and logs need a stream; this client took JSON
    std::lock_guard<std::mutex> guard{mtx_};
    if (done_) return;
    if (!session_known_) {
      held_ = msg;
      return;
    }
    respond(msg);
  }

  void send_error(const json& msg, int status) override {
    std::lock_guard<std::mutex> guard{mtx_};
    if (done_) return;
    respond(msg, status);
  }

  void set_session(const std::string& id) {
    std::lock_guard<std::mutex> guard{mtx_};
    session_ = id;
    session_known_ = true;
    if (held_ && !done_) respond(*held_);
  }

  bool open() const override {
    std::lock_guard<std::mutex> guard{mtx_};
    return !done_;
  }

  void close() override {
    std::lock_guard<std::mutex> guard{mtx_};
    if (done_) return;
    done_ = true;
    ex_->respond(rpc_error_response(404, gateway_error::internal, "the session ended", extra_));
  }

private:
  void respond(const json& msg, int status = 200) {
    done_ = true;
    http_response r;
    r.status = status;
    r.body = dump_json(msg) + "\n";
    r.headers = extra_;
    if (!session_.empty()) r.headers.emplace_back("Mcp-Session-Id", session_);
    ex_->respond(std::move(r));
  }

  std::shared_ptr<http_exchange> ex_;
  mcp_http::header_list extra_;
  mutable std::mutex mtx_;
  bool session_known_;
  bool done_ = false;
  std::string session_;
  std::optional<json> held_;
};

} // namespace

struct mcp_http::legacy {
  std::weak_ptr<event_stream> stream;
  std::shared_ptr<sse_channel> channel;
  std::string session; // the gateway's, once initialize came
};

mcp_http::mcp_http(gateway& gw, mcp_http_options opts) : gw_(gw), opts_(std::move(opts)) {}

mcp_http::~mcp_http() = default;

void mcp_http::refuse_version(const std::shared_ptr<http_exchange>& ex, const json& id, const header_list& extra) {
  // 2026-07-28's UnsupportedProtocolVersionError, under the request's id
  // when the body has one: a client of that revision reads `supported`,
  // an older one the message.
  auto versions = http::header_values(ex->request().headers, "mcp-protocol-version");
  auto err = gateway_session::error(id, gateway_error::unsupported_protocol_version,
                                    "Unsupported protocol version (mcprt's gateway speaks 2026-07-28, 2025-11-25, "
                                    "2025-06-18, 2025-03-26)");
  err["error"]["data"] = {{"supported", gateway_supported_versions()},
                          {"requested", versions.size() == 1 ? escape_for_display(versions.front().substr(0, 64))
                                                             : std::string("(several)")}};
  http_response r;
  r.status = 400;
  r.body = dump_json(err) + "\n";
  r.headers = extra;
  ex->respond(std::move(r));
}

void mcp_http::handle(const std::shared_ptr<http_exchange>& ex, http::route_id route, header_list extra,
                      const std::string& set) {
  auto& req = ex->request();
  auto versions = http::header_values(req.headers, "mcp-protocol-version");
  // POST decides with its body: a 2026-07-28 request may name its revision
  // only in `_meta` (and is then refused for the missing header).
  if (route != http::route_id::mcp_post &&
      (versions.size() > 1 ||
       (versions.size() == 1 && std::find(gateway_protocols.begin(), gateway_protocols.end(), versions.front()) ==
                                  gateway_protocols.end()))) {
    refuse_version(ex, nullptr, extra);
    return;
  }
  switch (route) {
    case http::route_id::mcp_post: post(ex, extra, set); return;
    case http::route_id::mcp_get: get(ex, extra, set); return;
    case http::route_id::mcp_delete: remove(ex, extra, set); return;
    case http::route_id::legacy_sse: legacy_stream(ex, extra); return;
    case http::route_id::legacy_messages: legacy_post(ex, extra); return;
    default: ex->respond(plain_response(404, extra)); return;
  }
}

namespace {

/// Whether a message names its revision in `_meta`, as 2026-07-28 and
/// later requests do.
bool names_revision_in_meta(const json& msg) {
  if (!msg.is_object()) return false;
  auto p = msg.find("params");
  if (p == msg.end() || !p->is_object()) return false;
  auto m = p->find("_meta");
  return m != p->end() && m->is_object() && m->contains("io.modelcontextprotocol/protocolVersion");
}

std::optional<json> parse_message(const std::shared_ptr<http_exchange>& ex, const mcp_http_options& opts,
                                   const mcp_http::header_list& extra) {
  json_limits lim;
  lim.max_bytes = opts.max_body;
  lim.max_depth = opts.max_json_depth;
  auto parsed = parse_bounded_json(ex->request().body, lim);
  if (!parsed.ok()) {
    ex->respond(rpc_error_response(400, gateway_error::parse, "Parse error: " + parsed.error->message, extra));
    return std::nullopt;
  }
  return std::move(parsed.value);
}

/// A tools/call whose client takes either: answered as JSON when the answer
/// is the first thing to send (one write, where a stream costs the client a
/// wake-up per chunk), as an event stream from the first progress, log or
/// server request on.
/// A slot of the daemon's stream limit; a token of no limit without one.
std::shared_ptr<void> take_slot(const std::shared_ptr<stream_slots>& slots) {
  return slots ? slots->take() : std::make_shared<char>(0);
}

class call_channel final : public gateway_channel {
public:
  call_channel(std::shared_ptr<http_exchange> ex, mcp_http::header_list extra, std::size_t queue,
               std::shared_ptr<stream_slots> slots)
    : ex_(std::move(ex)), extra_(std::move(extra)), queue_(queue), slots_(std::move(slots)) {}

  void send(const json& msg, bool last) override {
    std::shared_ptr<sse_channel> sse;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (!sse_) {
        if (done_) return;
        if (last) {
          done_ = true;
          http_response r;
          r.body = dump_json(msg) + "\n";
          r.headers = extra_;
          ex_->respond(std::move(r));
          return;
        }
        // With every stream slot taken the answer stays JSON: progress
        // and logs before it are dropped, the result is not.
        auto slot = take_slot(slots_);
        if (!slot) return;
        // The answer holds the stream from here on; the channel only
        // refers to it.
        auto s = std::make_shared<event_stream>(queue_);
        s->hold(std::move(slot));
        sse_ = std::make_shared<sse_channel>(s, true);
        ex_->respond(stream_response(s, extra_));
      }
      sse = sse_;
    }
    sse->send(msg, last);
  }

  void send_error(const json& msg, int status) override {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (!sse_) {
        if (done_) return;
        done_ = true;
        http_response r;
        r.status = status;
        r.body = dump_json(msg) + "\n";
        r.headers = extra_;
        ex_->respond(std::move(r));
        return;
      }
    }
    send(msg, true);
  }

  bool open() const override {
    std::lock_guard<std::mutex> guard{mtx_};
    return sse_ ? sse_->open() : !done_;
  }

  void close() override {
    std::shared_ptr<sse_channel> sse;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (!sse_) {
        if (done_) return;
        done_ = true;
        ex_->respond(rpc_error_response(404, gateway_error::internal, "the session ended", extra_));
        return;
      }
      sse = sse_;
    }
    sse->close();
  }

  /// Whether nothing has been sent: a refusal can still be an HTTP error.
  bool untouched() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return !sse_ && !done_;
  }

private:
  std::shared_ptr<http_exchange> ex_;
  mcp_http::header_list extra_;
  std::size_t queue_;
  std::shared_ptr<stream_slots> slots_;
  mutable std::mutex mtx_;
  bool done_ = false;
  std::shared_ptr<sse_channel> sse_;
};

} // namespace

void mcp_http::post(const std::shared_ptr<http_exchange>& ex, const header_list& extra, const std::string& set) {
  auto& req = ex->request();
  auto sid = session_header(req);
  if (!sid) {
    ex->respond(rpc_error_response(400, gateway_error::invalid_request, "more than one Mcp-Session-Id", extra));
    return;
  }
  auto msg = parse_message(ex, opts_, extra);
  if (!msg) return;
  auto versions = http::header_values(req.headers, "mcp-protocol-version");
  bool legacy_version = versions.size() == 1 && std::find(gateway_protocols.begin(), gateway_protocols.end(),
                                                           versions.front()) != gateway_protocols.end();
  bool modern = sid->empty() && !legacy_version && versions.size() <= 1 && names_revision_in_meta(*msg);
  if (!modern && (versions.size() > 1 || (versions.size() == 1 && !legacy_version))) {
    if (versions.size() == 1 && is_modern_protocol(versions.front()) && sid->empty()) {
      modern = true;
    } else {
      json id = nullptr;
      if (msg->is_object())
        if (auto i = msg->find("id"); i != msg->end() && (i->is_string() || i->is_number_integer())) id = *i;
      refuse_version(ex, id, extra);
      return;
    }
  }
  if (modern) {
    post_modern(ex, std::move(*msg), extra, set);
    return;
  }
  bool request = msg->is_object() && msg->contains("method") && msg->contains("id");
  std::string method = request && (*msg)["method"].is_string() ? (*msg)["method"].get<std::string>() : "";
  std::shared_ptr<gateway_channel> channel;
  std::shared_ptr<json_channel> json_reply;
  std::shared_ptr<call_channel> call_reply;
  if (request && method == "tools/call" && accepts(req, "text/event-stream")) {
    call_reply = std::make_shared<call_channel>(ex, extra, opts_.stream_queue, opts_.slots);
    channel = call_reply;
  } else if (request) {
    json_reply = std::make_shared<json_channel>(ex, extra, !sid->empty());
    channel = json_reply;
  }
  auto r = gw_.post(*sid, std::move(*msg), channel, set);
  if (r.status == 200) {
    if (json_reply && !r.session.empty()) json_reply->set_session(r.session);
    return;
  }
  if (r.status == 202) {
    ex->respond(plain_response(202, extra));
    return;
  }
  // Refused: before anything was sent on the channel, as an HTTP error.
  if (call_reply && !call_reply->untouched()) {
    call_reply->close();
    return;
  }
  ex->respond(rpc_error_response(r.status, gateway_error::invalid_request, r.error, extra));
}

void mcp_http::post_modern(const std::shared_ptr<http_exchange>& ex, json msg, const header_list& extra,
                           const std::string& set) {
  auto& req = ex->request();
  modern_headers h;
  auto one = [&](std::string_view name) -> std::optional<std::string> {
    auto v = http::header_values(req.headers, name);
    if (v.size() != 1) return std::nullopt; // absent, or ambiguous
    return std::string(v.front());
  };
  h.protocol = one("mcp-protocol-version");
  h.method = one("mcp-method");
  h.name = one("mcp-name");
  for (auto& hd : req.headers) // names come lower-cased
    if (hd.name.size() > 10 && hd.name.compare(0, 10, "mcp-param-") == 0 && h.params.size() < 64)
      h.params.emplace_back(hd.name.substr(10), hd.value);
  bool request = msg.is_object() && msg.contains("method") && msg.contains("id");
  std::shared_ptr<gateway_channel> channel;
  bool listen = request && msg["method"] == "subscriptions/listen";
  if (listen && !accepts(req, "text/event-stream")) {
    auto err = gateway_session::error(msg["id"], gateway_error::invalid_request,
                                      "subscriptions/listen answers with a stream: send Accept: text/event-stream");
    http_response resp;
    resp.status = 406;
    resp.body = dump_json(err) + "\n";
    resp.headers = extra;
    ex->respond(std::move(resp));
    return;
  }
  if (request && (msg["method"] == "tools/call" || listen) && accepts(req, "text/event-stream"))
    channel = std::make_shared<call_channel>(ex, extra, opts_.stream_queue, opts_.slots);
  else if (request)
    channel = std::make_shared<json_channel>(ex, extra, true);
  auto r = gw_.post_modern(std::move(msg), h, channel, set);
  if (r.answer) {
    http_response resp;
    resp.status = r.status;
    resp.body = dump_json(*r.answer) + "\n";
    resp.headers = extra;
    ex->respond(std::move(resp));
  } else if (r.status == 202) {
    ex->respond(plain_response(202, extra));
  } else if (r.status != 200) {
    ex->respond(rpc_error_response(r.status, gateway_error::invalid_request, r.error, extra));
  }
}

void mcp_http::get(const std::shared_ptr<http_exchange>& ex, const header_list& extra, const std::string& set) {
  auto& req = ex->request();
  if (!accepts(req, "text/event-stream")) {
    ex->respond(rpc_error_response(406, gateway_error::invalid_request, "GET /mcp needs Accept: text/event-stream",
                                   extra));
    return;
  }
  auto sid = session_header(req);
  if (!sid || sid->empty()) {
    ex->respond(rpc_error_response(400, gateway_error::invalid_request, "GET /mcp needs one Mcp-Session-Id", extra));
    return;
  }
  if (req.method == "HEAD") {
    ex->respond(stream_response(nullptr, extra));
    return;
  }
  auto slot = take_slot(opts_.slots);
  if (!slot) {
    ex->respond(rpc_error_response(503, gateway_error::internal,
                                   "too many open streams (--max-streams counts every kind together)", extra));
    return;
  }
  auto s = std::make_shared<event_stream>(opts_.stream_queue);
  s->hold(std::move(slot));
  s->set_initial(": mcprt\n\n", 0);
  auto channel = std::make_shared<sse_channel>(s, false);
  if (!gw_.listen(*sid, channel, set)) {
    ex->respond(rpc_error_response(404, gateway_error::invalid_request,
                                   "no such session (it ended, or the daemon restarted)", extra));
    return;
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    streams_.push_back(s);
  }
  ex->respond(stream_response(s, extra));
}

void mcp_http::remove(const std::shared_ptr<http_exchange>& ex, const header_list& extra, const std::string& set) {
  auto sid = session_header(ex->request());
  if (!sid || sid->empty()) {
    ex->respond(rpc_error_response(400, gateway_error::invalid_request, "DELETE /mcp needs one Mcp-Session-Id",
                                   extra));
    return;
  }
  if (!gw_.close(*sid, set)) {
    ex->respond(rpc_error_response(404, gateway_error::invalid_request, "no such session", extra));
    return;
  }
  ex->respond(plain_response(200, extra));
}

void mcp_http::legacy_stream(const std::shared_ptr<http_exchange>& ex, const header_list& extra) {
  if (ex->request().method == "HEAD") {
    ex->respond(stream_response(nullptr, extra));
    return;
  }
  auto slot = take_slot(opts_.slots);
  if (!slot) {
    ex->respond(rpc_error_response(503, gateway_error::internal,
                                   "too many open streams (--max-streams counts every kind together)", extra));
    return;
  }
  auto s = std::make_shared<event_stream>(opts_.stream_queue);
  s->hold(std::move(slot));
  auto id = new_legacy_id();
  s->set_initial("event: endpoint\ndata: /messages?sessionId=" + id + "\n\n", 0);
  auto l = std::make_shared<legacy>();
  l->stream = s;
  l->channel = std::make_shared<sse_channel>(s, false);
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (legacy_.size() >= opts_.max_legacy_streams) {
      ex->respond(rpc_error_response(503, gateway_error::internal, "too many 2024-11-05 streams", extra));
      return;
    }
    legacy_[id] = l;
    streams_.push_back(s);
  }
  ex->respond(stream_response(s, extra));
}

void mcp_http::legacy_post(const std::shared_ptr<http_exchange>& ex, const header_list& extra) {
  auto& target = ex->request().target;
  auto q = target.find('?');
  std::string id;
  if (q != std::string::npos)
    for (auto& [k, v] : oauth::parse_query(std::string_view(target).substr(q + 1)))
      if (k == "sessionId") id = v;
  std::shared_ptr<legacy> l;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = legacy_.find(id);
    if (it != legacy_.end() && !it->second->stream.expired()) l = it->second;
  }
  if (!l) {
    ex->respond(rpc_error_response(404, gateway_error::invalid_request, "no such sessionId (open GET /sse first)",
                                   extra));
    return;
  }
  auto msg = parse_message(ex, opts_, extra);
  if (!msg) return;
  std::string sid;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    sid = l->session;
  }
  auto r = gw_.post(sid, std::move(*msg), l->channel);
  if (r.status != 200 && r.status != 202) {
    ex->respond(rpc_error_response(r.status, gateway_error::invalid_request, r.error, extra));
    return;
  }
  if (!r.session.empty()) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      l->session = r.session;
    }
    gw_.listen(r.session, l->channel);
  }
  auto resp = plain_response(202, extra);
  resp.body = "Accepted";
  ex->respond(std::move(resp));
}

void mcp_http::keepalive() {
  std::vector<std::shared_ptr<event_stream>> live;
  std::vector<std::string> ended;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    streams_.erase(std::remove_if(streams_.begin(), streams_.end(), [](auto& w) { return w.expired(); }),
                   streams_.end());
    for (auto& w : streams_)
      if (auto s = w.lock()) live.push_back(std::move(s));
    for (auto it = legacy_.begin(); it != legacy_.end();) {
      if (it->second->stream.expired()) {
        if (!it->second->session.empty()) ended.push_back(it->second->session);
        it = legacy_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& s : live)
    s->keepalive();
  // A 2024-11-05 client's session lives as long as its stream.
  for (auto& sid : ended)
    gw_.close(sid);
}

void mcp_http::stop() {
  std::vector<std::shared_ptr<event_stream>> live;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& w : streams_)
      if (auto s = w.lock()) live.push_back(std::move(s));
    streams_.clear();
    legacy_.clear();
  }
  for (auto& s : live)
    s->close();
}

} // namespace mcprt::cli
