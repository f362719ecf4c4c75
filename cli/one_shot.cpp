// `mcprt inspect` and `mcprt call --http URL | -- COMMAND`: connect to one
// MCP server once, do one thing, and shut it down cleanly. They run the same
// connection actor the runtime uses. The one CAF translation unit of the
// one-shot commands: both share the connection plumbing here.

#include "cli/one_shot.hpp"

#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/connection.hpp"
#include "cli/exit_codes.hpp"
#include "cli/terminal_output.hpp"
#include "core/client_features.hpp"
#include "core/untrusted_text.hpp"
#include "io/http_transport.hpp"
#include "io/oauth_client.hpp"
#include "io/reactor.hpp"

namespace mcprt::cli {

namespace {

using nlohmann::ordered_json;


struct one_shot_config : caf::actor_system_config {
  one_shot_config() {
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
  os << "server    " << escape_for_display(info.server_name) << " " << escape_for_display(info.server_version) << "\n"
     << "protocol  " << escape_for_display(info.protocol) << "\n"
     << "tools     " << info.tools.size() << "\n";
  for (auto& t : info.tools)
    os << "  " << escape_for_display(t.name)
       << (t.description.empty() ? "" : " — " + escape_for_display(one_line(t.description))) << "\n";
  os << "prompts   " << info.prompts.size() << "\n";
  for (auto& p : info.prompts)
    os << "  " << escape_for_display(p.name)
       << (p.description.empty() ? "" : " — " + escape_for_display(one_line(p.description))) << "\n";
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

/// A connection_config for the target, or a usage error in `why`. Header
/// values never appear in `why`: they are secrets.
std::optional<connection_config> make_config(const one_shot_target& t, const char* verb, std::string& why) {
  nlohmann::json spec = nlohmann::json::object();
  if ((t.http_url ? 1 : 0) + (t.sse_url ? 1 : 0) + (t.command.empty() ? 0 : 1) > 1) {
    why = std::string(verb) + " takes one of --http URL, --sse URL or a command after `--`";
    return std::nullopt;
  }
  if (t.http_url || t.sse_url) {
    if (t.http_url) spec["httpUrl"] = *t.http_url;
    else spec["url"] = *t.sse_url; // `url` without `type`: legacy HTTP+SSE
    nlohmann::json headers = nlohmann::json::object();
    for (auto& h : t.headers) {
      auto colon = h.find(':');
      if (colon == std::string::npos || colon == 0) {
        why = "--header expects NAME:VALUE";
        return std::nullopt;
      }
      auto value = h.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      headers[h.substr(0, colon)] = value;
    }
    spec["headers"] = headers;
  } else {
    if (!t.headers.empty()) {
      why = "--header needs --http URL or --sse URL";
      return std::nullopt;
    }
    if (t.command.empty()) {
      why = std::string(verb) + " needs a command after `--`, --http URL or --sse URL";
      return std::nullopt;
    }
    spec["command"] = t.command.front();
    spec["args"] = std::vector<std::string>(t.command.begin() + 1, t.command.end());
  }
  if (t.timeout_ms) spec["discoveryTimeoutMs"] = *t.timeout_ms;
  if (t.call_timeout_ms) spec["timeout"] = *t.call_timeout_ms;
  auto parsed = parse_server_config(verb, spec, config_scope::session, {});
  if (!parsed.config) {
    why = parsed.error->message;
    return std::nullopt;
  }
  connection_config cc;
  cc.server = *parsed.config;
  // A command the owner typed: it runs with the owner's environment, as
  // the shell would run it (never MCPRT_*, still).
  cc.server.effective_sandbox.inherit_all_env = true;
  auto policy = parse_elicitation_policy(t.on_elicitation);
  // `ask` needs a host to ask; a one-shot command has none.
  if (!policy || *policy == elicitation_policy::ask) {
    why = "--on-elicitation expects decline or accept-defaults, not '" + escape_for_display(t.on_elicitation) + "'";
    return std::nullopt;
  }
  cc.features.elicitation = *policy;
  if (!t.roots.empty()) {
    std::vector<mcp_root> roots;
    for (auto& dir : t.roots) {
      if (dir.empty()) {
        why = "--root expects a directory";
        return std::nullopt;
      }
      std::error_code ec;
      roots.push_back(root_for_folder(std::filesystem::absolute(dir, ec).lexically_normal().string()));
    }
    cc.features.roots = std::move(roots);
  }
  return cc;
}

/// The OAuth client of a one-shot --http target: interactive (the URL is
/// printed on stderr and opened with --browser), credentials kept in memory
/// only, so a one-shot command leaves no token behind.
std::shared_ptr<io::http_auth> make_auth(const one_shot_target& t, const std::string& url, std::string& why) {
  io::oauth_settings settings;
  if (t.oauth) {
    auto j = nlohmann::json::parse(*t.oauth, nullptr, false);
    if (j.is_discarded()) {
      why = "--oauth expects a JSON object";
      return nullptr;
    }
    std::string error;
    auto parsed = io::oauth_settings::from_json(j, &error);
    if (!parsed) {
      why = "--oauth: " + error;
      return nullptr;
    }
    settings = std::move(*parsed);
  }
  io::oauth_interaction interaction;
  interaction.interactive = true;
  interaction.browser_command = t.browser.value_or("");
  if (t.auth_timeout_ms) interaction.callback_timeout = std::chrono::milliseconds(*t.auth_timeout_ms);
  interaction.on_authorization_url = [](const std::string& u) {
    std::cerr << "mcprt: authorize in a browser: " << terminal_line(u) << "\n";
  };
  return std::make_shared<io::oauth_client>(url, std::move(settings), std::move(interaction),
                                            std::make_shared<io::memory_credential_store>());
}

/// Connects to the target, runs `work` once the connection is up, and shuts
/// the server down. `work` returns the exit code, or sets `failure`.
int with_connection(const one_shot_target& target, const char* verb,
                    const std::function<int(caf::scoped_actor&, connection_actor&, std::string& failure)>& work) {
  // The command reports its outcome in one line of its own.
  spdlog::set_level(spdlog::level::off);
  std::string why;
  auto cc = make_config(target, verb, why);
  if (!cc) {
    std::cerr << "mcprt " << verb << ": " << why << "\n";
    return exit_usage;
  }

  // Stopped in this order: the actors (awaited below), the I/O threads that
  // send to them, the actor system. An I/O thread may still be waking a
  // worker for its last message when the actor is done; the scheduler must
  // not be destroyed under it.
  connection_io::auth_factory auth;
  if (target.http_url) {
    auto made = make_auth(target, *target.http_url, why);
    if (!why.empty()) {
      std::cerr << "mcprt " << verb << ": " << why << "\n";
      return exit_usage;
    }
    auth = [made](const server_config&) { return made; };
  } else if (target.oauth || target.browser) {
    std::cerr << "mcprt " << verb << ": --oauth and --browser need --http URL\n";
    return exit_usage;
  }

  one_shot_config cfg;
  caf::actor_system sys{cfg};
  io::reactor reactor;
  io::http_client http;
  int rc = exit_failure;
  {
    caf::scoped_actor self{sys};
    cc->subscribers.push_back(caf::actor_cast<event_sink_actor>(self));
    auto conn = spawn_connection(sys, std::move(*cc), {&reactor, &http, auth});
    std::string failure;
    bool done = false;
    // The connection enforces the discovery timeout itself; the margin here
    // only guards against a bug leaving this loop waiting forever.
    auto guard = std::chrono::milliseconds(target.timeout_ms.value_or(30000) + 10000);
    while (!done) {
      self->receive(
        [&](client_update& u) {
          if (u.status == connection_status::connected) {
            done = true;
          } else if (u.status == connection_status::error || u.status == connection_status::disconnected
                     || u.status == connection_status::needs_auth) {
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
      try {
        rc = work(self, conn, failure);
      } catch (const std::exception& e) {
        failure = e.what();
      }
    }
    self->request(conn, std::chrono::seconds(10), atom::stop_v).receive([](bool) {}, [](caf::error&) {});
    if (!failure.empty()) {
      std::cerr << "mcprt " << verb << " failed: " << terminal_line(failure) << "\n";
      rc = exit_failure;
    }
    self->send_exit(conn, caf::exit_reason::user_shutdown);
  }
  sys.await_all_actors_done();
  return rc;
}

/// ": " and the first text part of a tool result, cut short; "" when none.
std::string first_text(const nlohmann::json& result) {
  if (!result.is_object() || !result.contains("content") || !result["content"].is_array()) return {};
  for (auto& part : result["content"]) {
    if (!part.is_object() || !part.contains("text") || !part["text"].is_string()) continue;
    auto text = part["text"].get<std::string>();
    if (text.size() > 300) text = text.substr(0, 300) + "...";
    return ": " + text;
  }
  return {};
}

} // namespace


int run_inspect(const inspect_options& opts) {
  return with_connection(opts.target, "inspect", [&](caf::scoped_actor& self, connection_actor& conn, std::string& failure) {
    int rc = exit_failure;
    self->request(conn, caf::infinite, atom::info_v)
      .receive(
        [&](connection_info& info) {
          if (opts.json) std::cout << terminal_json(to_json(info), 2) << "\n";
          else print_human(info, std::cout);
          rc = exit_ok;
        },
        [&](caf::error& err) { failure = describe(self->system(), err); });
    return rc;
  });
}

int run_one_shot_call(const one_shot_call_options& opts) {
  auto arguments = nlohmann::json::parse(opts.arguments.empty() ? "{}" : opts.arguments, nullptr, false);
  if (arguments.is_discarded() || !arguments.is_object()) {
    std::cerr << "mcprt call: the arguments must be a JSON object, e.g. '{\"text\": \"hi\"}'\n";
    return exit_usage;
  }
  return with_connection(opts.target, "call", [&](caf::scoped_actor& self, connection_actor& conn, std::string& failure) {
    int rc = exit_failure;
    // The session enforces the call timeout; caf::infinite leaves it to it.
    self->request(conn, caf::infinite, atom::call_v, opts.tool, json_value{arguments})
      .receive(
        [&](json_value& result) {
          rc = print_tool_result(result.value, opts.json, std::cout);
          if (rc != exit_ok) failure = "tool '" + opts.tool + "' reported an error" + first_text(result.value);
        },
               [&](caf::error& err) { failure = describe(self->system(), err); });
    return rc;
  });
}

} // namespace mcprt::cli
