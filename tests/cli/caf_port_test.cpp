// Every CAF port of mcprt is mutual TLS, loopback included, black-box: a real
// `mcprt serve --caf-port` and `mcprt budget-server` with no TLS flags make
// the owner's identity and admit whoever holds its key; a stranger (plain
// BASP, TLS without a certificate, TLS with a certificate of its own, another
// uid) gets no byte to CAF's BASP reader, so a header announcing a 4 GiB
// payload costs the daemon nothing.

#include <gtest/gtest.h>

#include <future>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <caf/all.hpp>
#include <caf/openssl/remote_actor.hpp>

#include "io/owner_tls.hpp"
#include "mcprt/owner_tls.hpp"
#include "mcprt/runtime.hpp"
#include "messages/fleet.hpp"
#include "tests/cli/daemon_test_util.hpp"

using namespace mcprt_cli_test;
using namespace std::chrono_literals;

namespace {

/// What a stranger's bytes may cost the daemon at most. CAF 0.17.6 sizes
/// its read buffer by a BASP header's payload length before any check, so
/// a header that reached BASP would cost up to 4 GiB; OpenSSL's handshake
/// holds at most a record (16 KiB + overhead) and a certificate chain (100
/// KiB, OpenSSL's default max_cert_list) per connection.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
// A sanitizer's shadow and bookkeeping grow with the first connection's
// work (8.2 MB under TSan once); still far below the 4 GiB it guards.
constexpr long caf_port_rss_bound_kib = 64 * 1024;
#else
constexpr long caf_port_rss_bound_kib = 8 * 1024;
#endif

/// A BASP client handshake header (CAF 0.17: network byte order) that
/// announces a payload of 0xFFFFFFF0 bytes: what CAF would allocate, and
/// zero, before reading any of it.
std::string huge_basp_header() {
  std::string h(32, '\0');
  h[0] = 0x01; // client_handshake: valid with no source or destination actor
  h[4] = h[5] = h[6] = static_cast<char>(0xFF);
  h[7] = static_cast<char>(0xF0);
  return h;
}

long vm_rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

/// A loopback connection whose reads and writes give up after 10 s.
int connect_loopback(int port) {
  int fd = connect_to(port);
  if (fd < 0) return -1;
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

/// How one stranger fared: did the daemon end the connection, and how fast.
struct stranger_outcome {
  bool handshake_completed = false; // the client's side of it, TLS only
  bool disconnected = false;        // EOF or reset before 10 s passed
  std::chrono::milliseconds took{0};
};

/// Plain BASP: the huge header, then read until the daemon hangs up.
stranger_outcome plain_basp_stranger(int port) {
  stranger_outcome out;
  int fd = connect_loopback(port);
  if (fd < 0) return out;
  auto start = clock_type::now();
  auto h = huge_basp_header();
  (void)!::write(fd, h.data(), h.size());
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) continue; // a server handshake or a TLS alert
    out.disconnected = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    break;
  }
  out.took = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - start);
  ::close(fd);
  return out;
}

/// TLS that does not check the daemon (it wants to get as far as it can),
/// with `cert` and `key` when given, then the huge header inside TLS.
stranger_outcome tls_stranger(int port, const std::string& cert = {}, const std::string& key = {}) {
  stranger_outcome out;
  int fd = connect_loopback(port);
  if (fd < 0) return out;
  auto start = clock_type::now();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  if (!cert.empty()) {
    EXPECT_EQ(SSL_CTX_use_certificate_file(ctx, cert.c_str(), SSL_FILETYPE_PEM), 1);
    EXPECT_EQ(SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM), 1);
  }
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  ERR_clear_error();
  out.handshake_completed = SSL_connect(ssl) == 1;
  if (out.handshake_completed) {
    auto h = huge_basp_header();
    SSL_write(ssl, h.data(), static_cast<int>(h.size()));
    char buf[4096];
    for (;;) {
      ERR_clear_error();
      errno = 0;
      int n = SSL_read(ssl, buf, sizeof buf);
      if (n > 0) continue;
      int e = SSL_get_error(ssl, n);
      out.disconnected = !(e == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK));
      break;
    }
  } else {
    out.disconnected = true; // the daemon refused the handshake itself
  }
  out.took = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - start);
  ERR_clear_error();
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  ::close(fd);
  return out;
}

/// An actor system of the owner's: its identity read from `home`.
struct owner_host {
  explicit owner_host(const fs::path& home) {
    mcprt::add_mcprt_types(cfg);
    error = mcprt::use_owner_tls(cfg, home);
    if (!error) sys = std::make_unique<caf::actor_system>(cfg);
  }
  caf::actor_system_config cfg;
  caf::error error;
  std::unique_ptr<caf::actor_system> sys;
};

std::string mode_of(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return "absent";
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return buf;
}

class caf_port_test : public cli_test {
protected:
  void SetUp() override {
    cli_test::SetUp();
    write_file(user_settings(), json{{"mcpServers", {{"echo", test_server_config({"--tools", "1"})}}}}.dump(2));
  }

  void TearDown() override {
    for (auto* p : {node_.get(), budget_server_.get()})
      if (p) {
        p->signal(SIGTERM);
        EXPECT_TRUE(p->wait_exit(30s).has_value()) << p->err();
        auto err = p->err();
        EXPECT_EQ(err.find("Sanitizer"), std::string::npos) << err;
      }
    node_.reset();
    budget_server_.reset();
    cli_test::TearDown();
  }

  fs::path caf_dir() const { return home_ / ".mcprt" / "caf"; }

  /// `mcprt serve --caf-port 0` with no TLS flags; false with a test
  /// failure when it does not say where it listens.
  bool start_node() {
    node_ = std::make_unique<spawned>(std::vector<std::string>{"serve", "--workspace", ws_.string(), "--home",
                                                               home_.string(), "--debounce-ms", "50", "--caf-port", "0"},
                                      home_);
    auto http = node_->line(60s);
    auto caf = node_->line(10s);
    if (!http || !caf || caf->rfind("listening on caf+tls://127.0.0.1:", 0) != 0) {
      ADD_FAILURE() << "no 'listening on' lines: " << http.value_or("<none>") << " / " << caf.value_or("<none>")
                    << "\n"
                    << node_->err();
      return false;
    }
    caf_port_ = std::stoi(caf->substr(caf->rfind(':') + 1));
    return true;
  }

  /// The owner, from `home`, connects to the node, opens a session and
  /// calls the echo tool; the error when anything of that fails.
  std::string owner_calls(const fs::path& home) {
    owner_host host(home);
    if (host.error) return "use_owner_tls: " + caf::to_string(host.error);
    auto rt = mcprt::runtime::connect(*host.sys, "127.0.0.1", static_cast<uint16_t>(caf_port_));
    if (!rt) return "connect: " + host.sys->render(rt.error());
    auto session = (*rt)->open_session();
    if (session.empty()) return "no session";
    mcprt::call_options wait;
    wait.timeout = 30s;
    wait.wait_connecting = 20s;
    auto answer = std::make_shared<std::promise<caf::expected<nlohmann::json>>>();
    auto result = answer->get_future();
    (*rt)->call_tool_async(
      session, "echo", "echo", {{"text", "the owner"}},
      [answer](caf::expected<nlohmann::json> r) { answer->set_value(std::move(r)); }, wait);
    std::string error;
    if (result.wait_for(40s) != std::future_status::ready) error = "the call did not answer";
    else if (auto r = result.get(); !r) error = "call: " + host.sys->render(r.error());
    else if (r->dump().find("the owner") == std::string::npos) error = "echo answered " + r->dump();
    (*rt)->shutdown();
    return error;
  }

  std::unique_ptr<spawned> node_, budget_server_;
  int caf_port_ = 0;
};

} // namespace

TEST_F(caf_port_test, with_no_tls_flags_the_owners_identity_is_made_once_and_the_owner_connects) {
  ASSERT_TRUE(start_node());
  EXPECT_EQ(mode_of(caf_dir()), "0700");
  EXPECT_EQ(mode_of(caf_dir() / "key.pem"), "0600");
  EXPECT_EQ(mode_of(caf_dir() / "cert.pem"), "0600");
  auto key = slurp(caf_dir() / "key.pem");
  EXPECT_EQ(owner_calls(home_), "");
  // Made once: the host read it, nothing made it anew.
  EXPECT_EQ(slurp(caf_dir() / "key.pem"), key);

  // The budget server too, in a home of its own; the owner from that home
  // reaches the fleet's books.
  auto fleet_home = root_ / "fleet-home";
  fs::create_directories(fleet_home);
  budget_server_ = std::make_unique<spawned>(
    std::vector<std::string>{"budget-server", "--caf-port", "0", "--budget", "1", "--claim-grace-ms", "0"}, fleet_home);
  auto first = budget_server_->line(30s);
  ASSERT_TRUE(first && first->rfind("listening on caf+tls://127.0.0.1:", 0) == 0) << budget_server_->err();
  auto port = static_cast<uint16_t>(std::stoi(first->substr(first->rfind(':') + 1)));
  EXPECT_EQ(mode_of(fleet_home / ".mcprt" / "caf" / "key.pem"), "0600");
  owner_host fleet_owner(fleet_home);
  ASSERT_FALSE(fleet_owner.error) << caf::to_string(fleet_owner.error);
  auto budget = caf::openssl::remote_actor<mcprt::fleet_budget_actor>(*fleet_owner.sys, "127.0.0.1", port);
  ASSERT_TRUE(budget) << fleet_owner.sys->render(budget.error());
  caf::scoped_actor self{*fleet_owner.sys};
  json books;
  self->request(*budget, 10s, mcprt::atom::snapshot_v)
    .receive([&](const std::string& text) { books = json::parse(text, nullptr, false); },
             [&](const caf::error& e) { ADD_FAILURE() << fleet_owner.sys->render(e); });
  EXPECT_TRUE(books.is_object()) << books.dump();
  // The node's owner identity is another: the budget server refuses it.
  owner_host other(home_);
  ASSERT_FALSE(other.error);
  EXPECT_FALSE(caf::openssl::remote_actor<mcprt::fleet_budget_actor>(*other.sys, "127.0.0.1", port));
}

TEST_F(caf_port_test, strangers_bytes_never_reach_basp_and_a_4_gib_header_costs_the_daemon_nothing) {
  ASSERT_TRUE(start_node());
  // Warm: the owner's own connection and call, so that what the strangers
  // cost is measured against a daemon that has used TLS already.
  ASSERT_EQ(owner_calls(home_), "");
  auto baseline = vm_rss_kib(node_->pid());
  ASSERT_GT(baseline, 0);
  auto stranger_home = root_ / "stranger-home";
  fs::create_directories(stranger_home);
  auto foreign = mcprt::io::load_owner_tls(stranger_home);
  ASSERT_EQ(foreign.error, "");

  struct attempt {
    const char* who;
    stranger_outcome outcome;
  };
  std::vector<attempt> attempts;
  attempts.push_back({"plain BASP", plain_basp_stranger(caf_port_)});
  attempts.push_back({"TLS without a certificate", tls_stranger(caf_port_)});
  attempts.push_back({"TLS with a self-signed certificate of its own",
                      tls_stranger(caf_port_, foreign.files.certificate.string(), foreign.files.key.string())});
  for (auto& a : attempts) {
    auto rss = vm_rss_kib(node_->pid());
    EXPECT_TRUE(a.outcome.disconnected) << a.who << ": still connected after " << a.outcome.took.count() << " ms";
    EXPECT_LT(a.outcome.took, 9s) << a.who;
    EXPECT_LT(rss - baseline, caf_port_rss_bound_kib) << a.who << ": VmRSS grew from " << baseline << " to " << rss
                                                      << " KiB";
    std::cout << "[ caf_port ] " << a.who << ": handshake completed on the client's side: "
              << (a.outcome.handshake_completed ? "yes" : "no") << ", disconnected after " << a.outcome.took.count()
              << " ms, VmRSS " << baseline << " -> " << rss << " KiB\n";
  }
  // The daemon lives on and still serves its owner.
  EXPECT_FALSE(node_->wait_exit(0ms).has_value()) << node_->err();
  EXPECT_EQ(owner_calls(home_), "");
}

TEST_F(caf_port_test, another_uid_cannot_read_the_owners_key_and_is_refused) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to run a second uid (setpriv to nobody); the suite runs as uid " << ::geteuid();
  if (::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/setpriv (util-linux) to run as nobody";
  // Everything up to the home is open to others; .mcprt and its caf/ are
  // the owner's alone.
  for (auto& p : {root_, ws_, home_})
    fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read
                         | fs::perms::others_exec);
  ASSERT_TRUE(start_node());
  auto as_nobody = [&](const std::string& program, std::vector<std::string> args, const fs::path& home) {
    std::vector<std::string> all{"--reuid=65534", "--regid=65534", "--clear-groups", program};
    all.insert(all.end(), args.begin(), args.end());
    spawned p(all, home, {}, "/usr/bin/setpriv");
    while (p.line(60s)) {
    }
    return std::pair{p.wait_exit(60s).value_or(-1), p.err()};
  };
  auto [read_code, read_err] = as_nobody("/bin/cat", {(caf_dir() / "key.pem").string()}, home_);
  EXPECT_NE(read_code, 0);
  EXPECT_NE(read_err.find("Permission denied"), std::string::npos) << read_err;
#if defined(__SANITIZE_THREAD__)
  // The TSan build's instrumented CAF lives in root's cache, which nobody
  // cannot read: its programs would load the system's uninstrumented CAF,
  // and TSan would report that mix, not this test's subject.
  GTEST_SKIP() << "nobody's connection attempts run only in the builds without TSan (the key was unreadable)";
#endif
  // With the owner's home: the identity is not nobody's to use (and its
  // key could not be read anyway), so no connection.
  auto address = "127.0.0.1:" + std::to_string(caf_port_);
  auto [owner_code, owner_err] =
    as_nobody(MCPRT_EMBED_BIN, {"--connect", address, "--home", home_.string(), "--run-ms", "0"}, home_);
  EXPECT_EQ(owner_code, 1) << owner_err;
  EXPECT_NE(owner_err.find("cannot use the owner's CAF identity"), std::string::npos) << owner_err;
  // With a home of its own: its own identity, which the node refuses.
  auto nobody_home = root_ / "nobody-home";
  fs::create_directories(nobody_home);
  ASSERT_EQ(::chown(nobody_home.c_str(), 65534, 65534), 0);
  auto [own_code, own_err] =
    as_nobody(MCPRT_EMBED_BIN, {"--connect", address, "--home", nobody_home.string(), "--run-ms", "0"}, nobody_home);
  EXPECT_EQ(own_code, 1) << own_err;
  EXPECT_NE(own_err.find("cannot start"), std::string::npos) << own_err;
  EXPECT_TRUE(fs::exists(nobody_home / ".mcprt" / "caf" / "key.pem")) << own_err;
  EXPECT_EQ(owner_calls(home_), "");
}

TEST_F(caf_port_test, a_key_others_may_read_one_not_ours_or_a_linked_one_is_refused) {
  auto made = mcprt::io::load_owner_tls(home_);
  ASSERT_EQ(made.error, "");
  auto key = caf_dir() / "key.pem";
  auto budget_server = [&] { return mcprt({"budget-server", "--budget", "1", "--caf-port", "0"}); };

  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read,
                  fs::perm_options::replace);
  auto r = budget_server();
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("can be read or written by others (mode 0640)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chmod 600"), std::string::npos) << r.err;
  r = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string(), "--caf-port", "0"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("can be read or written by others"), std::string::npos) << r.err;
  caf::actor_system_config cfg;
  auto err = mcprt::use_owner_tls(cfg, home_);
  EXPECT_TRUE(err);
  EXPECT_NE(caf::to_string(err).find("by others"), std::string::npos) << caf::to_string(err);

  // A link to a key the owner keeps elsewhere, mode 0600: still refused,
  // mcprt uses only the file it made.
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  fs::rename(key, root_ / "elsewhere.pem");
  fs::create_symlink(root_ / "elsewhere.pem", key);
  r = budget_server();
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("is a symbolic link"), std::string::npos) << r.err;
  fs::remove(key);
  fs::rename(root_ / "elsewhere.pem", key);

  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(key.c_str(), 65534, 65534), 0);
    r = budget_server();
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("belongs to uid 65534"), std::string::npos) << r.err;
    ASSERT_EQ(::chown(key.c_str(), 0, 0), 0);
  }
  // The key as it was made: the budget server starts.
  budget_server_ = std::make_unique<spawned>(std::vector<std::string>{"budget-server", "--budget", "1"}, home_);
  auto first = budget_server_->line(30s);
  EXPECT_TRUE(first && first->rfind("listening on caf+tls://", 0) == 0) << budget_server_->err();
}
