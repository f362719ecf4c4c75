#include "mcprt/oauth_broker.hpp"

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

std::function<void()> oauth_broker::begin_async(const server_config& server, const authorize_options& options,
                                                std::function<void(std::optional<started>, const std::string&)> on_started,
                                                std::function<void(bool, const std::string&)> on_end) {
  std::string error;
  auto url = oauth_server_url(server);
  if (!url) {
    on_started(std::nullopt, server.name + " is not a streamable-HTTP server; OAuth applies to those only");
    return {};
  }
  if (oauth_disabled(server)) {
    on_started(std::nullopt, server.name + " has OAuth turned off (\"oauth\": {\"enabled\": false})");
    return {};
  }
  auto settings = settings_of(server, error);
  if (!settings) {
    on_started(std::nullopt, error);
    return {};
  }

  auto f = std::make_shared<flow>();
  // Whoever tells first (the URL, or the flow's end) answers `on_started`.
  // Not through `f`: the client holds this, and `f` holds the client.
  struct teller {
    std::mutex mu;
    std::function<void(std::optional<started>, const std::string&)> fn;
  };
  auto tell = std::make_shared<teller>();
  tell->fn = std::move(on_started);
  auto tell_once = [tell](std::optional<started> s, const std::string& why) {
    std::function<void(std::optional<started>, const std::string&)> fn;
    {
      std::lock_guard<std::mutex> lock(tell->mu);
      fn = std::move(tell->fn);
      tell->fn = nullptr;
    }
    if (fn) fn(std::move(s), why);
  };
  io::oauth_interaction interaction;
  interaction.interactive = true;
  interaction.browser_command = options.browser_command;
  interaction.callback_timeout = options.callback_timeout;
  interaction.deadline = options.deadline;
  interaction.own_listeners = [own = own_] { return own->get(); };
  interaction.http = http_;
  interaction.on_authorization_url = [tell_once](const std::string& u) { tell_once(started{u, false}, {}); };
  f->client = std::make_shared<io::oauth_client>(*url, std::move(*settings), std::move(interaction), store_);

  std::shared_ptr<flow> previous;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) {
      tell_once(std::nullopt, "the runtime is stopping");
      return {};
    }
    auto& slot = flows_[server.name];
    previous = std::move(slot);
    slot = f;
    // Under the lock: shutdown() joins this thread only once it is set.
    const std::string name = server.name;
    f->thread = std::thread([f, previous, name, tell_once, on_end = std::move(on_end)] {
      // The flow this one replaces ends first, here: nobody waits for it.
      if (previous) {
        previous->client->cancel();
        if (previous->thread.joinable()) previous->thread.join();
      }
      bool ok = false;
      try {
        ok = f->client->authorize();
      } catch (const std::exception& e) {
        spdlog::warn("[{}] authorization failed: {}", escape_for_display(name), escape_for_display(e.what()));
      }
      auto why = ok ? std::string() : f->client->failure();
      if (ok) tell_once(started{{}, true}, {});
      else tell_once(std::nullopt, why);
      if (on_end) on_end(ok, why);
    });
  }
  return [weak = std::weak_ptr<flow>(f)] {
    if (auto fl = weak.lock()) fl->client->cancel();
  };
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
