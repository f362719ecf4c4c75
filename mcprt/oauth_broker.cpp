#include "mcprt/oauth_broker.hpp"

#include <condition_variable>

#include <spdlog/spdlog.h>

#include "core/http_url.hpp"
#include "core/untrusted_text.hpp"
#include "io/oauth_client.hpp"

namespace mcprt {

std::optional<std::string> oauth_server_url(const server_config& server) {
  if (server.transport() != transport_kind::http) return std::nullopt;
  if (server.http_url) return *server.http_url;
  if (server.url) return *server.url;
  return std::nullopt;
}

namespace {

// `"oauth": {"enabled": false}` turns OAuth off for a server; anything else
// (absent included) leaves it on: a 401 is answered by discovery.
bool oauth_disabled(const server_config& server) {
  auto i = server.spec.find("oauth");
  if (i == server.spec.end() || !i->is_object()) return false;
  auto e = i->find("enabled");
  return e != i->end() && e->is_boolean() && !e->get<bool>();
}

std::optional<io::oauth_settings> settings_of(const server_config& server, std::string& error) {
  auto i = server.spec.find("oauth");
  return io::oauth_settings::from_json(i == server.spec.end() ? nlohmann::json() : *i, &error);
}

} // namespace

struct oauth_broker::listeners {
  std::mutex mu;
  std::vector<host_port> list;
  std::vector<host_port> get() {
    std::lock_guard<std::mutex> lock(mu);
    return list;
  }
};

struct oauth_broker::flow {
  std::shared_ptr<io::oauth_client> client;
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  std::optional<std::string> url;
  bool ended = false;
  bool ok = false;
};

oauth_broker::oauth_broker(std::filesystem::path credentials_file, io::http_client* http)
  : http_(http),
    file_(std::move(credentials_file)),
    own_(std::make_shared<listeners>()),
    store_(std::make_shared<io::file_credential_store>(file_, [](const std::string& warning) {
      spdlog::warn("{}", escape_for_display(warning));
    })) {}

void oauth_broker::set_own_listeners(std::vector<listen_endpoint> listeners) {
  std::vector<host_port> list;
  for (auto& l : listeners)
    if (l.port > 0 && l.port <= 65535) list.push_back(host_port{std::move(l.host), static_cast<uint16_t>(l.port)});
  std::lock_guard<std::mutex> lock(own_->mu);
  own_->list = std::move(list);
}

oauth_broker::~oauth_broker() {
  shutdown();
}

std::shared_ptr<io::http_auth> oauth_broker::client_for(const server_config& server) {
  auto url = oauth_server_url(server);
  if (!url || oauth_disabled(server)) return nullptr;
  std::string error;
  auto settings = settings_of(server, error);
  if (!settings) {
    spdlog::warn("[{}] oauth settings ignored: {}", escape_for_display(server.name), escape_for_display(error));
    return nullptr;
  }
  io::oauth_interaction quiet;
  quiet.interactive = false;
  quiet.own_listeners = [own = own_] { return own->get(); };
  quiet.http = http_;
  return std::make_shared<io::oauth_client>(*url, std::move(*settings), std::move(quiet), store_);
}

std::optional<oauth_broker::started> oauth_broker::begin(const server_config& server, const authorize_options& options,
                                                         std::function<void(bool, const std::string&)> on_end,
                                                         std::string& error) {
  auto url = oauth_server_url(server);
  if (!url) {
    error = server.name + " is not a streamable-HTTP server; OAuth applies to those only";
    return std::nullopt;
  }
  if (oauth_disabled(server)) {
    error = server.name + " has OAuth turned off (\"oauth\": {\"enabled\": false})";
    return std::nullopt;
  }
  auto settings = settings_of(server, error);
  if (!settings) return std::nullopt;

  auto f = std::make_shared<flow>();
  io::oauth_interaction interaction;
  interaction.interactive = true;
  interaction.browser_command = options.browser_command;
  interaction.callback_timeout = options.callback_timeout;
  interaction.deadline = options.deadline;
  interaction.own_listeners = [own = own_] { return own->get(); };
  interaction.http = http_;
  std::weak_ptr<flow> weak = f;
  interaction.on_authorization_url = [weak](const std::string& u) {
    if (auto fl = weak.lock()) {
      {
        std::lock_guard<std::mutex> lock(fl->mu);
        fl->url = u;
      }
      fl->cv.notify_all();
    }
  };
  f->client = std::make_shared<io::oauth_client>(*url, std::move(*settings), std::move(interaction), store_);

  std::shared_ptr<flow> previous;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) {
      error = "the runtime is stopping";
      return std::nullopt;
    }
    auto& slot = flows_[server.name];
    previous = std::move(slot);
    slot = f;
  }
  if (previous) {
    previous->client->cancel();
    if (previous->thread.joinable()) previous->thread.join();
  }

  const std::string name = server.name;
  f->thread = std::thread([f, name, on_end = std::move(on_end)] {
    bool ok = false;
    try {
      ok = f->client->authorize();
    } catch (const std::exception& e) {
      spdlog::warn("[{}] authorization failed: {}", escape_for_display(name), escape_for_display(e.what()));
    }
    auto why = ok ? std::string() : f->client->failure();
    {
      std::lock_guard<std::mutex> lock(f->mu);
      f->ended = true;
      f->ok = ok;
    }
    f->cv.notify_all();
    if (on_end) on_end(ok, why);
  });

  std::unique_lock<std::mutex> lock(f->mu);
  auto until = std::chrono::steady_clock::now() + options.url_timeout;
  if (options.deadline && *options.deadline < until) until = *options.deadline;
  f->cv.wait_until(lock, until, [&] { return f->url.has_value() || f->ended; });
  // The flow's own steps end at the same deadline: a moment more lets its
  // reason (which step ran out) be the answer.
  if (!f->url && !f->ended && options.deadline && *options.deadline <= until)
    f->cv.wait_for(lock, std::chrono::milliseconds(250), [&] { return f->url.has_value() || f->ended; });
  if (f->url) return started{*f->url, false};
  if (f->ended && f->ok) return started{{}, true};
  error = f->ended ? f->client->failure()
                   : options.deadline && *options.deadline <= until
                       ? "no authorization URL before the time given for the authorization ran out"
                       : "no authorization URL within " + std::to_string(options.url_timeout.count()) + " ms";
  lock.unlock();
  if (!f->ended) f->client->cancel();
  return std::nullopt;
}

bool oauth_broker::forget(const server_config& server) {
  auto url = oauth_server_url(server);
  if (!url) return false;
  return store_->forget(*url);
}

void oauth_broker::shutdown() {
  std::map<std::string, std::shared_ptr<flow>> flows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    flows.swap(flows_);
  }
  for (auto& [name, f] : flows) {
    f->client->cancel();
    if (f->thread.joinable()) f->thread.join();
  }
}

} // namespace mcprt
