// The commands that talk to a running daemon over its HTTP API: status,
// events, restart, call, and approve / reject when a daemon runs.

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cli/serve.hpp"

namespace mcprt::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int exit_ok = 0;
constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

/// A string field of `<ws>/.mcprt/daemon.json`, or "" when absent.
std::string daemon_file_field(const std::string& workspace, const char* field) {
  std::ifstream in(daemon_file(workspace));
  if (!in) return {};
  auto j = json::parse(in, nullptr, false);
  if (j.is_object() && j.contains(field) && j[field].is_string()) return j[field].get<std::string>();
  return {};
}

/// The daemon's URL from `<ws>/.mcprt/daemon.json`, or empty.
std::string url_from_daemon_file(const std::string& workspace) {
  return daemon_file_field(workspace, "url");
}

struct connection {
  std::string url;
  std::string token;
  std::string error; // why there is none
};

connection resolve(const client_flags& f) {
  connection c;
  c.url = f.url.empty() ? url_from_daemon_file(f.workspace) : f.url;
  if (c.url.empty()) {
    std::error_code ec;
    auto ws = fs::absolute(f.workspace, ec).lexically_normal().string();
    c.error = "no daemon runs for " + ws + " (no " + daemon_file(f.workspace) + "); start one with `mcprt serve --workspace "
              + ws + "` or pass --url";
    return c;
  }
  if (c.url.rfind("http://", 0) != 0 && c.url.rfind("https://", 0) != 0) c.url = "http://" + c.url;
  while (!c.url.empty() && c.url.back() == '/')
    c.url.pop_back();
  if (!f.token_file.empty()) {
    std::ifstream in(f.token_file);
    if (!in) {
      c.error = "cannot read --token-file '" + f.token_file + "'";
      return c;
    }
    std::getline(in, c.token);
    while (!c.token.empty() && std::isspace(static_cast<unsigned char>(c.token.back())))
      c.token.pop_back();
  }
  return c;
}

std::unique_ptr<httplib::Client> make_client(const connection& c, time_t read_timeout_s) {
  auto cli = std::make_unique<httplib::Client>(c.url);
  cli->set_connection_timeout(3, 0);
  cli->set_read_timeout(read_timeout_s, 0);
  if (!c.token.empty()) cli->set_bearer_token_auth(c.token.c_str());
  return cli;
}

/// One line saying why a request failed.
std::string describe_failure(const connection& c, const httplib::Result& r) {
  if (!r) return "cannot reach the daemon at " + c.url + ": " + httplib::to_string(r.error());
  auto j = json::parse(r->body, nullptr, false);
  std::string msg = j.is_object() && j.contains("message") && j["message"].is_string()
                      ? j["message"].get<std::string>()
                      : r->body;
  if (j.is_object() && j.contains("remedy") && j["remedy"].is_string()
      && msg.find(j["remedy"].get<std::string>()) == std::string::npos)
    msg += " — " + j["remedy"].get<std::string>();
  return "HTTP " + std::to_string(r->status) + ": " + msg;
}

std::string pad(const std::string& s, std::size_t w) {
  return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' ');
}

std::string str(const json& j) {
  if (j.is_null()) return "-";
  if (j.is_string()) return j.get<std::string>();
  return j.dump();
}

std::string join(const json& arr) {
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
       << join(b.value("reserved", json::array())) << ", refused " << join(b.value("refused", json::array()))
       << "\n";
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
  std::string out = "#" + (id.empty() ? "?" : id) + " " + (kind.empty() ? "message" : kind);
  auto j = json::parse(data, nullptr, false);
  if (j.is_object()) {
    // Who and what first; the connection id is noise on a terminal.
    for (auto key : {"server", "name", "status"})
      if (j.contains(key) && j[key].is_string()) {
        out += " " + j[key].get<std::string>();
        j.erase(key);
      }
    j.erase("connection_id");
    for (auto& [k, v] : j.items()) {
      if (v.is_array()) out += " " + k + "=[" + (v.empty() ? "" : join(v)) + "]";
      else out += " " + k + "=" + str(v);
    }
  } else if (!data.empty()) {
    out += " " + data;
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
  if (f.json) std::cout << j.dump(2) << "\n";
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
  httplib::Headers headers;
  if (since) headers.emplace("Last-Event-ID", std::to_string(*since));
  std::string buf, error_body;
  int status = 0;
  auto r = cli->Get(
    "/workspace/mcp/events", headers,
    [&](const httplib::Response& res) {
      status = res.status;
      if (status == 200) std::cerr << "following " << c.url << "/workspace/mcp/events (Ctrl-C stops)\n";
      return true;
    },
    [&](const char* data, size_t len) {
      if (status != 200) {
        error_body.append(data, len);
        return true;
      }
      buf.append(data, len);
      std::size_t end;
      while ((end = buf.find("\n\n")) != std::string::npos) {
        std::string frame = buf.substr(0, end);
        buf.erase(0, end + 2);
        std::string id, kind, payload;
        std::istringstream in(frame);
        std::string line;
        while (std::getline(in, line)) {
          if (!line.empty() && line.back() == '\r') line.pop_back();
          if (line.rfind("id: ", 0) == 0) id = line.substr(4);
          else if (line.rfind("event: ", 0) == 0) kind = line.substr(7);
          else if (line.rfind("data: ", 0) == 0) payload += line.substr(6);
        }
        if (kind.empty() && payload.empty()) continue; // a comment (keep-alive)
        std::cout << event_line(id, kind, payload) << std::endl;
      }
      return true;
    });
  if (status != 200) {
    if (!r) {
      std::cerr << "mcprt events: " << describe_failure(c, r) << "\n";
    } else {
      auto j = json::parse(error_body, nullptr, false);
      std::cerr << "mcprt events: HTTP " << status << ": "
                << (j.is_object() && j.contains("message") ? str(j["message"]) : error_body) << "\n";
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
  auto r = cli->Post("/workspace/mcp/" + encode_segment(name) + "/restart", "", "application/json");
  if (!r || r->status != 200) {
    std::cerr << "mcprt restart: " << describe_failure(c, r) << "\n";
    return r && r->status == 404 ? exit_usage : exit_failure;
  }
  auto j = json::parse(r->body, nullptr, false);
  if (f.json) {
    std::cout << j.dump(2) << "\n";
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
  json body{{"server", server}, {"tool", tool}, {"arguments", arguments}};
  auto r = cli->Post("/workspace/mcp/tools/call", body.dump(), "application/json");
  if (!r || r->status != 200) {
    std::cerr << "mcprt call: " << describe_failure(c, r) << "\n";
    return exit_failure;
  }
  auto j = json::parse(r->body, nullptr, false);
  if (f.json || !j.is_object() || !j.contains("content") || !j["content"].is_array()) {
    std::cout << (j.is_discarded() ? r->body : j.dump(2)) << "\n";
  } else {
    // Text content as text; anything else as JSON.
    for (auto& part : j["content"]) {
      if (part.value("type", "") == "text" && part.contains("text") && part["text"].is_string())
        std::cout << part["text"].get<std::string>() << "\n";
      else std::cout << part.dump() << "\n";
    }
  }
  return j.is_object() && j.value("isError", false) ? exit_failure : exit_ok;
}

std::optional<int> decide_via_daemon(const client_flags& f, const std::string& name, bool approve,
                                     const std::string& own_store) {
  auto c = resolve(f);
  if (c.url.empty()) return std::nullopt;
  if (!own_store.empty()) {
    // A daemon file without the field comes from an older daemon: trust it.
    auto theirs = daemon_file_field(f.workspace, "approvals");
    if (!theirs.empty() && theirs != own_store) {
      std::cerr << "mcprt: note: the daemon at " << c.url << " keeps approvals in " << theirs
                << "; writing " << own_store << " instead, which that daemon does not read\n";
      return std::nullopt;
    }
  }
  if (!c.error.empty()) {
    std::cerr << "mcprt: " << c.error << "\n";
    return exit_usage;
  }
  auto cli = make_client(c, 60);
  auto health = cli->Get("/healthz");
  if (!health) return std::nullopt; // a stale daemon file: nobody answers
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

} // namespace mcprt::cli
