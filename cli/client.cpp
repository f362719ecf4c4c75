// The commands that talk to a running daemon over its HTTP API: status,
// events, restart, call, and approve / reject when a daemon runs.

#include "cli/client.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <csignal>
#include <thread>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/daemon_file.hpp"
#include "cli/exit_codes.hpp"
#include "cli/terminal_output.hpp"
#include "core/sse_parser.hpp"
#include "io/http_client.hpp"
#include "io/oauth_client.hpp"
#include "core/untrusted_text.hpp"

namespace mcprt::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct connection {
  std::string url;
  std::string token;
  std::string error; // why there is none
  std::optional<verified_daemon> daemon; // set when found through daemon.json
};

/// Whether this command line was typed at a terminal: stdin is one and
/// this process is in its foreground. An MCP client that spawns `mcprt`
/// from a repository's `.mcp.json` gives it pipes, and its arguments are
/// the repository's.
bool typed_at_terminal() {
  return ::isatty(STDIN_FILENO) == 1 && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
}

/// Where the commands send requests: an explicit --url, else the daemon of
/// the workspace after the local checks of check_daemon. A token goes to
/// an explicit --url only when it is a daemon of this user on this machine,
/// or when the owner typed the command. Nothing is sent here.
connection resolve(const client_flags& f) {
  connection c;
  if (!f.token_file.empty()) {
    auto t = read_token_file(f.token_file);
    if (!t.error.empty()) {
      c.error = t.error;
      return c;
    }
    c.token = t.token;
  }
  if (!f.url.empty()) {
    c.url = f.url;
    if (c.url.rfind("http://", 0) != 0 && c.url.rfind("https://", 0) != 0) c.url = "http://" + c.url;
    while (!c.url.empty() && c.url.back() == '/')
      c.url.pop_back();
    if (!c.token.empty()) {
      auto why = check_owner_daemon_url(c.url);
      if (!why.empty() && !typed_at_terminal())
        c.error = "not sending the token of --token-file to --url " + escape_for_display(c.url)
                  + ": it is no daemon of yours on this machine (" + why
                  + "), and the command was not typed at a terminal (arguments from a repository's .mcp.json "
                    "could name any file and any URL). Drop --url to reach the workspace's daemon through "
                    "<workspace>/.mcprt/daemon.json, or run the command yourself in a terminal";
    }
    return c;
  }
  std::error_code ec;
  auto ws = fs::absolute(f.workspace, ec).lexically_normal().string();
  auto check = check_daemon(ws);
  if (!check.daemon) {
    c.error = check.error;
    if (check.absent) c.error += "; start one with `mcprt serve --workspace " + ws + "` or pass --url";
    return c;
  }
  c.daemon = check.daemon;
  c.url = check.daemon->url;
  if (c.token.empty()) c.token = check.daemon->token;
  return c;
}

/// What a request to the daemon got: the answer, or why there was none.
struct reply_data {
  int status = 0;
  std::string body;
};
struct reply {
  std::optional<reply_data> answer;
  io::http_failure failure = io::http_failure::none;
  std::string error; // why there is no answer
  explicit operator bool() const { return answer.has_value(); }
  const reply_data* operator->() const { return &*answer; }
};

/// Blocking requests to the daemon, for a command's life, on the one HTTP
/// client every mcprt HTTP path uses.
class daemon_client {
public:
  daemon_client(const connection& c, std::chrono::seconds read_timeout) : c_(c), read_timeout_(read_timeout) {}
  void set_read_timeout(std::chrono::milliseconds t) { read_timeout_ = t; }
  reply Get(const std::string& path) { return send("GET", path, {}); }
  reply Post(const std::string& path, const std::string& body, const char* = nullptr) {
    return send("POST", path, body);
  }
  reply Delete(const std::string& path) { return send("DELETE", path, {}); }

  io::http_request request(const char* method, const std::string& path) const {
    io::http_request req;
    req.method = method;
    req.url = c_.url + path;
    req.connect_timeout = std::chrono::seconds(3);
    req.idle_timeout = read_timeout_;
    // Our own daemon on loopback: never through a proxy.
    req.proxy = "direct";
    if (!c_.token.empty()) req.headers.emplace_back("Authorization", "Bearer " + c_.token);
    return req;
  }
  io::http_client& http() { return http_; }

private:
  reply send(const char* method, const std::string& path, const std::string& body) {
    auto req = request(method, path);
    if (std::string(method) == "POST") {
      req.headers.emplace_back("Content-Type", "application/json");
      req.body = body;
    }
    auto r = http_.fetch(std::move(req), 64u << 20);
    reply out;
    if (!r.outcome.ok()) {
      out.failure = r.outcome.failure;
      out.error = r.outcome.reason;
      return out;
    }
    out.answer = reply_data{r.head.status, std::move(r.body)};
    return out;
  }

  const connection& c_;
  std::chrono::milliseconds read_timeout_;
  io::http_client http_;
};

std::unique_ptr<daemon_client> make_client(const connection& c, long read_timeout_s) {
  return std::make_unique<daemon_client>(c, std::chrono::seconds(read_timeout_s));
}

/// One line saying why a request failed (what the daemon said, escaped:
/// it may quote a server's output).
std::string describe_failure(const connection& c, const reply& r) {
  if (!r) return "cannot reach the daemon at " + c.url + ": " + r.error;
  auto j = json::parse(r->body, nullptr, false);
  std::string msg = j.is_object() && j.contains("message") && j["message"].is_string()
                      ? j["message"].get<std::string>()
                      : r->body.substr(0, 500);
  if (j.is_object() && j.contains("remedy") && j["remedy"].is_string()
      && msg.find(j["remedy"].get<std::string>()) == std::string::npos)
    msg += " — " + j["remedy"].get<std::string>();
  return "HTTP " + std::to_string(r->status) + ": " + escape_for_display(msg);
}

/// The daemon proves it is the one daemon.json names: its /healthz echoes
/// the instance id recorded there. "" when it does, else why not. Only
/// after check_daemon: the token goes to a socket of the verified process.
std::string prove_instance(const connection& c, daemon_client& cli) {
  if (!c.daemon) return {};
  if (c.daemon->instance.empty())
    return "the daemon file records no instance id (written by an older mcprt?): restart the daemon";
  auto r = cli.Get("/healthz");
  if (!r || r->status != 200) return describe_failure(c, r);
  auto j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("instance") || !j["instance"].is_string()
      || j["instance"].get<std::string>() != c.daemon->instance)
    return "the daemon at " + c.url + " is not the one the daemon file names (its instance id differs)";
  return {};
}

std::string pad(const std::string& s, std::size_t w) {
  return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' ');
}

/// A value for the terminal: strings escaped (names, reasons and errors
/// may come from a repository or a server).
std::string str(const json& j) {
  if (j.is_null()) return "-";
  if (j.is_string()) return escape_for_display(j.get<std::string>());
  return dump_json(j);
}

std::string listed_json_names(const json& arr) {
  std::string out;
  if (arr.is_array())
    for (auto& x : arr)
      out += (out.empty() ? "" : ", ") + str(x);
  return out.empty() ? "-" : out;
}

void status_table(const json& s, std::ostream& os) {
  os << "workspace " << str(s.value("workspace", json(nullptr)))
     << (s.value("trusted", true) ? "" : " (untrusted: nothing starts)");
  if (s.contains("reconcile") && s["reconcile"].is_object()) {
    auto& r = s["reconcile"];
    os << "  generation " << str(r.value("generation", json(0)))
       << (r.value("in_progress", false) ? " (reconciling)" : "");
    if (r.contains("last_error") && !r["last_error"].is_null()) os << "  last error: " << str(r["last_error"]);
  }
  os << "\n\n";
  const json servers = s.value("servers", json::array());
  if (servers.empty()) {
    os << "no MCP servers configured\n";
  } else {
    std::size_t w = 6;
    for (auto& x : servers)
      w = std::max(w, str(x.value("name", json(""))).size() + 2);
    os << pad("NAME", w) << pad("STATUS", 14) << pad("TOOLS", 7) << pad("SCOPE", 11) << "REASON\n";
    for (auto& x : servers) {
      auto name = str(x.value("name", json("")));
      std::string reason = str(x.value("reason", json(nullptr)));
      if (reason == "pending_approval") reason += " (run `mcprt approve " + name + "`)";
      if (reason == "needs_auth") reason += " (run `mcprt auth " + name + "`)";
      if (x.contains("last_error") && !x["last_error"].is_null()) reason += " last error: " + str(x["last_error"]);
      os << pad(name, w) << pad(str(x.value("status", json(""))), 14) << pad(str(x.value("tools", json(0))), 7)
         << pad(str(x.value("scope", json(""))), 11) << reason << "\n";
    }
  }
  os << "\n";
  const json budgets = s.value("budgets", json::array());
  if (budgets.empty()) os << "budget: none\n";
  for (auto& b : budgets)
    os << "budget: " << str(b.value("scope", json(""))) << " " << str(b.value("reserved_count", json(0))) << "/"
       << (b.value("budget", json(nullptr)).is_null() ? "unlimited" : str(b["budget"])) << " ("
       << str(b.value("mode", json(""))) << ", " << str(b.value("status", json(""))) << "), reserved "
       << listed_json_names(b.value("reserved", json::array())) << ", refused " << listed_json_names(b.value("refused", json::array()))
       << "\n";
  const json fleet = s.value("fleet", json(nullptr));
  if (fleet.is_object()) {
    // The fleet's counts are as of this node's last renewal.
    os << "fleet: " << str(fleet.value("address", json(""))) << " " << str(fleet.value("state", json("")))
       << ", held here " << str(fleet.value("held", json(0))) << ", fleet "
       << str(fleet.value("reserved_count", json(0))) << "/"
       << (fleet.value("budget", json(nullptr)).is_null() ? "unlimited" : str(fleet["budget"])) << " over "
       << str(fleet.value("nodes", json(0))) << " nodes";
    if (fleet.contains("error") && !fleet["error"].is_null()) os << " (" << str(fleet["error"]) << ")";
    os << "\n";
  }
  const json pool = s.value("pool", json(nullptr));
  if (pool.is_null()) {
    os << "pool: off (each session runs its own servers)\n";
  } else {
    auto entries = pool.value("entries", json::array());
    os << "pool: " << entries.size() << " entries, " << str(pool.value("subprocess_count", json(0)))
       << " subprocesses\n";
  }
}

/// Percent-encodes a server name for a URL path segment.
std::string encode_segment(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out.push_back(static_cast<char>(ch));
    } else {
      out.push_back('%');
      out.push_back(hex[ch >> 4]);
      out.push_back(hex[ch & 15]);
    }
  }
  return out;
}

/// One readable line for an SSE frame: `#SEQ KIND key=value ...`.
std::string event_line(const std::string& id, const std::string& kind, const std::string& data) {
  std::string out = "#" + (id.empty() ? "?" : escape_for_display(id)) + " "
                    + (kind.empty() ? "message" : escape_for_display(kind));
  auto j = json::parse(data, nullptr, false);
  if (j.is_object()) {
    // Who and what first; the connection id is noise on a terminal.
    for (auto key : {"server", "name", "status"})
      if (j.contains(key) && j[key].is_string()) {
        out += " " + str(j[key]);
        j.erase(key);
      }
    j.erase("connection_id");
    for (auto& [k, v] : j.items()) {
      if (v.is_array()) out += " " + escape_for_display(k) + "=[" + (v.empty() ? "" : listed_json_names(v)) + "]";
      else out += " " + escape_for_display(k) + "=" + str(v);
    }
  } else if (!data.empty()) {
    out += " " + escape_for_display(data);
  }
  return out;
}

} // namespace

int run_status(const client_flags& f) {
  auto c = resolve(f);
  if (!c.error.empty()) {
    std::cerr << "mcprt status: " << c.error << "\n";
    return exit_failure;
  }
  auto cli = make_client(c, 30);
  if (auto why = prove_instance(c, *cli); !why.empty()) {
    std::cerr << "mcprt status: " << why << "\n";
    return exit_failure;
  }
  auto r = cli->Get("/workspace/mcp");
  if (!r || r->status != 200) {
    std::cerr << "mcprt status: " << describe_failure(c, r) << "\n";
    return exit_failure;
  }
  auto j = json::parse(r->body, nullptr, false);
  if (!j.is_object()) {
    std::cerr << "mcprt status: the daemon answered something that is not a JSON object\n";
    return exit_failure;
  }
  if (f.json) std::cout << terminal_json(j, 2) << "\n";
  else status_table(j, std::cout);
  return exit_ok;
}

int run_events(const client_flags& f, std::optional<unsigned long long> since) {
  auto c = resolve(f);
  if (!c.error.empty()) {
    std::cerr << "mcprt events: " << c.error << "\n";
    return exit_failure;
  }
  std::signal(SIGPIPE, SIG_IGN);
  // Keep-alive comments arrive every 15 s; a minute of silence is a dead daemon.
  auto cli = make_client(c, 60);
  if (auto why = prove_instance(c, *cli); !why.empty()) {
    std::cerr << "mcprt events: " << why << "\n";
    return exit_failure;
  }
  auto req = cli->request("GET", "/workspace/mcp/events");
  req.headers.emplace_back("Accept", "text/event-stream");
  if (since) req.headers.emplace_back("Last-Event-ID", std::to_string(*since));
  // Printed on the client's loop thread, as the events come; this thread
  // waits for the end.
  std::mutex mu;
  std::condition_variable cv;
  std::optional<io::http_outcome> outcome;
  std::string error_body;
  int status = 0;
  sse_parser parser(16u << 20);
  io::http_handlers h;
  h.on_head = [&](const io::http_response_head& head) {
    status = head.status;
    if (status == 200) std::cerr << "following " << c.url << "/workspace/mcp/events (Ctrl-C stops)\n";
    return true;
  };
  h.on_data = [&](std::string_view bytes) {
    if (status != 200) {
      if (error_body.size() < 4096) error_body.append(bytes.substr(0, 4096 - error_body.size()));
      return true;
    }
    return parser.feed(bytes, [&](sse_parser::event&& e) {
      if (e.type == "message" && e.data.empty()) return; // a comment (keep-alive)
      std::cout << event_line(e.id, e.type, e.data) << std::endl;
    });
  };
  h.on_done = [&](const io::http_outcome& o) {
    std::lock_guard<std::mutex> lock(mu);
    outcome = o;
    cv.notify_all();
  };
  cli->http().start(std::move(req), std::move(h));
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return outcome.has_value(); });
  }
  if (status != 200) {
    if (!outcome->got_head) {
      std::cerr << "mcprt events: cannot reach the daemon at " << c.url << ": " << outcome->reason << "\n";
    } else {
      auto j = json::parse(error_body, nullptr, false);
      std::cerr << "mcprt events: HTTP " << status << ": "
                << (j.is_object() && j.contains("message") ? str(j["message"]) : escape_for_display(error_body)) << "\n";
    }
    return exit_failure;
  }
  std::cerr << "the event stream ended\n";
  return exit_ok;
}

int run_restart(const client_flags& f, const std::string& name) {
  auto c = resolve(f);
  if (!c.error.empty()) {
    std::cerr << "mcprt restart: " << c.error << "\n";
    return exit_failure;
  }
  auto cli = make_client(c, 90);
  if (auto why = prove_instance(c, *cli); !why.empty()) {
    std::cerr << "mcprt restart: " << why << "\n";
    return exit_failure;
  }
  auto r = cli->Post("/workspace/mcp/" + encode_segment(name) + "/restart", "", "application/json");
  if (!r || r->status != 200) {
    std::cerr << "mcprt restart: " << describe_failure(c, r) << "\n";
    return r && r->status == 404 ? exit_usage : exit_failure;
  }
  auto j = json::parse(r->body, nullptr, false);
  if (f.json) {
    std::cout << terminal_json(j, 2) << "\n";
    return exit_ok;
  }
  auto results = j.is_object() ? j.value("results", json::array()) : json::array();
  if (results.empty()) std::cout << name << ": nothing to restart (no running connection)\n";
  bool all = true;
  for (auto& x : results) {
    bool ok = x.value("restarted", false);
    all = all && ok;
    std::cout << name << " " << str(x.value("id", json(""))).substr(0, 12) << ": "
              << (ok ? "restarted in " + str(x.value("duration_ms", json(0))) + " ms"
                     : "not restarted: " + str(x.value("reason", json(nullptr))))
              << "\n";
  }
  return all ? exit_ok : exit_failure;
}

int run_call(const client_flags& f, const std::string& server, const std::string& tool, const std::string& args) {
  auto arguments = json::parse(args.empty() ? "{}" : args, nullptr, false);
  if (arguments.is_discarded() || !arguments.is_object()) {
    std::cerr << "mcprt call: the arguments must be a JSON object, e.g. '{\"text\": \"hi\"}'\n";
    return exit_usage;
  }
  auto c = resolve(f);
  if (!c.error.empty()) {
    std::cerr << "mcprt call: " << c.error << "\n";
    return exit_failure;
  }
  auto cli = make_client(c, 120);
  if (auto why = prove_instance(c, *cli); !why.empty()) {
    std::cerr << "mcprt call: " << why << "\n";
    return exit_failure;
  }
  json body{{"server", server}, {"tool", tool}, {"arguments", arguments}};
  auto r = cli->Post("/workspace/mcp/tools/call", body.dump(), "application/json");
  if (!r || r->status != 200) {
    std::cerr << "mcprt call: " << describe_failure(c, r) << "\n";
    return exit_failure;
  }
  auto j = json::parse(r->body, nullptr, false);
  if (j.is_discarded()) {
    std::cout << terminal_text(r->body) << "\n";
    return exit_ok;
  }
  return print_tool_result(j, f.json, std::cout);
}

std::optional<int> decide_via_daemon(const client_flags& f, const std::string& name, bool approve,
                                     const std::string& own_store) {
  connection c;
  if (!f.token_file.empty()) {
    auto t = read_token_file(f.token_file);
    if (!t.error.empty()) {
      std::cerr << "mcprt: " << t.error << "\n";
      return exit_usage;
    }
    c.token = t.token;
  }
  std::error_code ec;
  auto check = check_daemon(fs::absolute(f.workspace, ec).lexically_normal().string());
  if (!check.daemon) {
    // No daemon (or a file nobody should trust): the store is written
    // directly, and the token goes nowhere.
    if (!check.absent) std::cerr << "mcprt: warning: " << check.error << "; writing the approvals store directly\n";
    return std::nullopt;
  }
  c.daemon = check.daemon;
  c.url = check.daemon->url;
  if (c.token.empty()) c.token = check.daemon->token;
  if (!own_store.empty()) {
    // A daemon file without the field comes from an older daemon: trust it.
    auto& theirs = c.daemon->approvals;
    if (!theirs.empty() && theirs != own_store) {
      std::cerr << "mcprt: note: the daemon at " << c.url << " keeps approvals in " << escape_for_display(theirs)
                << "; writing " << own_store << " instead, which that daemon does not read\n";
      return std::nullopt;
    }
  }
  auto cli = make_client(c, 60);
  auto health = cli->Get("/healthz");
  if (!health) return std::nullopt; // nobody answers: the daemon is going away
  if (health->status == 401) {
    std::cerr << "mcprt: " << describe_failure(c, health) << "\n";
    return exit_usage;
  }
  if (auto why = prove_instance(c, *cli); !why.empty()) {
    std::cerr << "mcprt: warning: " << why << "; writing the approvals store directly\n";
    return std::nullopt;
  }
  auto r = cli->Post("/workspace/mcp/" + encode_segment(name) + (approve ? "/approve" : "/reject"), "",
                     "application/json");
  if (r && r->status == 200) {
    std::cout << (approve ? "approved " : "rejected ") << name << " (through the daemon at " << c.url << ")\n";
    return exit_ok;
  }
  std::cerr << "mcprt: " << describe_failure(c, r) << "\n";
  if (r && (r->status == 404 || r->status == 409 || r->status == 401)) return exit_usage;
  return exit_failure;
}

std::vector<std::string> servers_needing_auth(const std::string& workspace) {
  std::vector<std::string> out;
  std::error_code ec;
  auto check = check_daemon(fs::absolute(workspace, ec).lexically_normal().string());
  if (!check.daemon) return out;
  connection c;
  c.daemon = check.daemon;
  c.url = check.daemon->url;
  if (c.token.empty()) c.token = check.daemon->token;
  auto cli = make_client(c, 10);
  if (!prove_instance(c, *cli).empty()) return out;
  auto r = cli->Get("/workspace/mcp");
  if (!r || r->status != 200) return out;
  auto j = json::parse(r->body, nullptr, false);
  if (!j.is_object()) return out;
  for (auto& s : j.value("servers", json::array()))
    if (s.is_object() && s.value("reason", json(nullptr)) == json("needs_auth") && s.contains("name") && s["name"].is_string())
      out.push_back(s["name"].get<std::string>());
  return out;
}

std::string browser_command(const std::string& given) {
  if (!given.empty()) return given;
  // A desktop has xdg-open; a server has nothing: the URL is printed.
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');)
      if (!dir.empty() && ::access((dir + "/xdg-open").c_str(), X_OK) == 0) return "xdg-open";
  }
  return {};
}

std::optional<int> auth_via_daemon(const client_flags& f, const std::string& name, const auth_flags& a) {
  // One deadline for the whole command, whatever the daemon or the
  // authorization server does meanwhile.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(a.timeout_ms);
  connection c;
  if (!f.url.empty() || !f.token_file.empty()) {
    c = resolve(f);
    if (!c.error.empty()) {
      std::cerr << "mcprt auth: " << c.error << "\n";
      return exit_failure;
    }
  } else {
    std::error_code ec;
    auto check = check_daemon(fs::absolute(f.workspace, ec).lexically_normal().string());
    if (!check.daemon) {
      if (!check.absent) std::cerr << "mcprt: warning: " << check.error << "; authorizing without the daemon\n";
      return std::nullopt;
    }
    c.daemon = check.daemon;
    c.url = check.daemon->url;
    if (c.token.empty()) c.token = check.daemon->token;
  }
  auto cli = make_client(c, 60);
  if (auto why = prove_instance(c, *cli); !why.empty()) {
    std::cerr << "mcprt auth: " << why << "\n";
    return exit_failure;
  }
  const auto path = "/workspace/mcp/" + encode_segment(name) + "/auth";
  if (a.logout) {
    auto r = cli->Delete(path);
    if (!r || r->status != 200) {
      std::cerr << "mcprt auth: " << describe_failure(c, r) << "\n";
      return r && r->status == 404 ? exit_usage : exit_failure;
    }
    auto j = json::parse(r->body, nullptr, false);
    bool forgot = j.is_object() && j.value("forgotten", false);
    std::cout << (forgot ? "forgot the OAuth credentials of " : "no OAuth credentials were stored for ") << name << "\n";
    return exit_ok;
  }
  // The daemon's flow gets what is left; its answer (why it failed) gets a
  // second more to arrive.
  auto left_ms = std::max<long long>(
    1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
  cli->set_read_timeout(std::chrono::milliseconds(left_ms + 1000));
  auto r = cli->Post(path, json{{"timeout_ms", left_ms}}.dump(), "application/json");
  if (!r && r.failure == io::http_failure::idle_timeout) {
    std::cerr << "mcprt auth: " << name << ": no authorization URL within " << a.timeout_ms << " ms\n";
    return exit_failure;
  }
  if (!r || r->status != 200) {
    std::cerr << "mcprt auth: " << describe_failure(c, r) << "\n";
    return r && r->status == 404 ? exit_usage : exit_failure;
  }
  auto j = json::parse(r->body, nullptr, false);
  auto url = j.is_object() && j.contains("authorization_url") && j["authorization_url"].is_string()
               ? j["authorization_url"].get<std::string>()
               : std::string();
  int browser = -1;
  if (!url.empty()) {
    std::cout << "Open this URL to authorize " << name << ":\n  " << terminal_line(url) << "\n" << std::flush;
    browser = io::start_browser(browser_command(a.browser), url);
  }
  // The daemon connects the server once the tokens are stored: wait for it.
  int rc = exit_failure;
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto s = cli->Get("/workspace/mcp"); s && s->status == 200) {
      auto snap = json::parse(s->body, nullptr, false);
      if (snap.is_object())
        for (auto& srv : snap.value("servers", json::array()))
          if (srv.is_object() && srv.value("name", "") == name) {
            last = str(srv.value("status", json("")));
            if (last == "connected") rc = exit_ok;
          }
    }
    if (rc == exit_ok) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  if (browser > 0) {
    if (::waitpid(browser, nullptr, WNOHANG) == 0) ::kill(-browser, SIGTERM);
    ::waitpid(browser, nullptr, 0);
  }
  if (rc == exit_ok) std::cout << "authorized " << name << "; it is connected\n";
  else std::cerr << "mcprt auth: " << name << " did not connect within " << a.timeout_ms << " ms (status " << (last.empty() ? "unknown" : last) << ")\n";
  return rc;
}

} // namespace mcprt::cli
