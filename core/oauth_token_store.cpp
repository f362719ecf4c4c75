#include "core/oauth_token_store.hpp"

#include "core/untrusted_text.hpp"

#include <limits>
#include <stdexcept>
#include <utility>

namespace fs = std::filesystem;
using nlohmann::json;

namespace mcprt {

namespace {

constexpr const char* tokens_label = "OAuth credentials file";

// The string fields of a record, by their name in the file.
struct token_string_field {
  const char* name;
  std::string oauth_credentials::*member;
};
constexpr token_string_field string_fields[] = {
  {"issuer", &oauth_credentials::issuer},
  {"client_id", &oauth_credentials::client_id},
  {"client_secret", &oauth_credentials::client_secret},
  {"access_token", &oauth_credentials::access_token},
  {"token_type", &oauth_credentials::token_type},
  {"refresh_token", &oauth_credentials::refresh_token},
  {"scope", &oauth_credentials::scope},
  {"resource", &oauth_credentials::resource},
  {"token_endpoint", &oauth_credentials::token_endpoint},
};

struct time_field {
  const char* name;
  std::optional<std::int64_t> oauth_credentials::*member;
};
constexpr time_field time_fields[] = {
  {"client_secret_expires_at", &oauth_credentials::client_secret_expires_at},
  {"expires_at", &oauth_credentials::expires_at},
};

// The fields that belong to an issued token rather than to the client
// registration; forget_tokens() drops these.
constexpr const char* token_fields[] = {"access_token", "refresh_token", "token_type", "expires_at"};

bool is_int64(const json& v) {
  if (v.is_number_unsigned())
    return v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  return v.is_number_integer();
}

// Empty when `rec` is a usable record, else what is wrong with it. Names
// fields and JSON types only: the values are secrets.
std::string token_record_problem(const json& rec) {
  if (!rec.is_object()) return std::string{"is a "} + rec.type_name() + ", not an object";
  for (auto& f : string_fields) {
    auto it = rec.find(f.name);
    if (it != rec.end() && !it->is_string())
      return std::string{"has \""} + f.name + "\" of type " + it->type_name() + ", expected a string";
  }
  for (auto& f : time_fields) {
    auto it = rec.find(f.name);
    if (it != rec.end() && !it->is_null() && !is_int64(*it))
      return std::string{"has \""} + f.name + "\" of type " + it->type_name()
             + ", expected an integer (unix seconds)";
  }
  return {};
}

// A server URL or client key, quoted in a warning that reaches a terminal
// or a log. These are names, not secrets.
std::string shown_token_text(const std::string& text) {
  return escape_for_display(text.substr(0, 200));
}

// A server URL as a warning shows it: its query or user info may carry an
// API key, so they are cut, as http_url's display form does (that form
// also adds the port, which would not match the key in the file).
std::string shown_url(const std::string& url) {
  auto s = url;
  auto cut = s.find_first_of("?#");
  if (cut != std::string::npos) s.resize(cut);
  auto scheme = s.find("://");
  auto authority = scheme == std::string::npos ? 0 : scheme + 3;
  auto path = s.find('/', authority);
  auto at = s.substr(authority, path == std::string::npos ? std::string::npos : path - authority).rfind('@');
  if (at != std::string::npos) s.erase(authority, at + 1);
  return shown_token_text(s) + (cut != std::string::npos ? "?…" : "");
}

json_file_store::validator tokens_validator(const fs::path& file) {
  return [file = "'" + file.string() + "'"](json& doc, std::vector<std::string>& problems) {
    json kept = json::object();
    for (auto& [url, clients] : doc.items()) {
      if (!clients.is_object()) {
        problems.push_back(std::string{tokens_label} + " " + file + ": the record for server \"" + shown_url(url)
                           + "\" is a " + clients.type_name() + ", not an object; ignoring it");
        continue;
      }
      auto& server = kept[url] = json::object();
      for (auto& [key, rec] : clients.items()) {
        auto why = token_record_problem(rec);
        if (!why.empty()) {
          problems.push_back(std::string{tokens_label} + " " + file + ": the record for client \"" + shown_token_text(key)
                             + "\" of server \"" + shown_url(url) + "\" " + why + "; ignoring it");
          continue;
        }
        server[key] = std::move(rec);
      }
    }
    doc = std::move(kept);
  };
}

oauth_credentials from_json(const json& rec) {
  oauth_credentials out;
  for (auto& f : string_fields)
    if (auto it = rec.find(f.name); it != rec.end()) out.*f.member = it->get<std::string>();
  for (auto& f : time_fields)
    if (auto it = rec.find(f.name); it != rec.end() && !it->is_null()) out.*f.member = it->get<std::int64_t>();
  return out;
}

json to_json(const oauth_credentials& c) {
  json out = json::object();
  for (auto& f : string_fields)
    if (!(c.*f.member).empty()) out[f.name] = c.*f.member;
  for (auto& f : time_fields)
    if (c.*f.member) out[f.name] = *(c.*f.member);
  return out;
}

void require_names(const std::string& server_url, const std::string* client_key) {
  if (server_url.empty()) throw std::invalid_argument("oauth_token_store: empty server URL");
  if (client_key && client_key->empty()) throw std::invalid_argument("oauth_token_store: empty client key");
}

} // namespace

bool oauth_credentials::operator==(const oauth_credentials& other) const {
  return issuer == other.issuer && client_id == other.client_id && client_secret == other.client_secret
         && client_secret_expires_at == other.client_secret_expires_at && access_token == other.access_token
         && token_type == other.token_type && refresh_token == other.refresh_token && scope == other.scope
         && expires_at == other.expires_at && resource == other.resource
         && token_endpoint == other.token_endpoint;
}

oauth_token_store::oauth_token_store(fs::path file) : store_(file, tokens_label, tokens_validator(file)) {}

fs::path oauth_token_store::default_path(const fs::path& home, std::string_view config_dir) {
  return home / fs::path{config_dir} / "mcp-oauth.json";
}

std::optional<oauth_credentials> oauth_token_store::get(const std::string& server_url,
                                                        const std::string& client_key) {
  auto& data = store_.read();
  auto server = data.find(server_url);
  if (server == data.end()) return std::nullopt;
  auto rec = server->find(client_key);
  if (rec == server->end()) return std::nullopt;
  // The validator kept only records whose fields have the right types.
  return from_json(*rec);
}

void oauth_token_store::put(const std::string& server_url, const std::string& client_key,
                            const oauth_credentials& credentials) {
  require_names(server_url, &client_key);
  auto rec = to_json(credentials);
  store_.update([&](json& data) { data[server_url][client_key] = rec; });
}

bool oauth_token_store::forget(const std::string& server_url) {
  require_names(server_url, nullptr);
  bool dropped = false;
  store_.update([&](json& data) { dropped = data.erase(server_url) > 0; });
  return dropped;
}

bool oauth_token_store::forget_tokens(const std::string& server_url, const std::string& client_key) {
  require_names(server_url, &client_key);
  bool dropped = false;
  store_.update([&](json& data) {
    auto server = data.find(server_url);
    if (server == data.end()) return;
    auto rec = server->find(client_key);
    if (rec == server->end()) return;
    for (auto name : token_fields)
      dropped = rec->erase(name) > 0 || dropped;
  });
  return dropped;
}

} // namespace mcprt
