#include "cli/http_api.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include "mcprt/runtime.hpp"

namespace mcprt::cli {

using nlohmann::json;

json redact(json j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if ((it.key() == "env" || it.key() == "headers") && it.value().is_object()) {
        for (auto& v : it.value())
          v = "<redacted>";
      } else {
        it.value() = redact(std::move(it.value()));
      }
    }
  } else if (j.is_array()) {
    for (auto& v : j)
      v = redact(std::move(v));
  }
  return j;
}

// -- event streams ---------------------------------------------------------------

/// One connected event stream: a bounded queue of ready SSE frames.
struct sse_client {
  std::mutex mtx;
  std::condition_variable cv;
  std::deque<std::pair<uint64_t, std::string>> queue;
  bool dropped = false; // fell behind: the stream is closed
  bool closed = false;  // the daemon is stopping: the stream ends cleanly
};

/// Fans bus events out to the streams. `publish` runs in the subscriber
/// actor and only takes short locks: it never waits for a client.
class event_hub {
public:
  event_hub(std::size_t queue_limit, std::size_t max_clients) : limit_(queue_limit), max_(max_clients) {}

  std::shared_ptr<sse_client> add() {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_ || clients_.size() >= max_) return nullptr;
    auto c = std::make_shared<sse_client>();
    clients_.push_back(c);
    return c;
  }

  void remove(const std::shared_ptr<sse_client>& c) {
    std::lock_guard<std::mutex> guard{mtx_};
    clients_.erase(std::remove(clients_.begin(), clients_.end(), c), clients_.end());
  }

  void publish(uint64_t seq, const std::string& frame) {
    std::vector<std::shared_ptr<sse_client>> cs;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      cs = clients_;
      latest_ = std::max(latest_, seq);
    }
    for (auto& c : cs) {
      std::lock_guard<std::mutex> guard{c->mtx};
      if (c->dropped || c->closed) continue;
      if (c->queue.size() >= limit_) {
        c->dropped = true;
        c->queue.clear();
        spdlog::warn("events: dropping a stream that fell {} events behind", limit_);
      } else {
        c->queue.emplace_back(seq, frame);
      }
      c->cv.notify_all();
    }
  }

  void stop() {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    for (auto& c : clients_) {
      std::lock_guard<std::mutex> g{c->mtx};
      c->closed = true;
      c->cv.notify_all();
    }
  }

  std::size_t size() {
    std::lock_guard<std::mutex> guard{mtx_};
    return clients_.size();
  }

  /// The highest event id published to the streams so far.
  uint64_t latest() {
    std::lock_guard<std::mutex> guard{mtx_};
    return latest_;
  }

private:
  std::mutex mtx_;
  std::vector<std::shared_ptr<sse_client>> clients_;
  bool stopping_ = false;
  uint64_t latest_ = 0;
  std::size_t limit_;
  std::size_t max_;
};

std::string sse_frame(const event& ev) {
  return "id: " + std::to_string(ev.seq) + "\nevent: " + to_string(ev.kind) + "\ndata: " + redact(ev.data.value).dump()
         + "\n\n";
}

/// Tells a resuming client that events between its Last-Event-ID and
/// `next_id` are gone (no `id:`, so its Last-Event-ID stays): it should
/// fetch the snapshot again.
std::string gap_frame(uint64_t last_event_id, uint64_t next_id, const char* reason) {
  nlohmann::json data{{"last_event_id", last_event_id}, {"next_id", next_id}, {"reason", reason}};
  return "event: gap\ndata: " + data.dump() + "\n\n";
}

event_subscriber_actor::behavior_type hub_sink(event_subscriber_actor::pointer, std::shared_ptr<event_hub> hub) {
  return {
    [hub](event& ev) {
      spdlog::debug("event {} {}", ev.seq, to_string(ev.kind));
      hub->publish(ev.seq, sse_frame(ev));
    },
  };
}

// -- helpers -----------------------------------------------------------------------

namespace {

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump() + "\n", "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& code, const std::string& message,
                json extra = json::object()) {
  json body{{"error", code}, {"message", message}};
  for (auto& [k, v] : extra.items())
    body[k] = v;
  send_json(res, status, body);
}

/// Every route of the API, for telling a wrong method (405) from an
/// unknown path (404). Kept next to the registrations below.
struct route_pattern {
  const char* method;
  std::regex path;
};

const std::vector<route_pattern>& api_routes() {
  static const std::vector<route_pattern> routes{
    {"GET", std::regex("/healthz")},
    {"GET", std::regex("/workspace/mcp")},
    {"GET", std::regex("/workspace/mcp/events")},
    {"POST", std::regex("/workspace/mcp/reload")},
    {"POST", std::regex("/workspace/mcp/tools/call")},
    {"POST", std::regex("/workspace/mcp/[^/]+/(approve|reject|restart)")},
  };
  return routes;
}

/// The methods `path` is served with (HEAD comes with GET), or "" when none.
std::string allowed_methods(const std::string& path) {
  std::string out;
  for (auto& r : api_routes()) {
    if (!std::regex_match(path, r.path)) continue;
    std::string m = r.method;
    if (m == "GET") m += ", HEAD";
    if (out.find(m) == std::string::npos) out += (out.empty() ? "" : ", ") + m;
  }
  return out;
}

const char* status_code_name(int status) {
  switch (status) {
    case 400: return "bad_request";
    case 401: return "unauthorized";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 409: return "conflict";
    case 413: return "payload_too_large";
    case 414: return "uri_too_long";
    case 415: return "unsupported_media_type";
    case 503: return "unavailable";
    default: return status < 500 ? "bad_request" : "internal_error";
  }
}

/// An mcprt error as HTTP status, code and text.
struct http_error {
  int status = 500;
  std::string code;
  std::string message;
};

http_error classify(caf::actor_system& sys, const caf::error& e) {
  http_error out;
  if (e.category() == caf::atom("mcprt")) {
    auto x = static_cast<errc>(e.code());
    out.code = to_string(x);
    out.message = e.context().match_elements<std::string>() ? e.context().get_as<std::string>(0) : out.code;
    switch (x) {
      case errc::unknown_server:
      case errc::unknown_tool: out.status = 404; break;
      case errc::unavailable:
      case errc::not_gated:
      case errc::budget_exhausted:
      case errc::pool_draining: out.status = 409; break;
      case errc::not_connected: out.status = 503; break;
      case errc::timeout: out.status = 504; break;
      case errc::tool_error:
      case errc::protocol_error:
      case errc::spawn_failed:
      case errc::transport_not_supported: out.status = 502; break;
      default: out.status = 500;
    }
    return out;
  }
  if (e == caf::sec::request_timeout) {
    out.status = 504;
    out.code = "timeout";
  } else {
    out.status = 500;
    out.code = "internal_error";
  }
  out.message = sys.render(e);
  return out;
}

/// Constant-time comparison, so the token cannot be guessed byte by byte.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

std::optional<uint64_t> parse_seq(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

/// The body as a JSON object, or an error response sent and nullopt.
std::optional<json> json_body(const httplib::Request& req, httplib::Response& res, bool allow_empty) {
  if (req.body.empty()) {
    if (allow_empty) return json::object();
    send_error(res, 400, "bad_request", "expected a JSON object body");
    return std::nullopt;
  }
  auto j = json::parse(req.body, nullptr, false);
  if (j.is_discarded()) {
    send_error(res, 400, "bad_request", "the body is not valid JSON");
    return std::nullopt;
  }
  if (!j.is_object()) {
    send_error(res, 400, "bad_request", "expected a JSON object body");
    return std::nullopt;
  }
  return j;
}

} // namespace

// -- the API -----------------------------------------------------------------------------

struct http_api::impl {
  runtime& rt;
  caf::actor_system& sys;
  std::string session;
  http_api_options opts;
  std::shared_ptr<event_hub> hub;
  event_subscriber_actor sink;

  impl(runtime& r, caf::actor_system& s, std::string sess, http_api_options o)
    : rt(r), sys(s), session(std::move(sess)), opts(std::move(o)),
      hub(std::make_shared<event_hub>(opts.sse_queue, opts.max_streams)) {}

  void decision(const httplib::Request& req, httplib::Response& res, bool approve) {
    auto name = req.matches[1].str();
    auto r = approve ? rt.approve(name) : rt.reject(name);
    if (!r) {
      auto e = classify(sys, r.error());
      send_error(res, e.status, e.code, e.message, {{"server", name}});
      return;
    }
    spdlog::info("{} {} over HTTP", approve ? "approved" : "rejected", name);
    send_json(res, 200, {{"server", name}, {"approval", approve ? "approved" : "rejected"}});
  }

  void restart(const httplib::Request& req, httplib::Response& res) {
    auto name = req.matches[1].str();
    auto r = rt.restart(name);
    if (!r) {
      auto e = classify(sys, r.error());
      send_error(res, e.status, e.code, e.message, {{"server", name}});
      return;
    }
    if (r->empty()) {
      // No pool entry: say whether the server exists at all.
      auto snap = rt.snapshot();
      bool known = false;
      for (auto& s : snap["servers"])
        known = known || s.value("name", "") == name;
      if (!known) {
        send_error(res, 404, "unknown_server", "no MCP server named " + name + " is configured",
                   {{"server", name}});
        return;
      }
    }
    json results = json::array();
    for (auto& x : *r)
      results.push_back({{"id", x.id}, {"restarted", x.restarted}, {"duration_ms", x.duration_ms},
                         {"reason", x.reason.empty() ? json(nullptr) : json(x.reason)}});
    spdlog::info("restart {}: {} entries", name, r->size());
    send_json(res, 200, {{"server", name}, {"results", results}});
  }

  void call(const httplib::Request& req, httplib::Response& res) {
    auto body = json_body(req, res, false);
    if (!body) return;
    auto& b = *body;
    if (!b.contains("server") || !b["server"].is_string() || b["server"].get<std::string>().empty()) {
      send_error(res, 400, "bad_request", "\"server\" must be a non-empty string");
      return;
    }
    if (!b.contains("tool") || !b["tool"].is_string() || b["tool"].get<std::string>().empty()) {
      send_error(res, 400, "bad_request", "\"tool\" must be a non-empty string");
      return;
    }
    json args = json::object();
    if (b.contains("arguments") && !b["arguments"].is_null()) {
      if (!b["arguments"].is_object()) {
        send_error(res, 400, "bad_request", "\"arguments\" must be an object");
        return;
      }
      args = b["arguments"];
    }
    auto server = b["server"].get<std::string>();
    auto tool = b["tool"].get<std::string>();
    // A server that is admitted but still connecting (just approved, just
    // started, restarting) gets a few seconds before the call fails.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    auto connecting = [](const caf::error& e) {
      return e.category() == caf::atom("mcprt") && e.code() == static_cast<uint8_t>(errc::not_connected);
    };
    auto r = rt.call_tool(session, server, tool, args);
    while (!r && connecting(r.error()) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      r = rt.call_tool(session, server, tool, args);
    }
    if (r) {
      send_json(res, 200, *r);
      return;
    }
    auto e = classify(sys, r.error());
    json extra{{"server", server}, {"tool", tool}};
    if (e.code == "unavailable") {
      // "NAME is unavailable (REASON): REMEDY"
      auto open = e.message.find(" is unavailable (");
      auto close = e.message.find("): ");
      if (open != std::string::npos && close != std::string::npos && close > open) {
        auto from = open + std::string(" is unavailable (").size();
        extra["reason"] = e.message.substr(from, close - from);
        extra["remedy"] = e.message.substr(close + 3);
      } else if (auto u = rt.unavailable_reason(server); u && !u->reason.empty()) {
        extra["reason"] = u->reason;
        extra["remedy"] = u->remedy;
      }
    }
    send_error(res, e.status, e.code, e.message, extra);
  }

  void events(const httplib::Request& req, httplib::Response& res) {
    std::optional<uint64_t> after;
    if (req.has_header("Last-Event-ID")) {
      after = parse_seq(req.get_header_value("Last-Event-ID"));
      if (!after) {
        send_error(res, 400, "bad_request", "Last-Event-ID must be an event id (a decimal number)");
        return;
      }
    }
    auto c = hub->add();
    if (!c) {
      send_error(res, 503, "unavailable", "too many event streams, or the daemon is stopping");
      return;
    }
    // Registered first, then replayed: nothing falls in between; what is
    // in both is skipped by sequence number.
    struct stream_state {
      std::vector<std::string> initial;
      uint64_t last = 0;
      bool started = false;
    };
    auto st = std::make_shared<stream_state>();
    if (after) {
      st->last = *after;
      auto replayed = rt.replay(*after);
      auto latest = std::max(hub->latest(), replayed.empty() ? 0 : replayed.back().seq);
      if (*after > latest) {
        // An id this daemon never sent: from an earlier run of it. The
        // client missed everything; it gets the whole ring.
        replayed = rt.replay(0);
        st->last = 0;
        st->initial.push_back(gap_frame(*after, replayed.empty() ? latest + 1 : replayed.front().seq, "unknown_id"));
      } else if (!replayed.empty() && replayed.front().seq > *after + 1) {
        st->initial.push_back(gap_frame(*after, replayed.front().seq, "evicted"));
      }
      for (auto& ev : replayed)
        st->initial.push_back(sse_frame(ev));
    }
    spdlog::debug("events: stream opened (replay from {}, {} events)", after ? std::to_string(*after) : "-",
                  st->initial.size());
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    auto keepalive = opts.keepalive;
    auto h = hub;
    res.set_chunked_content_provider(
      "text/event-stream",
      [c, st, keepalive](size_t, httplib::DataSink& sink) {
        if (!st->started) {
          st->started = true;
          std::string head = ": mcprt events\n\n";
          for (auto& f : st->initial) {
            head += f;
          }
          // The replayed frames carry their ids; remember the highest.
          for (auto& f : st->initial) {
            if (f.rfind("id: ", 0) != 0) continue; // the gap marker has none
            auto v = parse_seq(f.substr(4, f.find('\n') - 4));
            if (v && *v > st->last) st->last = *v;
          }
          st->initial.clear();
          return sink.write(head.data(), head.size());
        }
        std::unique_lock<std::mutex> lock{c->mtx};
        c->cv.wait_for(lock, keepalive, [&] { return !c->queue.empty() || c->dropped || c->closed; });
        if (c->closed) {
          lock.unlock();
          sink.done();
          return true;
        }
        if (c->dropped) return false;
        if (c->queue.empty()) {
          lock.unlock();
          static const std::string ka = ": keep-alive\n\n";
          return sink.write(ka.data(), ka.size());
        }
        auto batch = std::move(c->queue);
        c->queue.clear();
        lock.unlock();
        std::string out;
        for (auto& [seq, frame] : batch) {
          if (seq <= st->last) continue;
          st->last = seq;
          out += frame;
        }
        if (out.empty()) return true;
        return sink.write(out.data(), out.size());
      },
      [h, c](bool) {
        h->remove(c);
        spdlog::debug("events: stream closed");
      });
  }
};

http_api::http_api(runtime& rt, caf::actor_system& sys, std::string session, http_api_options opts)
  : impl_(std::make_unique<impl>(rt, sys, std::move(session), std::move(opts))) {}

http_api::~http_api() {
  stop();
  if (impl_->sink) {
    impl_->rt.unsubscribe(impl_->sink);
    caf::anon_send_exit(impl_->sink, caf::exit_reason::user_shutdown);
  }
}

void http_api::stop() {
  impl_->hub->stop();
}

bool http_api::install(httplib::Server& svr) {
  auto& p = *impl_;
  p.sink = p.sys.spawn(hub_sink, p.hub);
  if (!p.rt.subscribe(p.sink)) return false;

  svr.set_payload_max_length(p.opts.max_body);
  // Event streams hold a worker each: room for all of them plus requests.
  auto threads = p.opts.max_streams + 8;
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };

  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    auto& tok = impl_->opts.token;
    if (tok.empty()) return httplib::Server::HandlerResponse::Unhandled;
    auto h = req.get_header_value("Authorization");
    const std::string bearer = "Bearer ";
    if (h.compare(0, bearer.size(), bearer) == 0 && same_secret(h.substr(bearer.size()), tok))
      return httplib::Server::HandlerResponse::Unhandled;
    spdlog::warn("{} {}: rejected, {} bearer token", req.method, req.path, h.empty() ? "no" : "wrong");
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(res, 401, "unauthorized", "this daemon needs Authorization: Bearer <token> (see --token-file)");
    return httplib::Server::HandlerResponse::Handled;
  });
  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() && res.get_header_value("Content-Type") == "application/json") return;
    std::string msg;
    if (res.status == 404) {
      if (auto allow = allowed_methods(req.path); !allow.empty()) {
        res.status = 405;
        res.set_header("Allow", allow);
        send_error(res, 405, status_code_name(405), req.method + " " + req.path + ": allowed are " + allow);
        return;
      }
    }
    switch (res.status) {
      case 404: msg = "no route " + req.method + " " + req.path; break;
      case 413: msg = "the request body is too large"; break;
      default: msg = "bad request";
    }
    send_error(res, res.status, status_code_name(res.status), msg);
  });
  svr.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("{} {}: {}", req.method, req.path, what);
    send_error(res, 500, "internal_error", what);
  });
  svr.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    spdlog::debug("{} {} -> {}", req.method, req.path, res.status);
  });

  svr.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { send_json(res, 200, {{"ok", true}}); });
  svr.Get("/workspace/mcp", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, redact(impl_->rt.snapshot()));
  });
  svr.Get("/workspace/mcp/events",
          [this](const httplib::Request& req, httplib::Response& res) { impl_->events(req, res); });
  svr.Post("/workspace/mcp/reload", [this](const httplib::Request&, httplib::Response& res) {
    auto r = impl_->rt.reload();
    if (!r) {
      auto e = classify(impl_->sys, r.error());
      send_error(res, e.status, e.code, e.message);
      return;
    }
    send_json(res, 202, {{"reload", "accepted"}});
  });
  svr.Post("/workspace/mcp/tools/call",
           [this](const httplib::Request& req, httplib::Response& res) { impl_->call(req, res); });
  svr.Post(R"(/workspace/mcp/([^/]+)/approve)",
           [this](const httplib::Request& req, httplib::Response& res) { impl_->decision(req, res, true); });
  svr.Post(R"(/workspace/mcp/([^/]+)/reject)",
           [this](const httplib::Request& req, httplib::Response& res) { impl_->decision(req, res, false); });
  svr.Post(R"(/workspace/mcp/([^/]+)/restart)",
           [this](const httplib::Request& req, httplib::Response& res) { impl_->restart(req, res); });
  return true;
}

} // namespace mcprt::cli
