// Black-box: OAuth for remote servers. Our test server with
// --oauth demands a bearer token and is its own authorization server (its
// /authorize redirects at once, so curl following redirects is the
// browser). The real daemon, the real `mcprt auth`, real HTTP on loopback.

#include <sys/stat.h>

#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

using namespace std::chrono_literals;

const std::string headless_browser = "curl -fsS -o /dev/null -L";

class oauth_test : public graceful_daemon_test {
protected:
  void SetUp() override {
    graceful_daemon_test::SetUp();
    log_ = root_ / "oauth.log";
    revoke_ = root_ / "revoke";
  }

  void TearDown() override {
    graceful_daemon_test::TearDown();
    remote_.reset();
  }

  /// The protected server; its URL.
  std::string start_remote(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--http", "0", "--tools", "1", "--oauth", "--oauth-log", log_.string(),
                                  "--oauth-revoke-file", revoke_.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    remote_ = std::make_unique<spawned>(args, home_, std::map<std::string, std::string>{}, test_server);
    auto first = remote_->line(30s);
    if (!first) return {};
    auto at = first->find("http://");
    return at == std::string::npos ? std::string() : first->substr(at);
  }

  void configure(const std::string& url, json extra = json::object()) {
    json remote{{"httpUrl", url}};
    remote.update(extra);
    write_file(user_settings(), json{{"mcpServers", {{"remote", remote}}}}.dump(2));
  }

  fs::path oauth_file() const { return home_ / ".mcprt" / "mcp-oauth.json"; }

  /// A protected server whose metadata `file` can change later, its tokens
  /// short-lived (every use refreshes them), authorized through the daemon
  /// and connected: its URL, or "" with a test failure.
  std::string authorized_with_metadata_file(const fs::path& file) {
    auto url = start_remote({"--oauth-token-ttl-s", "30", "--oauth-metadata-file", file.string()});
    if (url.empty()) return {};
    configure(url);
    bool ok = start() && reason_is("remote", "needs_auth")
              && cli({"auth", "remote", "--browser", headless_browser, "--timeout-ms", "30000"}).code == 0
              && connected("remote");
    if (!ok) ADD_FAILURE() << "not authorized: " << server("remote").dump();
    return ok ? url : std::string();
  }

  /// Every token and secret the credential file holds.
  std::vector<std::string> secrets() const {
    std::vector<std::string> out;
    auto j = json::parse(slurp(oauth_file()), nullptr, false);
    if (!j.is_object()) return out;
    for (auto& [url, clients] : j.items())
      for (auto& [key, c] : clients.items())
        for (auto field : {"access_token", "refresh_token", "client_secret"})
          if (c.is_object() && c.contains(field) && c[field].is_string() && !c[field].get<std::string>().empty())
            out.push_back(c[field].get<std::string>());
    return out;
  }

  /// How often the remote logged a line starting with `what`.
  int logged(const std::string& what) const {
    std::istringstream in(slurp(log_));
    int n = 0;
    for (std::string line; std::getline(in, line);)
      n += line.rfind(what, 0) == 0;
    return n;
  }

  bool reason_is(const std::string& name, const std::string& reason) const {
    return wait_until([&] {
      auto s = server(name);
      return s.value("status", "") == "disconnected" && s.contains("reason") && s["reason"] == reason;
    });
  }

  /// Points the settings at `url` and waits until the daemon runs that
  /// config and reports that it needs a person.
  bool reconfigure_needing_auth(const std::string& url) {
    auto fingerprint = [&] {
      auto s = server("remote");
      return s.contains("fingerprint") && s["fingerprint"].is_string() ? s["fingerprint"].get<std::string>() : "";
    };
    auto before = fingerprint();
    configure(url);
    return wait_until([&] { return fingerprint() != before && server("remote").value("reason", json("")) == "needs_auth"; });
  }

  std::unique_ptr<spawned> remote_;
  fs::path log_, revoke_;
};

TEST_F(oauth_test, a_server_that_needs_authorization_waits_for_mcprt_auth_and_then_connects) {
  auto url = start_remote();
  ASSERT_FALSE(url.empty());
  configure(url);
  ASSERT_TRUE(start());
  // From the first event on: the refusal may come before the stream opens.
  sse_stream events(port_, {{"Last-Event-ID", "0"}});
  ASSERT_TRUE(reason_is("remote", "needs_auth")) << server("remote").dump();
  auto required = events.wait_for("auth_required", [](const json& j) { return j.value("server", "") == "remote"; });
  ASSERT_TRUE(required);
  EXPECT_EQ(required->j().value("remedy", ""), "run mcprt auth remote");
  // Not a crash loop: the server is asked once, not over and over.
  int refusals = logged("unauthorized");
  EXPECT_GE(refusals, 1);
  auto explain = mcprt({"explain", "--json", "--workspace", ws_.string(), "--home", home_.string()});
  ASSERT_TRUE(explain.has_json()) << explain.out << explain.err;
  EXPECT_EQ(explain.j["servers"][0].value("oauth", ""), "needs_auth") << "the running daemon says so";
  auto table = mcprt({"explain", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_NE(table.out.find("needs_auth: run `mcprt auth remote`"), std::string::npos) << table.out;

  auto auth = cli({"auth", "remote", "--browser", headless_browser, "--timeout-ms", "30000"});
  ASSERT_EQ(auth.code, 0) << auth.out << auth.err;
  EXPECT_NE(auth.out.find("authorized remote"), std::string::npos) << auth.out;
  EXPECT_NE(auth.out.find("/authorize?"), std::string::npos) << auth.out;
  ASSERT_TRUE(connected("remote")) << server("remote").dump();
  ASSERT_TRUE(events.wait_for("client_update", [](const json& j) {
    return j.value("server", "") == "remote" && j.value("status", "") == "connected";
  }));
  EXPECT_EQ(logged("register"), 1);
  EXPECT_EQ(logged("authorize"), 1);
  EXPECT_EQ(refusals, logged("unauthorized")) << "no request was refused after the authorization";
  auto explained = mcprt({"explain", "--json", "--workspace", ws_.string(), "--home", home_.string()});
  ASSERT_TRUE(explained.has_json());
  EXPECT_EQ(explained.j["servers"][0].value("oauth", ""), "stored");
  explain.out += explained.out;

  // The credentials are the user's alone, and appear nowhere else.
  struct stat st {};
  ASSERT_EQ(::stat(oauth_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto held = secrets();
  ASSERT_GE(held.size(), 2u); // an access and a refresh token
  auto call = post("/workspace/mcp/tools/call", json{{"server", "remote"}, {"tool", "echo"}, {"arguments", {{"text", "hi"}}}}.dump());
  ASSERT_TRUE(call);
  EXPECT_EQ(call->status, 200) << call->body;
  std::string everything = auth.out + auth.err + explain.out + explain.err + snapshot().dump() + daemon_->err() +
                           slurp(log_) + (call ? call->body : "");
  for (auto& e : events.log)
    everything += e.data;
  for (auto& s : held)
    EXPECT_EQ(everything.find(s), std::string::npos) << "a secret leaked";
}

TEST_F(oauth_test, a_hot_reload_keeps_the_tokens_and_a_revoked_token_leads_back_to_needs_auth) {
  auto url = start_remote();
  ASSERT_FALSE(url.empty());
  configure(url);
  ASSERT_TRUE(start());
  ASSERT_TRUE(reason_is("remote", "needs_auth"));
  ASSERT_EQ(cli({"auth", "remote", "--browser", headless_browser, "--timeout-ms", "30000"}).code, 0);
  ASSERT_TRUE(connected("remote"));

  // An edit that changes the server's config reconnects it with the stored
  // tokens: no second authorization.
  auto before = server("remote").value("fingerprint", "");
  configure(url, {{"timeout", 30000}});
  ASSERT_TRUE(wait_until([&] {
    auto s = server("remote");
    return s.value("fingerprint", "") != before && s.value("status", "") == "connected";
  })) << server("remote").dump();
  EXPECT_EQ(logged("authorize"), 1);

  // Every token revoked: the reconnect's refresh fails, and the server
  // waits for a person again.
  write_file(revoke_, "");
  // The pool refuses to restart an entry it still counts as starting (the
  // snapshot may say connected a moment earlier): ask until it restarts,
  // or until a request of the connection met the revocation first.
  std::string restarted;
  ASSERT_TRUE(wait_until([&] {
    if (server("remote")["reason"] == "needs_auth") return true;
    auto r = post("/workspace/mcp/remote/restart");
    if (!r || r->status != 200) return false;
    restarted = r->body;
    return r->body.find("\"restarted\":true") != std::string::npos;
  })) << restarted;
  ASSERT_TRUE(reason_is("remote", "needs_auth")) << server("remote").dump() << "\nrestart: " << restarted;
  EXPECT_GE(logged("token-error"), 1);
  EXPECT_EQ(logged("authorize"), 1);
}

TEST_F(oauth_test, mcprt_auth_without_a_daemon_stores_tokens_a_daemon_then_uses) {
  auto url = start_remote();
  ASSERT_FALSE(url.empty());
  configure(url);
  auto auth = mcprt({"auth", "remote", "--workspace", ws_.string(), "--home", home_.string(), "--browser",
                     headless_browser, "--timeout-ms", "30000"});
  ASSERT_EQ(auth.code, 0) << auth.out << auth.err;
  EXPECT_NE(auth.out.find("credentials stored in"), std::string::npos) << auth.out;
  ASSERT_TRUE(fs::exists(oauth_file()));
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("remote")) << server("remote").dump();
  EXPECT_EQ(logged("authorize"), 1);

  auto out = mcprt({"auth", "--logout", "remote", "--workspace", ws_.string(), "--home", home_.string()});
  ASSERT_EQ(out.code, 0) << out.err;
  EXPECT_NE(out.out.find("forgot"), std::string::npos) << out.out;
  EXPECT_TRUE(secrets().empty());
}

TEST_F(oauth_test, mcprt_auth_names_a_server_that_is_not_configured_or_not_remote) {
  write_file(user_settings(), json{{"mcpServers", {{"local", test_server_config({"--tools", "1"})}}}}.dump(2));
  auto missing = mcprt({"auth", "nope", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_EQ(missing.code, 2) << missing.err;
  EXPECT_NE(missing.err.find("no server named"), std::string::npos) << missing.err;
  auto local = mcprt({"auth", "local", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_EQ(local.code, 1);
  EXPECT_NE(local.err.find("streamable-HTTP"), std::string::npos) << local.err;
  ASSERT_TRUE(start());
  auto r = post("/workspace/mcp/local/auth");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 502) << r->body;
  auto unknown = post("/workspace/mcp/nope/auth");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404) << unknown->body;
}

TEST_F(oauth_test, a_one_shot_call_authorizes_through_the_browser_command_and_keeps_nothing) {
  auto url = start_remote();
  ASSERT_FALSE(url.empty());
  auto r = mcprt({"call", "--http", url, "--timeout-ms", "20000", "--browser", headless_browser, "echo", R"({"text": "hello"})"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("hello"), std::string::npos) << r.out;
  EXPECT_EQ(logged("authorize"), 1);
  EXPECT_FALSE(fs::exists(oauth_file())) << "a one-shot command keeps its tokens in memory only";
  // Without a browser nobody authorizes: a clear error, in time.
  auto no = mcprt({"call", "--http", url, "--timeout-ms", "3000", "--auth-timeout-ms", "1000", "echo", "{}"});
  EXPECT_EQ(no.code, 1) << no.out << no.err;
  EXPECT_NE(no.err.find("authoriz"), std::string::npos) << no.err;
}

// -- what a remote party says is no route into the daemon ---------------------------------------

TEST_F(oauth_test, a_registration_endpoint_aimed_at_the_daemons_approve_route_approves_nothing) {
  // A project server waiting for the user's approval; if anything starts it,
  // its pid file appears.
  const auto pid_file = root_ / "project.pid";
  write_file(project_file(),
             json{{"mcpServers", {{"project-tools", test_server_config({"--tools", "1", "--pid-file", pid_file.string()})}}}}
               .dump(2));
  ASSERT_TRUE(start());
  ASSERT_TRUE(wait_until([&] { return server("project-tools").value("reason", json(nullptr)) == "pending_approval"; }))
    << server("project-tools").dump();
  // The authorization server's metadata sends dynamic registration (a POST
  // with a JSON body) to the daemon's own route.
  const std::string approve = url_ + "/workspace/mcp/project-tools/approve";
  auto url = start_remote({"--oauth-metadata", json{{"registration_endpoint", approve}}.dump()});
  ASSERT_FALSE(url.empty());
  configure(url);
  ASSERT_TRUE(reason_is("remote", "needs_auth")) << server("remote").dump();

  auto auth = cli({"auth", "remote", "--browser", headless_browser, "--timeout-ms", "20000"});
  EXPECT_NE(auth.code, 0) << auth.out << auth.err;
  EXPECT_NE(auth.err.find("refusing the registration endpoint " + approve), std::string::npos) << auth.err;
  EXPECT_NE(auth.err.find("mcprt's own HTTP listener"), std::string::npos) << auth.err;
  EXPECT_EQ(server("project-tools").value("approval", ""), "pending") << server("project-tools").dump();
  EXPECT_EQ(server("project-tools").value("reason", json(nullptr)), "pending_approval") << server("project-tools").dump();
  EXPECT_FALSE(fs::exists(pid_file)) << "the pending project server was started";
  EXPECT_EQ(logged("register"), 0);
}

TEST_F(oauth_test, an_oauth_request_never_follows_a_redirect) {
  // The registration endpoint passes every rule but answers 307 (method and
  // body kept) to the daemon's approve route.
  write_file(project_file(), json{{"mcpServers", {{"project-tools", test_server_config({"--tools", "1"})}}}}.dump(2));
  ASSERT_TRUE(start());
  ASSERT_TRUE(wait_until([&] { return server("project-tools").value("reason", json(nullptr)) == "pending_approval"; }));
  const std::string approve = url_ + "/workspace/mcp/project-tools/approve";
  auto url = start_remote({"--oauth-metadata", json{{"registration_endpoint", "{base}/redirect?to=" + approve}}.dump()});
  ASSERT_FALSE(url.empty());
  ASSERT_TRUE(reconfigure_needing_auth(url)) << server("remote").dump();
  auto auth = cli({"auth", "remote", "--browser", headless_browser, "--timeout-ms", "20000"});
  EXPECT_NE(auth.code, 0) << auth.out << auth.err;
  EXPECT_NE(auth.err.find("answered with a redirect (HTTP 307); OAuth requests never follow redirects"), std::string::npos)
    << auth.err;
  EXPECT_EQ(logged("redirect POST"), 1);
  EXPECT_EQ(server("project-tools").value("approval", json(nullptr)), "pending") << server("project-tools").dump();
}

TEST_F(oauth_test, discovered_endpoints_into_the_network_or_over_plain_http_are_refused_before_any_request) {
  ASSERT_TRUE(start());
  struct refused_case {
    std::vector<std::string> remote_flags;
    std::string expected; // in the error
  };
  const std::vector<refused_case> cases{
    // A private address, for a server on loopback (nothing is listening
    // there: the request would hang until its timeout).
    {{"--oauth-metadata", R"({"registration_endpoint": "http://10.0.0.1/register"})"},
     "refusing the registration endpoint http://10.0.0.1:80/register: it resolves to the private or link-local address 10.0.0.1"},
    // Link-local (a cloud's metadata service), named by the resource metadata.
    {{"--oauth-resource-metadata", R"({"authorization_servers": ["http://169.254.169.254/latest"]})"},
     "refusing the authorization server metadata http://169.254.169.254:80/"},
    // Plain http to a host that is not loopback.
    {{"--oauth-metadata", R"({"registration_endpoint": "http://192.0.2.1/register"})"},
     "refusing the registration endpoint http://192.0.2.1:80/register: it is not https"},
    // The unspecified address reaches this machine.
    {{"--oauth-metadata", R"({"registration_endpoint": "http://0.0.0.0:9/register"})"}, "unspecified address"},
  };
  for (const auto& c : cases) {
    auto url = start_remote(c.remote_flags);
    ASSERT_FALSE(url.empty());
    ASSERT_TRUE(reconfigure_needing_auth(url)) << server("remote").dump();
    auto started = clock_type::now();
    auto auth = cli({"auth", "remote", "--browser", headless_browser, "--timeout-ms", "20000"});
    EXPECT_NE(auth.code, 0) << auth.out << auth.err;
    EXPECT_NE(auth.err.find(c.expected), std::string::npos) << c.expected << "\n" << auth.err;
    EXPECT_LT(clock_type::now() - started, 10s) << "refused without waiting for the address";
    EXPECT_EQ(logged("register"), 0);
  }
}

TEST_F(oauth_test, an_authorization_server_that_names_another_issuer_is_not_used) {
  // The metadata names an issuer it was not fetched for (RFC 8414 3.3).
  auto url = start_remote({"--oauth-metadata", R"({"issuer": "http://127.0.0.1:1"})"});
  ASSERT_FALSE(url.empty());
  configure(url);
  auto auth = mcprt({"auth", "remote", "--workspace", ws_.string(), "--home", home_.string(), "--browser",
                     headless_browser, "--timeout-ms", "20000"});
  EXPECT_EQ(auth.code, 1) << auth.out << auth.err;
  EXPECT_NE(auth.err.find("names issuer 'http://127.0.0.1:1'"), std::string::npos) << auth.err;
  EXPECT_NE(auth.err.find("RFC 8414"), std::string::npos) << auth.err;
  EXPECT_EQ(logged("register"), 0);
  EXPECT_TRUE(secrets().empty());
}

TEST_F(oauth_test, a_refresh_is_not_sent_when_the_issuers_metadata_names_another_issuer) {
  // Tokens live 30 s, so every use refreshes them (60 s ahead).
  const auto changed = root_ / "changed.json";
  auto url = authorized_with_metadata_file(changed);
  ASSERT_FALSE(url.empty());
  // The stored issuer's metadata now says it is another issuer: its token
  // endpoint is not the stored issuer's to vouch for.
  write_file(changed, json{{"issuer", "http://127.0.0.1:1"}}.dump());
  const int refreshes = logged("token refresh_token");
  auto r = post("/workspace/mcp/remote/restart");
  ASSERT_TRUE(r);
  ASSERT_TRUE(reason_is("remote", "needs_auth")) << server("remote").dump();
  EXPECT_EQ(logged("token refresh_token"), refreshes) << "a refresh was sent on the word of another issuer";
}

TEST_F(oauth_test, the_iss_of_the_authorization_response_must_be_the_issuers) {
  struct iss_case {
    std::vector<std::string> remote_flags;
    std::string expected; // empty: authorized
  };
  const std::string supported = R"({"authorization_response_iss_parameter_supported": true})";
  const std::vector<iss_case> cases{
    {{"--oauth-redirect-iss", "http://evil.example"}, "came from issuer 'http://evil.example'"},
    {{"--oauth-metadata", supported}, "carries no 'iss'"},
    {{"--oauth-metadata", supported, "--oauth-redirect-iss", "{base}"}, ""},
  };
  for (const auto& c : cases) {
    fs::remove(oauth_file());
    auto url = start_remote(c.remote_flags);
    ASSERT_FALSE(url.empty());
    configure(url);
    auto auth = mcprt({"auth", "remote", "--workspace", ws_.string(), "--home", home_.string(), "--browser",
                       headless_browser, "--timeout-ms", "20000"});
    if (c.expected.empty()) {
      EXPECT_EQ(auth.code, 0) << auth.out << auth.err;
      continue;
    }
    EXPECT_EQ(auth.code, 1) << auth.out << auth.err;
    EXPECT_NE(auth.err.find(c.expected), std::string::npos) << c.expected << "\n" << auth.err;
    EXPECT_NE(auth.err.find("RFC 9207"), std::string::npos) << auth.err;
    EXPECT_EQ(logged("token authorization_code"), 0) << "the code was exchanged";
    EXPECT_TRUE(secrets().empty());
  }
}

TEST_F(oauth_test, a_refresh_token_goes_only_to_the_token_endpoint_it_came_from) {
  // Tokens live 30 s, so every use refreshes them (60 s ahead).
  const auto moved = root_ / "moved.json";
  auto url = authorized_with_metadata_file(moved);
  ASSERT_FALSE(url.empty());
  auto stored = json::parse(slurp(oauth_file()), nullptr, false);
  ASSERT_TRUE(stored.is_object());
  EXPECT_EQ(stored[url]["dynamic"].value("token_endpoint", ""), url.substr(0, url.rfind('/')) + "/token")
    << "the credentials remember where they were issued";

  // The issuer's metadata now names another token endpoint: the refresh
  // token is not sent there, and a person must authorize again.
  write_file(moved, json{{"token_endpoint", "{base}/other/token"}}.dump());
  auto r = post("/workspace/mcp/remote/restart");
  ASSERT_TRUE(r);
  ASSERT_TRUE(reason_is("remote", "needs_auth")) << server("remote").dump();
  EXPECT_EQ(logged("elsewhere-token"), 0) << "the refresh token went to a token endpoint it did not come from";
  // (Which request meets the refusal first, and so whose error names it,
  // depends on timing: the closing DELETE of the old connection may. The
  // words are checked in tests/core/oauth_endpoints_test.cpp.)
}

// -- mcprt auth --timeout-ms bounds the whole authorization -----------------------------------------

TEST_F(oauth_test, mcprt_auth_ends_within_its_timeout_when_registration_never_answers) {
  auto url = start_remote({"--oauth-register-hang"});
  ASSERT_FALSE(url.empty());
  configure(url);
  // Generous for sanitizers, well under the 15 s one request could take.
  const auto bound = 2000ms + 3s;

  // On its own ...
  auto started = clock_type::now();
  auto alone = mcprt({"auth", "remote", "--workspace", ws_.string(), "--home", home_.string(), "--browser",
                      headless_browser, "--timeout-ms", "2000"});
  auto took = clock_type::now() - started;
  EXPECT_EQ(alone.code, 1) << alone.out << alone.err;
  EXPECT_LE(took, bound) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  EXPECT_NE(alone.err.find("registration"), std::string::npos) << alone.err;
  EXPECT_NE(alone.err.find("ran out"), std::string::npos) << alone.err;

  // ... and through the daemon.
  ASSERT_TRUE(start());
  ASSERT_TRUE(reason_is("remote", "needs_auth"));
  started = clock_type::now();
  auto via = cli({"auth", "remote", "--browser", headless_browser, "--timeout-ms", "2000"});
  took = clock_type::now() - started;
  EXPECT_EQ(via.code, 1) << via.out << via.err;
  EXPECT_LE(took, bound) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  EXPECT_NE(via.err.find("registration"), std::string::npos) << via.err;
  EXPECT_NE(via.err.find("ran out"), std::string::npos) << via.err;
  EXPECT_GE(logged("register-hang"), 2);
  // The daemon's flow had the same deadline: nothing of it is left to wait
  // for when the daemon stops.
  started = clock_type::now();
  stop();
  took = clock_type::now() - started;
  EXPECT_LE(took, 5s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

} // namespace
} // namespace mcprt_cli_test
