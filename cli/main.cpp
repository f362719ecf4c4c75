// mcprt: keeps a workspace's MCP servers in step with its settings files.
// This file holds the command-line front end; the logic lives in core/.

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <list>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <future>

#include "io/reaper.hpp"
#include "core/approvals_store.hpp"
#include "core/definition_pin_store.hpp"
#include "core/oauth_token_store.hpp"
#include "mcprt/oauth_broker.hpp"
#include "mcprt/version.hpp"
#include "core/fingerprint.hpp"
#include "core/fingerprint_key.hpp"
#include "core/settings.hpp"
#include "cli/exit_codes.hpp"
#include "cli/terminal_output.hpp"
#include "cli/client.hpp"
#include "cli/gateway_stdio.hpp"
#include "cli/input_command.hpp"
#include "cli/one_shot.hpp"
#include "cli/budget_server.hpp"
#include "cli/serve.hpp"
#include "core/untrusted_text.hpp"
#include "core/workspace_view.hpp"

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using namespace mcprt;

namespace {

// Exit codes shared by the commands.
using mcprt::cli::exit_failure;
using mcprt::cli::exit_ok;
using mcprt::cli::exit_usage;

struct common_flags {
  std::string workspace = ".";
  std::string home;
  std::string profile_name = "mcprt";
  std::string mcp_config;
  std::string allowed_names;
  bool allowed_names_given = false;
  bool untrusted = false;
  bool json = false;
};

void add_workspace_flags(CLI::App* cmd, common_flags& f) {
  cmd->add_option("--workspace,-w", f.workspace, "Workspace directory (default: current directory)");
  cmd->add_option("--home", f.home, "Home directory holding user settings and approvals (default: $HOME)");
  cmd->add_option("--profile", f.profile_name, "Whose files to read: mcprt (.mcprt/ + .mcp.json), qwen, gemini, vscode (.vscode/mcp.json), "
                  "cursor (.cursor/mcp.json), claude (.mcp.json + ~/.claude.json)")
    ->check(CLI::IsMember(profile::names()));
  cmd->add_option("--mcp-config", f.mcp_config, "Extra servers file ({\"mcpServers\": ...}) above all settings");
}

std::optional<workspace_options> make_options(const common_flags& f) {
  workspace_options o;
  std::error_code ec;
  o.workspace = fs::absolute(f.workspace, ec);
  if (!fs::is_directory(o.workspace, ec)) {
    std::cerr << "mcprt: workspace '" << f.workspace << "' is not a directory\n";
    return std::nullopt;
  }
  std::string why;
  auto home = resolve_home(f.home, std::getenv("HOME"), &why);
  if (!home) {
    std::cerr << "mcprt: " << why << "\n";
    return std::nullopt;
  }
  o.home = *home;
  o.settings_profile = *profile::parse(f.profile_name);
  if (!f.mcp_config.empty()) o.mcp_config = fs::absolute(f.mcp_config, ec);
  if (f.allowed_names_given) o.launch_bound = split_name_list(f.allowed_names);
  o.trusted = !f.untrusted;
  return o;
}

fs::path approvals_path(const workspace_options& o) {
  return approvals_store::default_path(o.home, o.settings_profile.dir_name);
}

approvals_store open_approvals(const workspace_options& o) {
  return approvals_store(approvals_path(o));
}

// The fingerprint explain shows: the same keyed digest as the daemon's
// snapshot and events (same key file), or null when the key is unusable.
std::optional<fingerprint_key> explain_key(const workspace_options& o) {
  auto r = load_or_create_fingerprint_key(default_fingerprint_key_path(o.home, o.settings_profile.dir_name));
  if (!r.ok()) std::cerr << "mcprt: warning: " << escape_for_display(r.error) << "; fingerprints are not shown\n";
  return r.key;
}

std::string listed_names(const std::vector<std::string>& xs) {
  std::string out;
  for (auto& x : xs)
    out += (out.empty() ? "" : ", ") + escape_for_display(x);
  return out.empty() ? "-" : out;
}

// Reads the workspace as a command sees it; store warnings go to stderr.
workspace_view read_workspace(const workspace_options& opts, approvals_store& approvals) {
  input_store inputs(input_store::default_path(opts.home, opts.settings_profile.dir_name));
  auto view = load_workspace(opts, approvals, &inputs);
  for (auto& w : approvals.take_warnings())
    std::cerr << "mcprt: warning: " << w << "\n";
  for (auto& w : inputs.take_warnings())
    std::cerr << "mcprt: warning: " << escape_for_display(w) << "\n";
  return view;
}

// Which streamable-HTTP servers have OAuth tokens stored (never the tokens).
void read_oauth_state(workspace_view& view, const workspace_options& o) {
  oauth_token_store store(oauth_token_store::default_path(o.home, o.settings_profile.dir_name));
  for (auto& [name, cfg] : view.merged.servers) {
    auto url = oauth_server_url(cfg);
    if (!url) continue;
    std::string key(oauth_token_store::dynamic_client);
    if (auto i = cfg.spec.find("oauth"); i != cfg.spec.end() && i->is_object())
      if (auto id = i->find("clientId"); id != i->end() && id->is_string() && !id->get<std::string>().empty())
        key = id->get<std::string>();
    auto c = store.get(*url, key);
    view.oauth[name] = c && (!c->access_token.empty() || !c->refresh_token.empty()) ? "stored" : "none";
  }
  for (auto& w : store.take_warnings())
    std::cerr << "mcprt: warning: " << escape_for_display(w) << "\n";
}

int run_explain(const common_flags& f) {
  auto opts = make_options(f);
  if (!opts) return exit_usage;
  auto approvals = open_approvals(*opts);
  auto view = read_workspace(*opts, approvals);
  read_oauth_state(view, *opts);
  {
    definition_pin_store pins(definition_pin_store::default_path(opts->home, opts->settings_profile.dir_name));
    read_definition_pins(view, pins);
    for (auto& w : pins.take_warnings())
      std::cerr << "mcprt: warning: " << escape_for_display(w) << "\n";
  }
  // What a sandbox would have here: the reaper image's own probe.
  {
    auto line = io::reaper::probe_sandbox();
    if (line.empty()) {
      sandbox_support none;
      none.why_none = "the sandbox's image could not run here";
      view.sandbox = none;
    } else {
      view.sandbox = parse_sandbox_probe(line);
    }
  }
  // Only a running daemon knows that a server refused it; ask it, if any.
  for (auto& name : cli::servers_needing_auth(f.workspace))
    if (view.oauth.count(name)) view.oauth[name] = "needs_auth";
  // The workspace path and the files' text need not be UTF-8: replaced, not thrown.
  if (f.json) std::cout << cli::terminal_json(explain_json(view, opts->trusted, explain_key(*opts)), 2) << "\n";
  else write_explain_table(view, opts->trusted, std::cout);
  return view.errors.empty() ? exit_ok : exit_usage;
}

int run_decision(const common_flags& f, const std::string& name, approval_state decision) {
  auto opts = make_options(f);
  if (!opts) return exit_usage;
  auto approvals = open_approvals(*opts);
  auto view = read_workspace(*opts, approvals);
  for (auto& e : view.errors)
    std::cerr << "mcprt: warning: " << escape_for_display(e.path) << ":" << e.line << ":" << e.column << ": "
              << e.message << "\n";
  auto it = view.merged.servers.find(name);
  if (it == view.merged.servers.end()) {
    std::vector<std::string> names;
    for (auto& [n, c] : view.merged.servers)
      names.push_back(n);
    std::cerr << "mcprt: no server named '" << escape_for_display(name) << "' in " << escape_for_display(view.workspace)
              << " (configured: " << listed_names(names) << ")\n";
    return exit_usage;
  }
  auto& cfg = it->second;
  definition_pin_store pins(definition_pin_store::default_path(opts->home, opts->settings_profile.dir_name));
  if (!is_gated(cfg.scope) && decision == approval_state::approved) {
    read_definition_pins(view, pins);
    if (view.pins[name].policy.on) {
      try {
        pins.forget(view.workspace, name);
      } catch (const std::exception& e) {
        std::cerr << "mcprt: " << e.what() << "\n";
        return exit_failure;
      }
      std::cout << "approved the definitions " << name << " offers now (" << to_string(cfg.scope)
                << " settings: its next listing is pinned)\n";
      return exit_ok;
    }
  }
  if (!is_gated(cfg.scope)) {
    std::cerr << "mcprt: server '" << name << "' comes from " << to_string(cfg.scope)
              << " settings, which are trusted; only servers from .mcp.json and workspace settings need approval\n";
    return exit_usage;
  }
  auto hash = approval_hash(cfg);
  try {
    approvals.set(view.workspace, name, hash, decision);
    // The decision is over what the server offers from now on: its next
    // listing is pinned (core/definition_pins).
    pins.forget(view.workspace, name);
  } catch (const std::exception& e) {
    std::cerr << "mcprt: " << e.what() << "\n";
    return exit_failure;
  }
  std::cout << (decision == approval_state::approved ? "approved " : "rejected ") << name << " ("
            << to_string(cfg.scope) << ", config " << hash.substr(0, 12) << ") for " << view.workspace << "\n";
  return exit_ok;
}

// `mcprt auth` without a daemon: this process authorizes, serves the
// redirect and writes the credential file the daemon will read.
int run_auth(const common_flags& f, const std::string& name, const cli::auth_flags& a) {
  const auto started_at = std::chrono::steady_clock::now();
  auto opts = make_options(f);
  if (!opts) return exit_usage;
  auto approvals = open_approvals(*opts);
  auto view = read_workspace(*opts, approvals);
  auto it = view.merged.servers.find(name);
  if (it == view.merged.servers.end()) {
    std::vector<std::string> names;
    for (auto& [n, c] : view.merged.servers)
      names.push_back(n);
    std::cerr << "mcprt auth: no server named '" << escape_for_display(name) << "' in "
              << escape_for_display(view.workspace) << " (configured: " << listed_names(names) << ")\n";
    return exit_usage;
  }
  const auto file = oauth_token_store::default_path(opts->home, opts->settings_profile.dir_name);
  oauth_broker broker(file);
  if (a.logout) {
    try {
      bool forgot = broker.forget(it->second);
      std::cout << (forgot ? "forgot the OAuth credentials of " : "no OAuth credentials were stored for ") << name
                << "\n";
      return exit_ok;
    } catch (const std::exception& e) {
      std::cerr << "mcprt auth: " << e.what() << "\n";
      return exit_failure;
    }
  }
  // One deadline for every network step and the wait for the redirect, so
  // the command ends within --timeout-ms whatever the servers do.
  authorize_options ao;
  ao.browser_command = cli::browser_command(a.browser);
  ao.callback_timeout = std::chrono::milliseconds(a.timeout_ms);
  ao.url_timeout = std::chrono::milliseconds(a.timeout_ms);
  ao.deadline = started_at + std::chrono::milliseconds(a.timeout_ms);
  // Shared with the flow's thread: when the start fails because the flow
  // ended, that thread still reports the end after this function returned.
  // The flow ends by the deadline, so both answers come by then.
  auto ended = std::make_shared<std::promise<std::pair<bool, std::string>>>();
  auto done = ended->get_future();
  using start_answer = std::pair<std::optional<oauth_broker::started>, std::string>;
  auto began = std::make_shared<std::promise<start_answer>>();
  auto first = began->get_future();
  broker.begin_async(
    it->second, ao,
    [began](std::optional<oauth_broker::started> s, const std::string& why) { began->set_value({std::move(s), why}); },
    [ended](bool ok, const std::string& why) { ended->set_value({ok, why}); });
  auto [started, error] = first.get();
  if (!started) {
    std::cerr << "mcprt auth: " << escape_for_display(name) << ": " << escape_for_display(error) << "\n";
    return exit_failure;
  }
  if (!started->authorization_url.empty())
    std::cout << "Open this URL to authorize " << name << ":\n  " << escape_for_display(started->authorization_url)
              << "\n" << std::flush;
  auto [ok, why] = done.get();
  if (!ok) {
    std::cerr << "mcprt auth: " << escape_for_display(name) << ": " << escape_for_display(why) << "\n";
    return exit_failure;
  }
  std::cout << "authorized " << name << "; credentials stored in " << file.string() << "\n";
  return exit_ok;
}

} // namespace

int main(int argc, char** argv) {
  // A daemon that closes a connection mid-request (a refused body) must
  // give the client commands an error, not a silent death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"mcprt — keeps a workspace's MCP server connections in step with its settings files"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mcprt " MCPRT_VERSION);

  common_flags explain_flags;
  auto* explain = app.add_subcommand("explain", "Show which MCP servers would run in a workspace, and why the others would not. Starts no process.");
  add_workspace_flags(explain, explain_flags);
  explain->add_option("--allowed-mcp-server-names", explain_flags.allowed_names,
                      "Comma-separated upper bound on admitted servers (names or globs)")
    ->each([&](const std::string&) { explain_flags.allowed_names_given = true; });
  explain->add_flag("--untrusted", explain_flags.untrusted, "Treat the workspace folder as untrusted");
  explain->add_flag("--json", explain_flags.json, "Machine-readable output");

  common_flags approve_flags;
  std::string approve_name;
  auto* approve = app.add_subcommand("approve", "Approve a server from .mcp.json or workspace settings for its current config");
  approve->add_option("name", approve_name, "Server name")->required();
  add_workspace_flags(approve, approve_flags);

  common_flags reject_flags;
  std::string reject_name;
  auto* reject = app.add_subcommand("reject", "Reject a server from .mcp.json or workspace settings for its current config");
  reject->add_option("name", reject_name, "Server name")->required();
  add_workspace_flags(reject, reject_flags);

  cli::input_command input(app);

  // What a one-shot command (inspect, call --http / call -- COMMAND) offers
  // the server beyond listing and calling.
  auto add_one_shot_flags = [](CLI::App* cmd, cli::one_shot_target& t, long long& timeout) {
    cmd->add_option("--timeout-ms", timeout, "Discovery timeout (default 30000 for commands, 5000 for URLs)")
      ->check(CLI::PositiveNumber);
    cmd->add_option("--http", t.http_url, "Streamable-HTTP endpoint URL");
    cmd->add_option("--sse", t.sse_url, "Legacy HTTP+SSE (2024-11-05) event-stream URL");
    // One value per occurrence: a vector option would otherwise swallow the TOOL that follows.
    cmd->add_option("--header", t.headers, "HTTP header NAME:VALUE (repeatable; values are never printed)")
      ->allow_extra_args(false);
    cmd->add_option("--on-elicitation", t.on_elicitation,
                    "How to answer a server's elicitation/create: decline (default) or accept-defaults "
                    "(accept with the requested schema's defaults)")
      ->check(CLI::IsMember({"decline", "accept-defaults"}));
    cmd->add_option("--root", t.roots, "Offer DIR to the server as a root (repeatable; default: no roots capability)")
      ->allow_extra_args(false);
    cmd->add_option("--oauth", t.oauth,
                    "OAuth settings for --http as JSON, the `oauth` object of a server's settings "
                    "(clientId, clientSecret, clientMetadataUrl, scopes, grantType, privateKey, ...)");
    cmd->add_option("--browser", t.browser,
                    "Command that opens the authorization URL, given as its last argument "
                    "(default: print the URL only)");
    cmd->add_option("--auth-timeout-ms", t.auth_timeout_ms,
                    "How long to wait for the authorization redirect (default 300000)")
      ->check(CLI::PositiveNumber);
  };

  cli::inspect_options inspect_opts;
  long long inspect_timeout = 0;
  auto* inspect = app.add_subcommand("inspect", "Connect to one MCP server, list what it offers, and shut it down.\n"
                                                "  mcprt inspect [--json] [--timeout-ms T] -- COMMAND ARGS...\n"
                                                "  mcprt inspect --http URL [--header K:V]...\n"
                                                "  mcprt inspect --sse URL [--header K:V]...   (legacy HTTP+SSE)\n"
                                                "  --on-elicitation and --root: what mcprt offers the server as a client.");
  inspect->add_flag("--json", inspect_opts.json, "Machine-readable output");
  add_one_shot_flags(inspect, inspect_opts.target, inspect_timeout);
  inspect->add_option("command", inspect_opts.target.command, "Server command and its arguments (after --)");

  cli::budget_server_flags budget_server_flags;
  auto* budget_server = app.add_subcommand(
    "budget-server",
    "Hold one budget of server slots for a fleet of workspace daemons (`mcprt serve --fleet-budget HOST:PORT`),\n"
    "  over CAF's middleman, until SIGINT / SIGTERM. Prints `listening on caf+tls://HOST:PORT` first.\n"
    "  Always mutual TLS: without --caf-tls-*, the owner's own identity (<home>/.mcprt/caf/, made the first\n"
    "  time), so only processes that can read the owner's key connect: the owner's own `mcprt serve --fleet-budget`.\n"
    "  A slot is one server of one node; a node that stops renewing its lease loses its slots.\n"
    "  After a start it grants nothing new for --claim-grace-ms, while running nodes claim what they hold.");
  budget_server->add_option("--home", budget_server_flags.home,
                            "Home directory whose .mcprt/caf/ holds the owner's identity (default: $HOME)");
  budget_server->add_option("--caf-port", budget_server_flags.caf_port, "Port to publish on (default 0: any free port)");
  budget_server->add_option("--caf-host", budget_server_flags.caf_host,
                            "Address to listen on (default 127.0.0.1; another than loopback needs --caf-tls-*)");
  budget_server->add_option("--budget", budget_server_flags.budget, "Slots across the fleet, a positive integer");
  budget_server->add_option("--mode", budget_server_flags.mode, "enforce (refuse past the budget, default) or warn");
  budget_server->add_option("--lease-ms", budget_server_flags.lease_ms,
                            "A node that does not renew for this long loses its slots (default 10000)");
  budget_server->add_option("--claim-grace-ms", budget_server_flags.claim_grace_ms,
                            "After start, how long only claims of running servers are taken (default 1500)");
  budget_server->add_option("--caf-tls-cert", budget_server_flags.tls.cert,
                            "PEM certificate of this server, signed by the --caf-tls-ca");
  budget_server->add_option("--caf-tls-key", budget_server_flags.tls.key, "PEM private key of --caf-tls-cert");
  budget_server->add_option("--caf-tls-ca", budget_server_flags.tls.ca,
                            "PEM CA: only nodes with a certificate it signed can connect (with all three, "
                            "--caf-host may be any address; without them, the owner's own identity)");
  budget_server->add_option("--log-level", budget_server_flags.log_level, "trace, debug, info, warn, error (default info)")
    ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));

  cli::serve_flags serve_flags;
  auto* serve = app.add_subcommand("serve", "Run the workspace's MCP servers and serve the HTTP API until SIGINT / SIGTERM.\n"
                                            "  Prints `listening on http://HOST:PORT` first; writes <ws>/.mcprt/daemon.json.\n"
                                            "  ${VAR} in settings is read from this process's environment when the settings are read;\n"
                                            "  a change of the environment is not watched: restart the daemon to pick it up.");
  serve->add_option("--workspace,-w", serve_flags.workspace, "Workspace directory (default: current directory)");
  serve->add_option("--home", serve_flags.home, "Home directory holding user settings and approvals (default: $HOME)");
  serve->add_option("--profile", serve_flags.profile, "Whose files to read: mcprt (.mcprt/ + .mcp.json), qwen, gemini, vscode (.vscode/mcp.json), "
                  "cursor (.cursor/mcp.json), claude (.mcp.json + ~/.claude.json)")
    ->check(CLI::IsMember(profile::names()));
  serve->add_option("--mcp-config", serve_flags.mcp_config, "Extra servers file ({\"mcpServers\": ...}) above all settings");
  serve->add_option("--allowed-mcp-server-names", serve_flags.allowed_names,
                    "Comma-separated upper bound on admitted servers (names or globs)");
  serve->add_option("--budget", serve_flags.budget, "Workspace budget of server slots, a positive integer (or MCPRT_BUDGET)");
  serve->add_option("--budget-mode", serve_flags.budget_mode,
                    "off, warn or enforce (or MCPRT_BUDGET_MODE; default: warn with a budget, else off)");
  serve->add_flag("--no-pool", serve_flags.no_pool, "No shared pool and no workspace budget (as MCPRT_NO_POOL=1)");
  serve->add_flag("--untrusted", serve_flags.untrusted, "Treat the workspace folder as untrusted: no server starts");
  serve->add_option("--debounce-ms", serve_flags.debounce_ms, "Trailing debounce of settings edits (default 300)")
    ->check(CLI::NonNegativeNumber);
  serve->add_option("--listen", serve_flags.listen, "HOST:PORT to listen on (default 127.0.0.1:0: any free port)");
  serve->add_option("--token-file", serve_flags.token_file,
                    "File holding a bearer token every request must carry (required off loopback)");
  serve->add_option("--log-level", serve_flags.log_level, "trace, debug, info, warn, error, critical or off (default info)")
    ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  serve->add_option("--log-format", serve_flags.log_format, "text or json (one JSON object per line)")
    ->check(CLI::IsMember({"text", "json"}));
  serve->add_option("--threads", serve_flags.threads, "Scheduler worker threads (default 0: one per core)");
  serve->add_option("--scheduler", serve_flags.scheduler,
                    "mcprt (default: fair, per-worker FIFO with stealing) or caf (CAF 0.17's work stealing)")
    ->check(CLI::IsMember({"mcprt", "caf"}));
  serve->add_option("--allow-origin", serve_flags.allow_origins,
                    "Origin of a web page that may call the API, e.g. http://localhost:3000 (repeatable; "
                    "default: none, every request with an Origin header is refused)");
  serve->add_option("--max-connections", serve_flags.max_connections,
                    "Open HTTP connections (default 256); at the limit the oldest one still sending its request is closed");
  serve->add_option("--max-streams", serve_flags.max_streams, "Open streams of every kind together: events, GET /mcp, /sse, streamed tools/call answers (default 64); more get 503");
  serve->add_option("--max-calls-per-server", serve_flags.max_calls_per_server,
                    "Tool calls in flight per server (default 16); more get 429");
  serve->add_option("--io-poll-us", serve_flags.io_poll_us,
                    "After the I/O thread handled something, microseconds it keeps looking for the next event "
                    "before it sleeps (default 50; 0: sleep at once, for the least CPU)");
  serve->add_option("--request-timeout-ms", serve_flags.request_timeout_ms,
                    "Time a client has to send a whole request, headers and body (default 10000)");
  serve->add_option("--max-body-bytes", serve_flags.max_body_bytes, "Largest request body (default 1048576); more get 413");
  serve->add_option("--elicitation", serve_flags.elicitation,
                    "How servers' elicitation/create is answered unless their settings say otherwise: decline "
                    "(default), accept-defaults, or ask: an elicitation_requested event, answered by "
                    "POST /workspace/mcp/elicitations/{id}");
  serve->add_option("--sampling", serve_flags.sampling,
                    "off (default: not offered to servers) or ask: a sampling_requested event, answered by "
                    "POST /workspace/mcp/sampling/{id}");
  serve->add_flag("--no-gateway", serve_flags.no_gateway,
                  "do not serve MCP at /mcp (and /sse, /messages) for other clients");
  serve->add_option("--max-gateway-sessions", serve_flags.max_gateway_sessions,
                    "Open gateway sessions; more get 503 (default 4096, or 8 with --no-pool, where each spawns "
                    "its own servers)")
    ->check(CLI::Range(1, 4096));
  serve->add_option("--gateway-idle-timeout", serve_flags.gateway_idle_ms,
                    "ms: a gateway client's session with no request and no open stream for this long ends "
                    "(default 1800000)");
  serve->add_option("--host-request-timeout", serve_flags.host_request_timeout_ms,
                    "Milliseconds an asked request waits for its answer over HTTP before it is declined "
                    "(elicitation) or refused (sampling) (default 120000)");
  serve->add_option("--fleet-budget", serve_flags.fleet_budget,
                    "HOST:PORT of an `mcprt budget-server`: every server spawned also takes a slot of the fleet's "
                    "budget; while it cannot be reached, new servers are refused (its mode warn: started, with a warning) "
                    "and the snapshot's fleet.status says fleet_unreachable. Over mutual TLS: --caf-tls-*, or "
                    "the owner's own identity, the budget server's when it runs as the same owner");
  serve->add_option("--caf-port", serve_flags.caf_port,
                    "Publish the workspace over CAF's middleman on this port (0: any free one) for C++ hosts "
                    "(mcprt::runtime::connect); prints `listening on caf+tls://HOST:PORT` after the HTTP line. "
                    "Always mutual TLS: without --caf-tls-*, the owner's own identity (<home>/.mcprt/caf/, made the "
                    "first time), so only the owner's hosts (mcprt::use_owner_tls) connect");
  serve->add_option("--caf-host", serve_flags.caf_host,
                    "Address --caf-port listens on (default 127.0.0.1; another than loopback needs --caf-tls-*)");
  serve->add_option("--caf-tls-cert", serve_flags.caf_tls_cert,
                    "With --fleet-budget or --caf-port: this node's PEM certificate, signed by the --caf-tls-ca");
  serve->add_option("--caf-tls-key", serve_flags.caf_tls_key,
                    "With --fleet-budget or --caf-port: the PEM key of --caf-tls-cert");
  serve->add_option("--caf-tls-ca", serve_flags.caf_tls_ca,
                    "With --fleet-budget or --caf-port: the PEM CA every peer's certificate must be signed by "
                    "(mutual authentication); without the three, the owner's own identity in <home>/.mcprt/caf/");
  serve->add_option("--sse-keepalive-ms", serve_flags.keepalive_ms)->group("")->check(CLI::PositiveNumber);
  serve->add_option("--sse-queue", serve_flags.sse_queue)->group("")->check(CLI::PositiveNumber);
  serve->add_option("--sndbuf", serve_flags.sndbuf)->group("")->check(CLI::PositiveNumber);
  serve->add_option("--event-history", serve_flags.event_history)->group("")->check(CLI::PositiveNumber);

  // `mcprt gateway`: its arguments are what a repository's .mcp.json wrote.
  // It takes --workspace, --set and the serve flags of gateway_serve_flags()
  // (passed on to a daemon it starts); every other serve flag, and --url and
  // --token-file, is known to it only to be refused by name, before anything
  // starts, with where the owner decides the same thing.
  cli::gateway_flags gateway_flags;
  auto* gateway = app.add_subcommand(
    "gateway",
    "Speak MCP over stdio and bridge every message to the workspace daemon's streamable HTTP endpoint (/mcp),\n"
    "  for clients that only spawn servers. Starts the daemon (detached, shared by every gateway of the\n"
    "  workspace: one pool, one budget) when none runs; its output goes to <ws>/.mcprt/daemon.log, and it\n"
    "  keeps running after the gateway exits. In .mcp.json:\n"
    "    {\"mcpServers\": {\"workspace\": {\"command\": \"mcprt\", \"args\": [\"gateway\", \"--workspace\", \".\"]}}}\n"
    "  stdin: one JSON-RPC message per line (at most 4 MiB; a bad line is answered with a JSON-RPC error\n"
    "  and the bridge goes on). stdout: every message of the answers and of the server's event stream, one\n"
    "  per line. stdin EOF or SIGTERM ends the session (DELETE) and exits 0. When the server forgets the\n"
    "  session (HTTP 404: the daemon restarted), the waiting requests get a JSON-RPC error and the gateway\n"
    "  exits 1, so that the client starts it again. Logs go to stderr, never the token.\n"
    "  Its arguments may come from a repository, so it takes only the flags below; the daemon's other\n"
    "  settings are yours: start it with `mcprt serve ...` and the gateway uses it.");
  gateway->add_option("--workspace,-w", gateway_flags.workspace,
                      "Workspace whose daemon to use: the current directory (the default) or one above it");
  gateway->add_option("--set", gateway_flags.set,
                      "Serve only this tool set of the settings (mcp.toolSets): the daemon's /mcp/<set>");
  std::list<std::string> gateway_refused_values;
  std::vector<std::pair<CLI::Option*, std::string>> gateway_serve_opts, gateway_refused_opts;
  for (auto* name : {"--url", "--token-file"}) {
    gateway_refused_values.emplace_back();
    gateway_refused_opts.emplace_back(gateway->add_option(name, gateway_refused_values.back())->group(""), name);
  }
  std::list<std::vector<std::string>> gateway_values;
  const auto& passed = cli::gateway_serve_flags();
  for (auto* o : serve->get_options()) {
    if (o == serve->get_help_ptr() || o->get_positional() || o->get_lnames().empty()) continue;
    auto name = "--" + o->get_lnames().front();
    if (name == "--workspace" || name == "--token-file") continue;
    bool pass = std::find(passed.begin(), passed.end(), name) != passed.end();
    CLI::Option* mirror;
    if (o->get_items_expected_max() == 0) {
      mirror = gateway->add_flag(name, pass ? o->get_description() : "");
    } else {
      gateway_values.emplace_back();
      mirror = gateway->add_option(name, gateway_values.back(), pass ? o->get_description() : "")
                 ->allow_extra_args(false);
    }
    mirror->group(pass ? "Daemon (serve) options, for a daemon the gateway starts" : "");
    (pass ? gateway_serve_opts : gateway_refused_opts).emplace_back(mirror, name);
  }

  auto add_client_flags = [](CLI::App* cmd, cli::client_flags& f) {
    cmd->add_option("--workspace,-w", f.workspace, "Workspace whose daemon to use (default: current directory)");
    cmd->add_option("--url", f.url, "Daemon URL (default: from <workspace>/.mcprt/daemon.json)");
    cmd->add_option("--token-file", f.token_file, "File holding the daemon's bearer token");
  };
  cli::client_flags status_flags;
  auto* status = app.add_subcommand("status", "Show the running daemon's servers, budget and pool");
  add_client_flags(status, status_flags);
  status->add_flag("--json", status_flags.json, "Print the snapshot (GET /workspace/mcp) as JSON");

  cli::client_flags events_flags;
  unsigned long long events_since = 0;
  auto* events = app.add_subcommand("events", "Follow the running daemon's events, one line each");
  add_client_flags(events, events_flags);
  auto* since_opt = events->add_option("--since", events_since, "First replay the events after this id the daemon still holds");

  cli::client_flags restart_flags;
  std::string restart_name;
  auto* restart = app.add_subcommand("restart", "Restart a server's connections in the running daemon");
  restart->add_option("name", restart_name, "Server name")->required();
  add_client_flags(restart, restart_flags);
  restart->add_flag("--json", restart_flags.json, "Print the daemon's answer as JSON");

  cli::client_flags call_flags;
  cli::one_shot_call_options one_shot_call;
  long long call_timeout = 0, call_call_timeout = 0;
  std::vector<std::string> call_words;
  auto* call = app.add_subcommand("call", "Call one tool and print its result (text as text; --json for the raw result).\n"
                                          "  mcprt call SERVER TOOL ['{\"arg\": 1}']            through the running daemon\n"
                                          "  mcprt call --http URL [--header K:V]... TOOL [JSON]  one server, no daemon\n"
                                          "  mcprt call TOOL [JSON] -- COMMAND ARGS...          one stdio server, no daemon\n"
                                          "  Exit 0 on a result, 1 when the tool reports isError or the call fails, 2 on bad usage.");
  call->add_option("words", call_words, "SERVER TOOL [JSON] (daemon), or TOOL [JSON] with --http URL or -- COMMAND");
  add_client_flags(call, call_flags);
  call->add_flag("--json", call_flags.json, "Print the whole tool result as JSON");
  add_one_shot_flags(call, one_shot_call.target, call_timeout);
  call->add_option("--call-timeout-ms", call_call_timeout, "One-shot: the call's timeout (default 600000)")
    ->check(CLI::PositiveNumber);

  common_flags auth_common;
  cli::auth_flags auth_opts;
  std::string auth_name, auth_url, auth_token;
  auto* auth = app.add_subcommand("auth", "Authorize mcprt at a remote server that requires OAuth, and connect it.\n"
                                          "  Through the running daemon when there is one, else on its own;\n"
                                          "  the tokens go to <home>/.mcprt/mcp-oauth.json (mode 0600).");
  auth->add_option("name", auth_name, "Server name")->required();
  add_workspace_flags(auth, auth_common);
  auth->add_option("--browser", auth_opts.browser,
                   "Command that opens the authorization URL, given as its last argument "
                   "(default: xdg-open when installed, else the URL is only printed)");
  auth->add_flag("--logout", auth_opts.logout, "Forget the server's stored OAuth credentials instead");
  auth->add_option("--timeout-ms", auth_opts.timeout_ms, "How long the whole authorization may take: discovery, registration, the redirect, the token "
                   "request (default 300000)")
    ->check(CLI::PositiveNumber);
  auth->add_option("--url", auth_url, "Daemon URL (default: from <workspace>/.mcprt/daemon.json)");
  auth->add_option("--token-file", auth_token, "Bearer token file of a running daemon");

  std::string approve_token, reject_token;
  approve->add_option("--token-file", approve_token, "Bearer token file of a running daemon");
  reject->add_option("--token-file", reject_token, "Bearer token file of a running daemon");

  // `mcprt call TOOL [JSON] -- COMMAND ARGS...`: what follows `--` is the
  // server's command line, not more words of the call.
  int parsed_argc = argc;
  if (argc > 1 && std::string(argv[1]) == "call") {
    for (int i = 2; i < argc; ++i) {
      if (std::string(argv[i]) != "--") continue;
      one_shot_call.target.command.assign(argv + i + 1, argv + argc);
      parsed_argc = i;
      if (one_shot_call.target.command.empty()) {
        std::cerr << "mcprt call: `--` must be followed by the server's command\n" << call->help();
        return exit_usage;
      }
      break;
    }
  }
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : exit_usage;
  }
  if (*explain) return run_explain(explain_flags);
  if (input.given()) return input.run();
  if (*inspect) {
    if (inspect_timeout > 0) inspect_opts.target.timeout_ms = inspect_timeout;
    return cli::run_inspect(inspect_opts);
  }
  if (*serve) return cli::run_serve(serve_flags);
  if (*budget_server) return cli::run_budget_server(budget_server_flags);
  if (*gateway) {
    for (auto& [o, name] : gateway_refused_opts)
      if (o->count() > 0) {
        std::cerr << cli::gateway_refusal(name) << "\n";
        return exit_usage;
      }
    for (auto& [o, name] : gateway_serve_opts) {
      if (o->count() == 0) continue;
      if (o->get_items_expected_max() == 0) {
        gateway_flags.serve_args.push_back(name);
        continue;
      }
      for (auto& v : o->results()) {
        gateway_flags.serve_args.push_back(name);
        gateway_flags.serve_args.push_back(v);
      }
    }
    return cli::run_gateway(gateway_flags);
  }
  if (*status) return cli::run_status(status_flags);
  if (*events) return cli::run_events(events_flags, since_opt->count() ? std::optional<unsigned long long>(events_since)
                                                                        : std::nullopt);
  if (*restart) return cli::run_restart(restart_flags, restart_name);
  if (*call) {
    bool one_shot = one_shot_call.target.http_url || one_shot_call.target.sse_url || !one_shot_call.target.command.empty();
    auto usage = [&](const std::string& why) {
      std::cerr << "mcprt call: " << why << "\n" << call->help();
      return exit_usage;
    };
    if (!one_shot) {
      for (auto* flag : {"--header", "--timeout-ms", "--call-timeout-ms", "--on-elicitation", "--root"})
        if (call->count(flag) > 0) return usage(std::string(flag) + " needs --http URL, --sse URL or `-- COMMAND`");
      if (call_words.size() < 2 || call_words.size() > 3) return usage("expected SERVER TOOL [JSON]");
      return cli::run_call(call_flags, call_words[0], call_words[1], call_words.size() > 2 ? call_words[2] : "");
    }
    for (auto* flag : {"--workspace", "--url", "--token-file"})
      if (call->count(flag) > 0) return usage(std::string(flag) + " is for calls through a daemon, not with --http, --sse or --");
    if (call_words.empty() || call_words.size() > 2) return usage("expected TOOL [JSON] with --http URL, --sse URL or -- COMMAND");
    one_shot_call.tool = call_words[0];
    if (call_words.size() > 1) one_shot_call.arguments = call_words[1];
    one_shot_call.json = call_flags.json;
    if (call_timeout > 0) one_shot_call.target.timeout_ms = call_timeout;
    if (call_call_timeout > 0) one_shot_call.target.call_timeout_ms = call_call_timeout;
    return cli::run_one_shot_call(one_shot_call);
  }
  if (*auth) {
    cli::client_flags cf;
    cf.workspace = auth_common.workspace;
    cf.url = auth_url;
    cf.token_file = auth_token;
    if (auto rc = cli::auth_via_daemon(cf, auth_name, auth_opts)) return *rc;
    return run_auth(auth_common, auth_name, auth_opts);
  }
  // approve / reject: through the running daemon when there is one, so it
  // reconciles at once; else straight into the store.
  for (auto [cmd, flags, name, token, decision] :
       {std::make_tuple(approve, &approve_flags, &approve_name, &approve_token, approval_state::approved),
        std::make_tuple(reject, &reject_flags, &reject_name, &reject_token, approval_state::rejected)}) {
    if (!*cmd) continue;
    cli::client_flags cf;
    cf.workspace = flags->workspace;
    cf.token_file = *token;
    // An explicit --home or --profile names a store; the daemon is only
    // asked when it reads that same store.
    std::string own_store;
    if (cmd->count("--home") > 0 || cmd->count("--profile") > 0) {
      auto o = make_options(*flags);
      if (!o) return exit_usage;
      std::error_code ec;
      own_store = fs::absolute(approvals_path(*o), ec).lexically_normal().string();
    }
    if (auto rc = cli::decide_via_daemon(cf, *name, decision == approval_state::approved, own_store)) return *rc;
    return run_decision(*flags, *name, decision);
  }
  return exit_usage;
}
