// `mcprt inspect`: connect to one MCP server once, print what it offers, and
// shut it down cleanly. It runs the same connection actor the runtime uses.

#include "cli/inspect.hpp"

#include <iostream>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/connection.hpp"
#include "io/http_transport.hpp"
#include "io/reactor.hpp"

namespace mcprt::cli {

namespace {

using nlohmann::ordered_json;

struct inspect_config : caf::actor_system_config {
  inspect_config() {
    add_mcprt_types(*this);
  }
};

// Prints `error` readably for a person: mcprt errors carry their own text.
std::string describe(caf::actor_system& sys, const caf::error& err) {
  if (err.category() == caf::atom("mcprt"))
    return render_error(err.code(), err.category(), err.context());
  return sys.render(err);
}

std::string one_line(std::string s) {
  for (auto& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

void print_human(const connection_info& info, std::ostream& os) {
  os << "server    " << info.server_name << " " << info.server_version << "\n"
     << "protocol  " << info.protocol << "\n"
     << "tools     " << info.tools.size() << "\n";
  for (auto& t : info.tools)
    os << "  " << t.name << (t.description.empty() ? "" : " — " + one_line(t.description)) << "\n";
  os << "prompts   " << info.prompts.size() << "\n";
  for (auto& p : info.prompts)
    os << "  " << p.name << (p.description.empty() ? "" : " — " + one_line(p.description)) << "\n";
}

ordered_json to_json(const connection_info& info) {
  ordered_json out = ordered_json::object();
  out["server"] = {{"name", info.server_name}, {"version", info.server_version}};
  out["protocol"] = info.protocol;
  out["tools"] = ordered_json::array();
  for (auto& t : info.tools)
    out["tools"].push_back({{"name", t.name}, {"description", t.description}});
  out["prompts"] = ordered_json::array();
  for (auto& p : info.prompts)
    out["prompts"].push_back({{"name", p.name}, {"description", p.description}});
  return out;
}

} // namespace

int run_inspect(const inspect_options& opts) {
  // inspect reports its outcome in one line of its own.
  spdlog::set_level(spdlog::level::off);
  nlohmann::json spec = nlohmann::json::object();
  if (opts.http_url) {
    spec["httpUrl"] = *opts.http_url;
    nlohmann::json headers = nlohmann::json::object();
    for (auto& h : opts.headers) {
      auto colon = h.find(':');
      if (colon == std::string::npos || colon == 0) {
        std::cerr << "mcprt: --header expects NAME:VALUE\n";
        return 2;
      }
      auto value = h.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      headers[h.substr(0, colon)] = value;
    }
    spec["headers"] = headers;
  } else {
    if (opts.command.empty()) {
      std::cerr << "mcprt: inspect needs a command after `--`, or --http URL\n";
      return 2;
    }
    spec["command"] = opts.command.front();
    spec["args"] = std::vector<std::string>(opts.command.begin() + 1, opts.command.end());
  }
  if (opts.timeout_ms) spec["discoveryTimeoutMs"] = *opts.timeout_ms;
  auto parsed = parse_server_config("inspect", spec, config_scope::session, {});
  if (!parsed.config) {
    std::cerr << "mcprt: " << parsed.error->message << "\n";
    return 2;
  }

  // Stopped in this order: the actors (awaited below), the I/O threads that
  // send to them, the actor system. An I/O thread may still be waking a
  // worker for its last message when the actor is done; the scheduler must
  // not be destroyed under it.
  inspect_config cfg;
  caf::actor_system sys{cfg};
  io::reactor reactor;
  io::http_worker_pool http(2);
  int rc = 1;
  {
    caf::scoped_actor self{sys};
    connection_config cc;
    cc.server = *parsed.config;
    cc.subscribers.push_back(caf::actor_cast<event_sink_actor>(self));
    auto conn = spawn_connection(sys, cc, {&reactor, &http});
    std::string failure;
    bool done = false;
    // The connection enforces the discovery timeout itself; the margin here
    // only guards against a bug leaving this loop waiting forever.
    auto guard = std::chrono::milliseconds(opts.timeout_ms.value_or(30000) + 10000);
    while (!done) {
      self->receive(
        [&](client_update& u) {
          if (u.status == connection_status::connected) {
            done = true;
          } else if (u.status == connection_status::error || u.status == connection_status::disconnected) {
            failure = u.error.empty() ? "connection " + to_string(u.status) : u.error;
            done = true;
          }
        },
        caf::after(guard) >> [&] {
          failure = "no answer within " + std::to_string(guard.count()) + " ms";
          done = true;
        });
    }
    if (failure.empty()) {
      self->request(conn, caf::infinite, atom::info_v)
        .receive(
          [&](connection_info& info) {
            if (opts.json) std::cout << to_json(info).dump(2) << "\n";
            else print_human(info, std::cout);
            rc = 0;
          },
          [&](caf::error& err) { failure = describe(sys, err); });
    }
    self->request(conn, std::chrono::seconds(10), atom::stop_v)
      .receive([](bool) {}, [](caf::error&) {});
    if (!failure.empty()) {
      std::cerr << "mcprt: inspect failed: " << one_line(failure) << "\n";
      rc = 1;
    }
    self->send_exit(conn, caf::exit_reason::user_shutdown);
  }
  sys.await_all_actors_done();
  return rc;
}

} // namespace mcprt::cli
