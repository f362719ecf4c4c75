#include "io/oauth_client.hpp"

#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <optional>
#include <thread>

#include "core/ascii.hpp"
#include "core/http_url.hpp"
#include "core/oauth.hpp"
#include "core/untrusted_text.hpp"
#include "io/http_client.hpp"
#include "io/http_common.hpp"
#include "io/shared_library.hpp"

extern char** environ;

namespace mcprt::io {

using nlohmann::json;
namespace oa = mcprt::oauth;

namespace {

constexpr std::size_t k_max_answer = 1u << 20;
constexpr const char* k_dynamic = "dynamic";
constexpr const char* k_token_exchange = "urn:ietf:params:oauth:grant-type:token-exchange";
constexpr const char* k_jwt_bearer = "urn:ietf:params:oauth:grant-type:jwt-bearer";

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string random_bytes(std::size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
    throw std::runtime_error("no randomness for OAuth");
  return out;
}

using steady = std::chrono::steady_clock;

std::chrono::milliseconds left_until_limit(steady::time_point limit) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(limit - steady::now()));
}

// The numeric form the HTTP client connects to (IPv6 without brackets).
std::string numeric_host(const oa::ip_address& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(a.v6 ? AF_INET6 : AF_INET, a.bytes.data(), buf, sizeof buf);
  return buf;
}

// Every address of `host`, looked up by the system resolver on a thread of
// its own so that a slow lookup ends the step at `limit` (the thread is
// left to finish by itself). A literal is its own address.
std::optional<std::vector<oa::ip_address>> resolve_oauth_host(const std::string& host, steady::time_point limit,
                                                              std::string* error) {
  if (auto lit = oa::parse_ip_literal(host)) return std::vector<oa::ip_address>{*lit};
  struct lookup {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int rc = 0;
    std::vector<oa::ip_address> out;
  };
  auto l = std::make_shared<lookup>();
  std::thread([l, host] {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
    std::vector<oa::ip_address> out;
    for (auto* p = res; rc == 0 && p; p = p->ai_next) {
      std::optional<oa::ip_address> a;
      if (p->ai_family == AF_INET)
        a = oa::ip_from_bytes(
          reinterpret_cast<const unsigned char*>(&reinterpret_cast<sockaddr_in*>(p->ai_addr)->sin_addr), 4);
      else if (p->ai_family == AF_INET6)
        a = oa::ip_from_bytes(
          reinterpret_cast<const unsigned char*>(&reinterpret_cast<sockaddr_in6*>(p->ai_addr)->sin6_addr), 16);
      if (a && std::find(out.begin(), out.end(), *a) == out.end()) out.push_back(*a);
    }
    if (res) ::freeaddrinfo(res);
    {
      std::lock_guard<std::mutex> lock(l->mu);
      l->done = true;
      l->rc = rc;
      l->out = std::move(out);
    }
    l->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(l->mu);
  if (!l->cv.wait_until(lock, limit, [&] { return l->done; })) {
    if (error) *error = "looking up '" + escape_for_display(host.substr(0, 200)) + "' did not finish in time";
    return std::nullopt;
  }
  if (l->rc != 0 || l->out.empty()) {
    if (error)
      *error = "cannot look up '" + escape_for_display(host.substr(0, 200)) + "'"
               + (l->rc != 0 ? std::string(" (") + ::gai_strerror(l->rc) + ")" : std::string());
    return std::nullopt;
  }
  return l->out;
}

std::string describe(const std::string& url) {
  auto p = oa::split_url(url);
  return p ? p->origin + p->path : std::string("<invalid URL>");
}

// libmicrohttpd is loaded when a browser flow needs the redirect listener,
// not with the program: a host embedding the runtime does not map it and
// GnuTLS, which it pulls in (about 3 MB of RSS), for nothing. The daemon
// has it loaded already for its own server.
struct mhd_api {
  decltype(&::MHD_add_response_header) add_response_header = nullptr;
  decltype(&::MHD_create_response_from_buffer) create_response_from_buffer = nullptr;
  decltype(&::MHD_destroy_response) destroy_response = nullptr;
  decltype(&::MHD_get_daemon_info) get_daemon_info = nullptr;
  decltype(&::MHD_queue_response) queue_response = nullptr;
  decltype(&::MHD_start_daemon) start_daemon = nullptr;
  decltype(&::MHD_stop_daemon) stop_daemon = nullptr;
};

// nullptr with `error` set when the library cannot be loaded.
const mhd_api* mhd(std::string* error) {
  static const std::pair<std::optional<mhd_api>, std::string> loaded = [] {
    std::pair<std::optional<mhd_api>, std::string> out;
    try {
      shared_library lib("libmicrohttpd.so.12",
                         "the OAuth redirect listener needs libmicrohttpd (Debian: libmicrohttpd12)");
      mhd_api api;
      lib.resolve("MHD_add_response_header", api.add_response_header);
      lib.resolve("MHD_create_response_from_buffer", api.create_response_from_buffer);
      lib.resolve("MHD_destroy_response", api.destroy_response);
      lib.resolve("MHD_get_daemon_info", api.get_daemon_info);
      lib.resolve("MHD_queue_response", api.queue_response);
      lib.resolve("MHD_start_daemon", api.start_daemon);
      lib.resolve("MHD_stop_daemon", api.stop_daemon);
      out.first = api;
    } catch (const std::exception& e) {
      out.second = e.what();
    }
    return out;
  }();
  if (!loaded.first && error) *error = loaded.second;
  return loaded.first ? &*loaded.first : nullptr;
}

// The loopback listener the authorization server redirects the browser to
// (libmicrohttpd, as the daemon's own HTTP server).
class callback_listener {
public:
  callback_listener() {
    api_ = mhd(&error_);
    if (!api_) return;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    daemon_ = api_->start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, nullptr, nullptr,
                               &callback_listener::on_access, this, MHD_OPTION_SOCK_ADDR,
                               reinterpret_cast<sockaddr*>(&addr), MHD_OPTION_URI_LOG_CALLBACK,
                               &callback_listener::on_uri, this, MHD_OPTION_CONNECTION_LIMIT, 16u,
                               MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_NOTIFY_COMPLETED,
                               &callback_listener::on_completed, nullptr, MHD_OPTION_END);
    if (!daemon_) return;
    if (const auto* info = api_->get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT)) port_ = info->port;
  }
  ~callback_listener() {
    if (daemon_) api_->stop_daemon(daemon_);
  }
  callback_listener(const callback_listener&) = delete;
  callback_listener& operator=(const callback_listener&) = delete;
  int port() const { return port_ > 0 ? port_ : -1; }
  /// Why there is no listener, when the library could not be loaded.
  const std::string& error() const { return error_; }
std::optional<oa::callback_result> wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return result_.has_value() || woken_; });
    return result_;
  }
  void wake() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      woken_ = true;
    }
    cv_.notify_all();
  }

private:
  // The request line's target as sent, query included: the code and state
  // are checked on the raw text (libmicrohttpd hands handlers the path
  // alone).
  static void* on_uri(void*, const char* uri, MHD_Connection*) {
    return new std::string(uri ? std::string(uri).substr(0, 8192) : std::string());
  }
  static void on_completed(void*, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode) {
    delete static_cast<std::string*>(*con_cls);
    *con_cls = nullptr;
  }
  static MHD_Result reply(MHD_Connection* conn, unsigned status, const char* text) {
    const auto* api_ = mhd(nullptr);
    auto* r = api_->create_response_from_buffer(std::strlen(text), const_cast<char*>(text), MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    api_->add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    api_->add_response_header(r, "Cache-Control", "no-store");
    auto ok = api_->queue_response(conn, status, r);
    api_->destroy_response(r);
    return ok;
  }
  static MHD_Result on_access(void* cls, MHD_Connection* conn, const char* path, const char* method, const char*,
                              const char*, size_t* upload_size, void** con_cls) {
    auto* self = static_cast<callback_listener*>(cls);
    std::unique_ptr<std::string> target(static_cast<std::string*>(*con_cls));
    *con_cls = nullptr;
    if (*upload_size != 0) {
      *upload_size = 0; // a body is not expected; ignore it
    }
    if (std::strcmp(method, "GET") != 0 || std::strcmp(path, "/callback") != 0)
      return reply(conn, MHD_HTTP_NOT_FOUND, "Not found.\n");
    std::string_view t = target ? std::string_view(*target) : std::string_view();
    auto q = t.find('?');
    auto r = oa::parse_callback(q == std::string_view::npos ? std::string_view() : t.substr(q + 1));
    if (!r) return reply(conn, MHD_HTTP_BAD_REQUEST, "Missing code.\n");
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      if (!self->result_) self->result_ = std::move(*r);
    }
    self->cv_.notify_all();
    return reply(conn, MHD_HTTP_OK, "mcprt: authorization received. You can close this window.\n");
  }

  const mhd_api* api_ = nullptr;
  std::string error_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<oa::callback_result> result_;
  bool woken_ = false;
};

// The browser command, started with the URL as its last argument; killed
// if it is still running when the flow ends, so no child outlives it.
class browser_process {
public:
  browser_process(const std::string& command, const std::string& url) : pid_(start_browser(command, url)) {}
  ~browser_process() {
    if (pid_ <= 0) return;
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    ::kill(-pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  bool started() const { return pid_ > 0; }

private:
  pid_t pid_ = -1;
};

} // namespace

int start_browser(const std::string& command, const std::string& url) {
  if (command.empty()) return -1;
  // The URL is an argument of the shell, never part of its script.
  const std::string script = command + " \"$1\"";
  const char* argv[] = {"/bin/sh", "-c", script.c_str(), "mcprt-browser", url.c_str(), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  if (posix_spawn(&pid, "/bin/sh", &fa, &attr, const_cast<char**>(argv), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return pid;
}

std::optional<oauth_settings> oauth_settings::from_json(const json& j, std::string* error) {
  oauth_settings s;
  if (j.is_null()) return s;
  if (!j.is_object()) {
    if (error) *error = "'oauth' must be an object";
    return std::nullopt;
  }
  auto str = [&](const char* key, std::string& out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return true;
    if (!it->is_string()) {
      if (error) *error = std::string("'oauth.") + key + "' must be a string";
      return false;
    }
    out = it->get<std::string>();
    return true;
  };
  if (!str("clientId", s.client_id) || !str("clientSecret", s.client_secret)
      || !str("clientMetadataUrl", s.client_metadata_url) || !str("grantType", s.grant_type)
      || !str("privateKey", s.private_key_pem) || !str("signingAlgorithm", s.signing_algorithm)
      || !str("idpTokenEndpoint", s.idp_token_endpoint) || !str("idpClientId", s.idp_client_id)
      || !str("idpClientSecret", s.idp_client_secret) || !str("idpIdToken", s.idp_id_token)
      || !str("clientName", s.client_name))
    return std::nullopt;
  if (auto it = j.find("scopes"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) {
      if (error) *error = "'oauth.scopes' must be an array of strings";
      return std::nullopt;
    }
    for (const auto& v : *it)
      if (v.is_string()) s.scopes.push_back(v.get<std::string>());
  }
  if (s.grant_type != "authorization_code" && s.grant_type != "client_credentials") {
    if (error) *error = "'oauth.grantType' must be \"authorization_code\" or \"client_credentials\"";
    return std::nullopt;
  }
  return s;
}

std::optional<oauth_credentials> memory_credential_store::load(const std::string& server_url, const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find({server_url, key});
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void memory_credential_store::save(const std::string& server_url, const std::string& key, const oauth_credentials& c) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_[{server_url, key}] = c;
}

bool memory_credential_store::forget(const std::string& server_url) {
  std::lock_guard<std::mutex> lock(mu_);
  bool any = false;
  for (auto i = entries_.begin(); i != entries_.end();) {
    if (i->first.first == server_url) {
      i = entries_.erase(i);
      any = true;
    } else {
      ++i;
    }
  }
  return any;
}

file_credential_store::file_credential_store(std::filesystem::path file, std::function<void(const std::string&)> warn)
  : store_(std::move(file)), warn_(std::move(warn)) {}

void file_credential_store::report() {
  for (auto& w : store_.take_warnings())
    if (warn_) warn_(w);
}

std::optional<oauth_credentials> file_credential_store::load(const std::string& server_url, const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto c = store_.get(server_url, key);
  report();
  return c;
}

void file_credential_store::save(const std::string& server_url, const std::string& key, const oauth_credentials& c) {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    store_.put(server_url, key, c);
  } catch (const std::exception& e) {
    if (warn_) warn_(std::string("OAuth credentials not saved: ") + e.what());
  }
  report();
}

bool file_credential_store::forget(const std::string& server_url) {
  std::lock_guard<std::mutex> lock(mu_);
  bool any = store_.forget(server_url);
  report();
  return any;
}

oauth_client::oauth_client(std::string server_url, oauth_settings settings, oauth_interaction interaction,
                           std::shared_ptr<oauth_credential_store> store)
  : server_url_(std::move(server_url)),
    settings_(std::move(settings)),
    interaction_(std::move(interaction)),
    store_(std::move(store)) {}

void oauth_client::cancel() {
  cancelled_ = true;
  std::lock_guard<std::mutex> lock(wake_mu_);
  if (wake_) wake_();
}

std::string oauth_client::client_key() const {
  return settings_.client_id.empty() ? k_dynamic : settings_.client_id;
}

void oauth_client::fail(std::string why) {
  failure_ = std::move(why);
}

struct oauth_client::answer {
  int status = -1;
  std::string body;
  std::string error;    // transport failure or refusal, for people
  bool refused = false; // an endpoint rule said no: the flow stops there
  bool out_of_time = false;
};

steady::time_point oauth_client::step_limit() const {
  auto limit = steady::now() + interaction_.request_timeout;
  if (interaction_.deadline && *interaction_.deadline < limit) limit = *interaction_.deadline;
  return limit;
}

std::string oauth_client::out_of_time() const {
  if (interaction_.deadline && steady::now() + std::chrono::milliseconds(50) >= *interaction_.deadline)
    return "the time given for the authorization ran out";
  return "no answer within " + std::to_string(interaction_.request_timeout.count()) + " ms";
}

std::string oauth_client::check_endpoint(const std::string& role, const std::string& url,
                                         std::vector<oa::ip_address>* addresses) {
  std::string why;
  auto u = http_url::parse(url, &why);
  if (!u) return "refusing the " + role + ": " + why;
  const auto limit = step_limit();
  if (!context_) {
    auto s = http_url::parse(server_url_, &why);
    if (!s) return "the MCP server's URL is not usable: " + why;
    auto server_addresses = resolve_oauth_host(s->host, limit, &why);
    if (!server_addresses) return "cannot check the " + role + " against the MCP server's address: " + why;
    oa::endpoint_context c;
    c.server_scheme = s->scheme;
    c.server_host = s->host;
    c.server_port = s->port;
    c.server_addresses = std::move(*server_addresses);
    if (interaction_.own_listeners) {
      for (const auto& hp : interaction_.own_listeners()) {
        oa::own_listener l;
        l.port = hp.port;
        // A listener whose name does not resolve has no address to avoid.
        if (auto a = resolve_oauth_host(hp.host, limit, nullptr)) l.addresses = std::move(*a);
        c.own.push_back(std::move(l));
      }
    }
    context_ = std::move(c);
  }
  auto found = resolve_oauth_host(u->host, limit, &why);
  if (!found) return "refusing the " + role + " " + escape_for_display(u->display) + ": " + why;
  oa::endpoint_target t{u->scheme, u->host, u->port, u->display, *found};
  auto refusal = oa::endpoint_refusal(role, t, *context_);
  if (refusal.empty() && addresses) *addresses = std::move(*found);
  return refusal;
}

oauth_client::answer oauth_client::send(const std::string& role, const std::string& method, const std::string& url,
                                        const std::vector<std::pair<std::string, std::string>>& headers,
                                        const std::string& body, const std::string& content_type) {
  answer a;
  if (cancelled_.load()) {
    a.error = "the authorization was cancelled";
    a.refused = true;
    return a;
  }
  std::vector<oa::ip_address> addresses;
  if (auto no = check_endpoint(role, url, &addresses); !no.empty()) {
    a.error = std::move(no);
    a.refused = true;
    return a;
  }
  const auto limit = step_limit();
  const auto left = left_until_limit(limit);
  // Only the authorization's deadline ends a flow; a request that merely
  // took request_timeout lets discovery try its next URL.
  auto deadline_passed = [&] {
    return interaction_.deadline && steady::now() + std::chrono::milliseconds(50) >= *interaction_.deadline;
  };
  if (left.count() <= 0) {
    a.error = out_of_time();
    a.out_of_time = deadline_passed();
    return a;
  }
  auto u = http_url::parse(url, nullptr);
  http_request req;
  req.method = method;
  req.url = u->origin() + u->target;
  for (const auto& [k, v] : headers)
    req.headers.emplace_back(k, v);
  if (std::none_of(req.headers.begin(), req.headers.end(),
                   [](const auto& h) { return ascii_iequals(h.first, "Accept"); }))
    req.headers.emplace_back("Accept", "application/json");
  if (method == "POST") {
    req.body = body;
    req.headers.emplace_back("Content-Type", content_type);
  }
  // Connect to the address the rules looked at, not to what a second
  // lookup might say (the TLS name check still uses the host name).
  if (!oa::parse_ip_literal(u->host)) req.connect_address = numeric_host(addresses.front());
  // Each request alone, and all of it within the limit: a server that
  // trickles its answer must not stretch the wait. The client never
  // follows a redirect: it would take the request, and what it carries, to
  // a place no rule above looked at.
  req.fresh_connection = true;
  req.connect_timeout = left;
  req.idle_timeout = left;
  req.total_timeout = left;
  // Never through a proxy: the endpoint rules looked at the addresses
  // this host resolves to, and a proxy would resolve the name anew.
  req.proxy = "direct";
  auto result = http().fetch(std::move(req), k_max_answer, [this](std::function<void()> abort) {
    std::lock_guard<std::mutex> lock(wake_mu_);
    if (cancelled_.load()) abort(); // cancel() came before this request existed
    wake_ = std::move(abort);
  });
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    wake_ = nullptr;
  }
  const std::string where = "the " + role + " " + escape_for_display(u->display);
  if (!result.outcome.ok() || result.truncated) {
    if (cancelled_.load()) {
      a.error = "the authorization was cancelled";
      a.refused = true;
    } else if (result.truncated) {
      a.error = where + " answered more than 1 MiB";
    } else if (result.outcome.failure == http_failure::total_timeout || steady::now() + std::chrono::milliseconds(5) >= limit) {
      a.error = where + ": " + out_of_time();
      a.out_of_time = deadline_passed();
    } else {
      a.error = where + ": " + result.outcome.reason;
    }
    a.body.clear();
    return a;
  }
  const int status = result.head.status;
  if (status >= 300 && status < 400) {
    a.error = where + " answered with a redirect (HTTP " + std::to_string(status)
              + "); OAuth requests never follow redirects";
    a.body.clear();
    return a;
  }
  a.body = std::move(result.body);
  a.status = status;
  return a;
}

http_client& oauth_client::http() {
  if (interaction_.http) return *interaction_.http;
  std::lock_guard<std::mutex> lock(own_http_mu_);
  if (!own_http_) own_http_ = std::make_unique<http_client>();
  return *own_http_;
}

std::string oauth_client::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

std::optional<std::string> oauth_client::authorization() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!loaded_) {
    loaded_ = true;
    if (store_) saved_ = store_->load(server_url_, client_key());
  }
  if (!saved_ || saved_->access_token.empty()) return std::nullopt;
  // A token about to expire is refreshed before it is sent; a failed
  // refresh sends the old one, and the 401 that follows starts over.
  if (saved_->expires_at && *saved_->expires_at - 60 <= unix_now() && !saved_->refresh_token.empty()) refresh_locked();
  if (!saved_ || saved_->access_token.empty()) return std::nullopt;
  return "Bearer " + saved_->access_token;
}

bool oauth_client::on_unauthorized(int status, std::string_view www_authenticate, std::string_view sent) {
  std::lock_guard<std::mutex> lock(mu_);
  auto challenge = oa::parse_www_authenticate(www_authenticate).value_or(oa::bearer_challenge{});
  // Another request or connection authorized while this one waited: use its token.
  adopt_newer_locked();
  if (saved_ && !saved_->access_token.empty() && sent != "Bearer " + saved_->access_token) return true;
  if (status == 401 && saved_ && !saved_->refresh_token.empty() && refresh_locked()) return true;
  std::string scope = challenge.scope;
  // Step-up keeps what was granted and adds what the server asks for.
  if (status == 403 && saved_) scope = oa::merge_scopes(saved_->scope, challenge.scope);
  return run_flow(scope, challenge.resource_metadata);
}

bool oauth_client::authorize() {
  std::lock_guard<std::mutex> lock(mu_);
  return run_flow("", "");
}

bool oauth_client::adopt_newer_locked() {
  // Connections to one server share the store: another one may have
  // refreshed (and so rotated the refresh token) or authorized since.
  if (!store_) return false;
  auto stored = store_->load(server_url_, client_key());
  if (!stored || stored->access_token.empty()) return false;
  if (saved_ && stored->access_token == saved_->access_token) return false;
  saved_ = std::move(stored);
  return true;
}

bool oauth_client::refresh_locked() {
  if (adopt_newer_locked() && !(saved_->expires_at && *saved_->expires_at - 60 <= unix_now())) return true;
  if (!saved_ || saved_->refresh_token.empty()) return false;
  context_.reset();
  auto give_up = [&](std::string why) {
    fail("token refresh: " + why);
    saved_->access_token.clear();
    saved_->refresh_token.clear();
    if (store_) store_->save(server_url_, client_key(), *saved_);
    return false;
  };
  // The issuer's metadata is read again: it says whether the token
  // endpoint the tokens came from is still the issuer's.
  std::string discovered;
  std::vector<std::string> auth_methods;
  bool answered = false;
  if (!saved_->issuer.empty()) {
    for (const auto& u : oa::authorization_server_metadata_urls(saved_->issuer)) {
      auto a = send("authorization server metadata", "GET", u, {}, "", "");
      if (a.refused) return give_up(a.error);
      if (a.status != 200) continue;
      auto m = oa::parse_authorization_server_metadata(oa::parse_answer(a.body), "", nullptr);
      if (!m) continue;
      if (auto why = oa::issuer_mismatch(m->issuer, saved_->issuer); !why.empty()) return give_up(why);
      discovered = m->token_endpoint;
      auth_methods = m->token_endpoint_auth_methods_supported;
      answered = true;
      break;
    }
  }
  // A 2025-03-26 server without metadata: the default endpoint at its
  // origin, where its issuer is.
  auto origin = oa::split_url(server_url_);
  if (!answered && !saved_->issuer.empty() && origin && origin->origin == saved_->issuer)
    discovered = oa::default_endpoints(server_url_).token_endpoint;
  std::string why;
  auto endpoint = oa::refresh_endpoint(saved_->token_endpoint, discovered, &why);
  if (!endpoint) return give_up(why + "; authorize again");
  std::vector<std::pair<std::string, std::string>> form{{"grant_type", "refresh_token"},
                                                        {"refresh_token", saved_->refresh_token}};
  if (!saved_->resource.empty()) form.emplace_back("resource", saved_->resource);
  std::vector<std::pair<std::string, std::string>> headers;
  auto how = oa::choose_client_auth(auth_methods, !saved_->client_secret.empty(), false);
  if (how == oa::client_auth::client_secret_basic)
    headers.emplace_back(
      "Authorization",
      "Basic " + oa::base64(oa::form_escape(saved_->client_id) + ":" + oa::form_escape(saved_->client_secret)));
  else {
    form.emplace_back("client_id", saved_->client_id);
    if (how == oa::client_auth::client_secret_post) form.emplace_back("client_secret", saved_->client_secret);
  }
  auto a =
    send("token endpoint", "POST", *endpoint, headers, oa::form_encode(form), "application/x-www-form-urlencoded");
  auto t = a.status < 0 ? std::nullopt : oa::parse_token_response(a.status, a.body, unix_now(), &why);
  if (!t) {
    // A refresh token rotated by another connection in the meantime: its
    // new tokens are in the store.
    if (adopt_newer_locked()) return true;
    if (a.status < 0) return give_up(a.error);
    return give_up("the token endpoint " + escape_for_display(describe(*endpoint)) + " refused it: " + why);
  }
  saved_->access_token = t->access_token;
  saved_->token_type = t->token_type;
  if (!t->refresh_token.empty()) saved_->refresh_token = t->refresh_token;
  if (!t->scope.empty()) saved_->scope = t->scope;
  saved_->expires_at = t->expires_at;
  // A record from before endpoints were kept is bound from now on.
  saved_->token_endpoint = *endpoint;
  if (store_) store_->save(server_url_, client_key(), *saved_);
  return true;
}

bool oauth_client::run_flow(const std::string& challenge_scope, const std::string& resource_metadata) {
  context_.reset();
  // 1. Protected-resource metadata (RFC 9728); a 2025-03-26 server has none.
  std::optional<oa::protected_resource_metadata> prm;
  for (const auto& u : oa::protected_resource_metadata_urls(server_url_, resource_metadata)) {
    auto a = send("protected resource metadata", "GET", u, {}, "", "");
    // A URL the rules refuse ends the flow: trying the next one would hide why.
    if (a.refused || a.out_of_time) {
      fail(a.error);
      return false;
    }
    if (a.status != 200) continue;
    std::string why;
    prm = oa::parse_protected_resource_metadata(oa::parse_answer(a.body), &why);
    if (prm) break;
  }
  std::string issuer;
  std::string resource;
  if (prm) {
    if (!oa::resource_matches(server_url_, prm->resource)) {
      fail("the server's protected resource metadata names resource '" + describe(prm->resource)
           + "', which is not this server; not authorizing");
      return false;
    }
    if (prm->authorization_servers.empty()) {
      fail("the server's protected resource metadata names no authorization server");
      return false;
    }
    issuer = prm->authorization_servers.front();
    resource = prm->resource;
  } else {
    auto p = oa::split_url(server_url_);
    issuer = p ? p->origin : std::string();
  }

  // 2. Authorization-server metadata (RFC 8414, OpenID discovery); for a
  // server without resource metadata, at its origin or the default endpoints.
  // Its issuer must be the one it was fetched for (RFC 8414 section 3.3).
  // A 2025-03-26 server without resource metadata names no issuer to fetch
  // for: its metadata sits at its own origin and may name a path issuer
  // there (the conformance suite's backcompat server does), so that one is
  // taken as it says.
  std::optional<oa::authorization_server_metadata> meta;
  std::string meta_error;
  for (const auto& u : oa::authorization_server_metadata_urls(issuer)) {
    auto a = send("authorization server metadata", "GET", u, {}, "", "");
    if (a.refused || a.out_of_time) {
      fail(a.error);
      return false;
    }
    if (a.status != 200) continue;
    meta = oa::parse_authorization_server_metadata(oa::parse_answer(a.body), "", &meta_error);
    if (!meta) continue;
    if (auto why = prm ? oa::issuer_mismatch(meta->issuer, issuer) : std::string(); !why.empty()) {
      fail(why);
      return false;
    }
    break;
  }
  if (!meta) {
    if (prm) {
      fail("no authorization server metadata at " + describe(issuer)
           + (meta_error.empty() ? std::string() : " (" + meta_error + ")"));
      return false;
    }
    meta = oa::default_endpoints(server_url_);
  }

  std::string scope;
  if (!settings_.scopes.empty()) {
    for (const auto& s : settings_.scopes) scope = oa::merge_scopes(scope, s);
  } else {
    scope = oa::choose_scope(challenge_scope, prm ? prm->scopes_supported : std::nullopt, meta->scopes_supported, true);
  }

  oauth_credentials fresh;
  fresh.issuer = meta->issuer.empty() ? issuer : meta->issuer;
  fresh.resource = resource;
  fresh.token_endpoint = meta->token_endpoint;

  // Client authentication at the token endpoint, shared by every grant.
  auto authenticate = [&](std::vector<std::pair<std::string, std::string>>& form,
                          std::vector<std::pair<std::string, std::string>>& headers, const std::string& client_id,
                          const std::string& secret) -> bool {
    auto how = oa::choose_client_auth(meta->token_endpoint_auth_methods_supported, !secret.empty(),
                                      !settings_.private_key_pem.empty());
    switch (how) {
      case oa::client_auth::client_secret_basic:
        headers.emplace_back("Authorization",
                             "Basic " + oa::base64(oa::form_escape(client_id) + ":" + oa::form_escape(secret)));
        break;
      case oa::client_auth::client_secret_post:
        form.emplace_back("client_id", client_id);
        form.emplace_back("client_secret", secret);
        break;
      case oa::client_auth::private_key_jwt: {
        std::string why;
        auto audience = meta->issuer.empty() ? issuer : meta->issuer;
        auto jwt = oa::sign_jwt(oa::client_assertion_claims(client_id, audience, unix_now(), oa::base64url(random_bytes(16))),
                                settings_.private_key_pem, settings_.signing_algorithm, &why);
        if (jwt.empty()) {
          fail("cannot sign the client assertion: " + why);
          return false;
        }
        form.emplace_back("client_id", client_id);
        form.emplace_back("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
        form.emplace_back("client_assertion", jwt);
        break;
      }
      case oa::client_auth::none:
        form.emplace_back("client_id", client_id);
        break;
    }
    return true;
  };
  auto token_request = [&](std::vector<std::pair<std::string, std::string>> form, const std::string& client_id,
                           const std::string& secret, const std::string& endpoint, bool client_auth,
                           bool any_type = false,
                           const std::string& role = "token endpoint") -> std::optional<oa::token_response> {
    std::vector<std::pair<std::string, std::string>> headers;
    if (client_auth && !authenticate(form, headers, client_id, secret)) return std::nullopt;
    auto a = send(role, "POST", endpoint, headers, oa::form_encode(form), "application/x-www-form-urlencoded");
    std::string why;
    auto t = a.status < 0 ? std::nullopt : oa::parse_token_response(a.status, a.body, unix_now(), &why, any_type);
    if (!t && a.status < 0) fail(a.error);
    else if (!t) fail("token request at " + escape_for_display(describe(endpoint)) + " failed: " + why);
    return t;
  };
  auto adopt = [&](const oa::token_response& t, const std::string& client_id, const std::string& secret) {
    fresh.client_id = client_id;
    fresh.client_secret = secret;
    fresh.access_token = t.access_token;
    fresh.token_type = t.token_type;
    fresh.refresh_token = t.refresh_token;
    fresh.scope = t.scope.empty() ? scope : t.scope;
    fresh.expires_at = t.expires_at;
    saved_ = fresh;
    loaded_ = true;
    failure_.clear();
    if (store_) store_->save(server_url_, client_key(), fresh);
    return true;
  };

  // 3a. Cross-app access: the IdP's ID token becomes an ID-JAG, the ID-JAG
  // an access token.
  if (!settings_.idp_id_token.empty() && !settings_.idp_token_endpoint.empty()) {
    std::vector<std::pair<std::string, std::string>> x{
      {"grant_type", k_token_exchange},
      {"requested_token_type", "urn:ietf:params:oauth:token-type:id-jag"},
      {"subject_token", settings_.idp_id_token},
      {"subject_token_type", "urn:ietf:params:oauth:token-type:id_token"},
      {"audience", fresh.issuer},
      {"resource", resource.empty() ? oa::canonical_resource(server_url_) : resource}};
    if (!scope.empty()) x.emplace_back("scope", scope);
    x.emplace_back("client_id", settings_.idp_client_id);
    if (!settings_.idp_client_secret.empty()) x.emplace_back("client_secret", settings_.idp_client_secret);
    auto jag =
      token_request(std::move(x), "", "", settings_.idp_token_endpoint, false, true, "IdP token endpoint");
    if (!jag) return false;
    std::vector<std::pair<std::string, std::string>> form{{"grant_type", k_jwt_bearer}, {"assertion", jag->access_token}};
    if (!scope.empty()) form.emplace_back("scope", scope);
    if (!resource.empty()) form.emplace_back("resource", resource);
    auto t = token_request(std::move(form), settings_.client_id, settings_.client_secret, meta->token_endpoint, true);
    return t && adopt(*t, settings_.client_id, settings_.client_secret);
  }

  // 3b. Client credentials: no person involved.
  if (settings_.grant_type == "client_credentials") {
    if (settings_.client_id.empty()) {
      fail("the client_credentials grant needs oauth.clientId");
      return false;
    }
    std::vector<std::pair<std::string, std::string>> form{{"grant_type", "client_credentials"}};
    if (!scope.empty()) form.emplace_back("scope", scope);
    if (!resource.empty()) form.emplace_back("resource", resource);
    auto t = token_request(std::move(form), settings_.client_id, settings_.client_secret, meta->token_endpoint, true);
    return t && adopt(*t, settings_.client_id, settings_.client_secret);
  }

  // 3c. Authorization code with PKCE through a loopback redirect.
  if (!interaction_.interactive) {
    // What went wrong before (a refused refresh) is the more useful half.
    const std::string ask = "the server needs an authorization; run mcprt auth";
    fail(failure_.empty() || failure_.rfind(ask, 0) == 0 ? ask : ask + " (" + failure_ + ")");
    return false;
  }
  if (meta->authorization_endpoint.empty()) {
    fail("the authorization server publishes no authorization endpoint");
    return false;
  }
  // The browser goes there, not this process; the same rules hold anyway
  // (a person would otherwise be sent to the daemon or into the network).
  if (auto no = check_endpoint("authorization endpoint", meta->authorization_endpoint, nullptr); !no.empty()) {
    fail(no);
    return false;
  }
  if (!meta->code_challenge_methods_supported.empty()
      && std::find(meta->code_challenge_methods_supported.begin(), meta->code_challenge_methods_supported.end(), "S256")
           == meta->code_challenge_methods_supported.end()) {
    fail("the authorization server does not support PKCE with S256; not authorizing");
    return false;
  }
  callback_listener listener;
  if (listener.port() <= 0) {
    fail(listener.error().empty() ? "cannot listen on 127.0.0.1 for the authorization redirect" : listener.error());
    return false;
  }
  const std::string redirect_uri = "http://127.0.0.1:" + std::to_string(listener.port()) + "/callback";

  // Client identity: pre-registered, a metadata document URL, a client
  // registered earlier, or a fresh registration.
  std::string client_id = settings_.client_id;
  std::string secret = settings_.client_secret;
  if (client_id.empty() && !settings_.client_metadata_url.empty() && meta->client_id_metadata_document_supported)
    client_id = settings_.client_metadata_url;
  // A stored client secret goes only to the token endpoint it was issued
  // for: an issuer that moved its token endpoint gets a new registration.
  if (client_id.empty() && saved_ && !saved_->client_id.empty() && saved_->issuer == fresh.issuer
      && (saved_->token_endpoint.empty() || saved_->token_endpoint == meta->token_endpoint)) {
    client_id = saved_->client_id;
    secret = saved_->client_secret;
  }
  if (client_id.empty()) {
    if (meta->registration_endpoint.empty()) {
      fail("the authorization server offers no client registration; set oauth.clientId");
      return false;
    }
    auto how = meta->token_endpoint_auth_methods_supported.empty() ? std::string("client_secret_basic")
                                                                    : meta->token_endpoint_auth_methods_supported.front();
    if (how != "none" && how != "client_secret_basic" && how != "client_secret_post") how = "none";
    auto req = oa::registration_request(settings_.client_name, {redirect_uri}, scope, how);
    auto a =
      send("registration endpoint", "POST", meta->registration_endpoint, {}, req.dump(), "application/json");
    std::string why;
    auto reg = a.status < 0 ? std::nullopt : oa::parse_registration_response(a.status, a.body, &why);
    if (!reg) {
      fail(a.status < 0 ? "client registration failed: " + a.error
                        : "client registration at " + escape_for_display(describe(meta->registration_endpoint))
                            + " failed: " + why);
      return false;
    }
    client_id = reg->client_id;
    secret = reg->client_secret;
  }

  auto pkce = oa::make_pkce(random_bytes(32));
  const std::string state = oa::base64url(random_bytes(16));
  oa::authorization_request ar{client_id, redirect_uri, scope, state, pkce.challenge, resource};
  const std::string url = oa::authorization_url(meta->authorization_endpoint, ar);
  if (interaction_.on_authorization_url) interaction_.on_authorization_url(url);
  std::optional<browser_process> browser;
  if (!interaction_.browser_command.empty()) browser.emplace(interaction_.browser_command, url);
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    wake_ = [&listener] { listener.wake(); };
  }
  auto wait = interaction_.callback_timeout;
  if (interaction_.deadline) wait = std::min(wait, left_until_limit(*interaction_.deadline));
  auto cb = cancelled_.load() ? std::nullopt : listener.wait(wait);
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    wake_ = nullptr;
  }
  if (cancelled_.load()) {
    fail("the authorization was cancelled");
    return false;
  }
  if (!cb) {
    fail(wait < interaction_.callback_timeout
           ? "no authorization arrived at the redirect before " + out_of_time()
           : "no authorization arrived at the redirect within "
               + std::to_string(interaction_.callback_timeout.count() / 1000) + " s");
    return false;
  }
  if (cb->state != state) {
    fail("the authorization redirect carried a wrong state; ignored");
    return false;
  }
  // RFC 9207: the response names the issuer that sent it, so a response
  // from another authorization server (a mix-up) is not taken for this one's.
  if (auto why = oa::callback_issuer_problem(cb->iss, meta->issuer.empty() ? issuer : meta->issuer,
                                             meta->authorization_response_iss_parameter_supported);
      !why.empty()) {
    fail(why);
    return false;
  }
  if (!cb->error.empty() || cb->code.empty()) {
    fail("the authorization was refused: " + cb->error.substr(0, 80));
    return false;
  }
  std::vector<std::pair<std::string, std::string>> form{{"grant_type", "authorization_code"},
                                                        {"code", cb->code},
                                                        {"redirect_uri", redirect_uri},
                                                        {"code_verifier", pkce.verifier}};
  if (!resource.empty()) form.emplace_back("resource", resource);
  auto t = token_request(std::move(form), client_id, secret, meta->token_endpoint, true);
  return t && adopt(*t, client_id, secret);
}

} // namespace mcprt::io
