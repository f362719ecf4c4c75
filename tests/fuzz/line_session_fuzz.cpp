// A server's stdout (or HTTP bodies) through core/line_reader and
// core/mcp_session, with the session's state machine driven by the input
// too: after the handshake (a valid one, or whatever the input says), the
// rest of the input is a list of operations — raw bytes, whole lines,
// answers to the request the session sent last, tool calls, cancels, pings,
// ticks, filter changes, a closed transport, server requests for roots,
// elicitation and sampling (the client features are chosen by the input
// too), the host's answers to them and changed roots.
//
// Whatever happens: nothing throws or crashes, the stack stays shallow
// (deep answers are never built), every line the session sends is one
// valid JSON-RPC message, and everything it reports (failure reasons, tool
// names and descriptions, call results and errors, host requests) is valid
// UTF-8; a host request's params are an object, its token is new, and no
// more are pending than the limit.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>
#include <set>

#include <algorithm>

#include "core/line_reader.hpp"
#include "core/mcp_session.hpp"
#include "core/untrusted_text.hpp"

namespace {

using namespace mcprt;
using nlohmann::json;

[[noreturn]] void fail_invariant() {
  __builtin_trap();
}

void check_utf8(const std::string& s) {
  if (first_invalid_utf8(s)) fail_invariant();
}

void check_json(const json& j) {
  try {
    check_utf8(j.dump());
  } catch (const json::exception&) {
    fail_invariant(); // invalid UTF-8 made it into a value
  }
}

struct driver {
  mcp_session session;
  mcp_session::time_point now = mcp_session::time_point{} + std::chrono::hours(1000);
  std::int64_t last_request_id = 0;
  std::uint64_t next_token = 1;
  std::set<std::uint64_t> host_tokens;    // every token ever handed out
  std::vector<std::uint64_t> host_open;   // not yet answered or withdrawn

  explicit driver(mcp_session::options o) : session(std::move(o)) {}

  void absorb(const session_effects& fx) {
    for (auto& line : fx.send) {
      if (line.find('\n') != std::string::npos) fail_invariant();
      auto msg = json::parse(line, nullptr, false);
      if (msg.is_discarded() || !msg.is_object() || msg.value("jsonrpc", "") != "2.0") fail_invariant();
      if (msg.contains("method") && msg.contains("id") && msg["id"].is_number_integer())
        last_request_id = msg["id"].get<std::int64_t>();
    }
    if (fx.failure) check_utf8(*fx.failure);
    for (auto& c : fx.completed_calls) {
      check_json(c.result);
      if (c.error) {
        check_utf8(c.error->message);
        check_json(c.error->data);
      }
    }
    for (auto& h : fx.host_requests) {
      if (!h.params.is_object()) fail_invariant();
      if (h.method != "elicitation/create" && h.method != "sampling/createMessage") fail_invariant();
      check_json(h.params);
      if (!host_tokens.insert(h.token).second) fail_invariant();
      host_open.push_back(h.token);
    }
    for (auto t : fx.withdrawn_host_requests) {
      if (!host_tokens.count(t)) fail_invariant();
      host_open.erase(std::remove(host_open.begin(), host_open.end(), t), host_open.end());
    }
    if (session.pending_host_requests() > 3) fail_invariant();
    if (session.reader().buffered_bytes() > session.reader().limits().max_line_bytes) fail_invariant();
  }

  // A server request for `method`, with the payload as its params (or as
  // the requested schema of an elicitation, when it is not an object).
  std::string server_request(std::string_view method, std::string_view payload, unsigned id) {
    auto params = json::parse(payload, nullptr, false);
    json msg = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
    if (params.is_discarded())
      msg["params"] = {{"message", std::string(payload)}, {"requestedSchema", {{"type", "object"}}}};
    else
      msg["params"] = params;
    return msg.dump(-1, ' ', false, json::error_handler_t::replace);
  }

  std::string answer(std::string_view body, bool error) {
    std::string line = R"({"jsonrpc":"2.0","id":)" + std::to_string(last_request_id) + (error ? R"(,"error":)" : R"(,"result":)");
    line.append(body);
    line += "}";
    return line;
  }

  void check_views() {
    check_utf8(session.server_info().name);
    check_utf8(session.server_info().version);
    check_json(session.server_info().raw);
    if (session.instructions()) check_utf8(*session.instructions());
    for (auto& t : session.tools()) {
      check_utf8(t.name);
      check_utf8(t.description);
      check_json(t.raw);
    }
    for (auto& p : session.prompts()) {
      check_utf8(p.name);
      check_utf8(p.description);
    }
  }
};

} // namespace

// The same bytes as a gateway client's lines (line_reader's piece mode):
// every piece within its bound, none holding a newline, an oversized one
// at most its prefix.
static void check_pieces(std::string_view in) {
  line_reader_limits limits;
  limits.max_line_bytes = 48;
  limits.oversized_prefix_bytes = 16;
  limits.max_garbage_lines = std::numeric_limits<std::size_t>::max();
  line_reader r(limits);
  std::vector<line_piece> out;
  for (std::size_t at = 0; at < in.size(); at += 7)
    r.feed(in.substr(at, 7), out);
  r.finish(out);
  for (const auto& p : out) {
    if (p.text.find('\n') != std::string::npos) __builtin_trap();
    if (p.text.size() > (p.oversized ? limits.oversized_prefix_bytes : limits.max_line_bytes)) __builtin_trap();
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  check_pieces(in);
  auto take = [&](std::size_t n) {
    auto s = in.substr(0, n);
    in.remove_prefix(s.size());
    return s;
  };
  auto byte = [&]() -> unsigned {
    if (in.empty()) return 0;
    return static_cast<unsigned char>(take(1)[0]);
  };

  // Small limits, so the input reaches them.
  mcp_session::options o;
  unsigned cfg = byte();
  o.limits.max_line_bytes = 64 + (cfg & 0x0f) * 64;
  o.limits.max_garbage_lines = 1 + ((cfg >> 4) & 7);
  o.limits.max_garbage_bytes = 4096;
  // The high bits of this byte choose the client features, so seeds from
  // before they existed keep their meaning.
  unsigned depth_and_features = byte();
  o.max_message_depth = 4 + (depth_and_features & 15);
  o.max_list_pages = 3;
  if (cfg & 0x80) o.exclude_tools = std::vector<std::string>{"x*"};
  unsigned features = depth_and_features >> 4;
  if (features & 1) o.features.roots = std::vector<mcp_root>{{"file:///w", "w"}};
  o.features.elicitation = static_cast<elicitation_policy>(((features >> 1) & 3) % 3);
  o.features.sampling = (features & 8) != 0;
  o.max_pending_host_requests = 3;
  o.host_request_timeout = std::chrono::milliseconds(5000);
  driver d(o);
  d.absorb(d.session.start(d.now));

  // The handshake: a valid initialize answer, or none (the input decides).
  if (byte() & 1) {
    json caps = {{"tools", {{"listChanged", true}}}, {"prompts", json::object()}};
    d.absorb(d.session.on_line(d.answer(json{{"protocolVersion", "2025-06-18"}, {"capabilities", caps}}.dump(), false), d.now));
    d.absorb(d.session.on_line(d.answer(R"({"tools":[{"name":"echo"},{"name":"xy"}]})", false), d.now));
    // prompts/list was sent before tools/list answered: answer id - 1.
    --d.last_request_id;
    d.absorb(d.session.on_line(d.answer(R"({"prompts":[]})", false), d.now));
  }

  while (!in.empty()) {
    unsigned op = byte() % 18;
    auto len = static_cast<std::size_t>(byte());
    auto payload = take(len);
    switch (op) {
      case 0:
      case 1:
        d.absorb(d.session.on_bytes(payload.data(), payload.size(), d.now));
        break;
      case 2:
        d.absorb(d.session.on_line(payload, d.now));
        break;
      case 3:
        d.absorb(d.session.on_line(d.answer(payload, false), d.now));
        break;
      case 4:
        d.absorb(d.session.on_line(d.answer(payload, true), d.now));
        break;
      case 5: {
        auto tools = d.session.visible_tools();
        std::string name = tools.empty() || payload.empty() ? std::string(payload)
                                                            : tools[static_cast<unsigned char>(payload[0]) % tools.size()].name;
        auto args = json::parse(payload, nullptr, false);
        d.absorb(d.session.call_tool(d.next_token++, name, args.is_discarded() ? json::object() : args, d.now));
        break;
      }
      case 6:
        d.absorb(d.session.cancel_call(d.next_token > 1 ? d.next_token - 1 : 0, std::string(payload)));
        break;
      case 7:
        d.absorb(d.session.send_ping(d.now));
        break;
      case 8:
        d.now += std::chrono::milliseconds(len * 997);
        d.absorb(d.session.on_tick(d.now));
        break;
      case 9:
        d.absorb(d.session.set_tool_filter(std::vector<std::string>{std::string(payload)}, std::nullopt));
        break;
      case 10:
        d.absorb(d.session.on_transport_closed(std::string(payload)));
        break;
      case 11:
        d.absorb(d.session.on_line(std::string(len * 8, '[') + std::string(payload), d.now));
        break;
      case 12:
        d.absorb(d.session.on_line(d.server_request("elicitation/create", payload, len), d.now));
        break;
      case 13:
        d.absorb(d.session.on_line(d.server_request(len & 1 ? "sampling/createMessage" : "roots/list", payload, len), d.now));
        break;
      case 14:
      case 15: {
        // The host answers (or fails) an open request, or a made-up token.
        std::uint64_t token = d.host_open.empty() || (len & 0x80) ? len : d.host_open[len % d.host_open.size()];
        auto body = json::parse(payload, nullptr, false);
        if (op == 14)
          d.absorb(d.session.answer_host_request(token, body.is_discarded() ? json(std::string(payload)) : body));
        else
          d.absorb(d.session.fail_host_request(token, rpc_error{static_cast<int>(len) - 128, std::string(payload), json()}));
        break;
      }
      case 16: {
        std::vector<mcp_root> roots;
        for (std::size_t i = 0; i < payload.size() % 4; ++i)
          roots.push_back({"file:///" + std::string(payload.substr(i)), std::string(payload.substr(0, i))});
        d.absorb(d.session.set_roots(std::move(roots)));
        break;
      }
      case 17: {
        json msg = {{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", len}}}};
        d.absorb(d.session.on_line(msg.dump(), d.now));
        break;
      }
    }
    d.check_views();
  }
  d.absorb(d.session.close());
  return 0;
}
