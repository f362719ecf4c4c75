// What authorization and resource servers (anyone's) send mcprt's OAuth
// client, through core/oauth: a 401's WWW-Authenticate header, the
// metadata documents, token and registration answers, and the query of the
// redirect that reaches our loopback listener.
//
// Input: the first byte picks the parser, the rest is its text. Whatever
// the bytes: nothing crashes or hangs; a discovered URL is http(s); an
// error text never carries the answer's token.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/oauth.hpp"

namespace oa = mcprt::oauth;

namespace {
void check(bool ok) {
  if (!ok) std::abort();
}
// Schemes are case-insensitive: "HTTP://" is as good as "http://".
bool http_url(const std::string& u) {
  std::string head = u.substr(0, 8);
  for (auto& c : head)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return head.rfind("http://", 0) == 0 || head.rfind("https://", 0) == 0;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned pick = data[0] % 6;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string error;
  switch (pick) {
    case 0: {
      auto c = oa::parse_www_authenticate(in);
      if (c)
        for (auto& u : oa::protected_resource_metadata_urls("http://127.0.0.1:1/mcp", c->resource_metadata))
          check(http_url(u));
      break;
    }
    case 1: {
      auto m = oa::parse_protected_resource_metadata(oa::parse_answer(in), &error);
      if (m) {
        for (auto& s : m->authorization_servers) {
          check(http_url(s));
          for (auto& u : oa::authorization_server_metadata_urls(s))
            check(http_url(u));
        }
        (void)oa::resource_matches("http://127.0.0.1:1/mcp", m->resource);
      }
      break;
    }
    case 2: {
      auto m = oa::parse_authorization_server_metadata(oa::parse_answer(in), "", &error);
      if (m) check(http_url(m->token_endpoint));
      break;
    }
    case 3: {
      auto t = oa::parse_token_response(400, in, 0, &error);
      check(!t);
      auto j = oa::parse_answer(in);
      if (j.is_object() && j.contains("access_token") && j["access_token"].is_string()) {
        auto token = j["access_token"].get<std::string>();
        // The server's own error code and description are shown; the token only through them.
        auto shown = j.value("error", nlohmann::json()).dump() + j.value("error_description", nlohmann::json()).dump();
        if (token.size() >= 8 && shown.find(token) == std::string::npos) check(error.find(token) == std::string::npos);
      }
      (void)oa::parse_token_response(200, in, 0, &error);
      break;
    }
    case 4:
      (void)oa::parse_registration_response(201, in, &error);
      break;
    case 5:
      (void)oa::parse_callback(in);
      (void)oa::canonical_resource(in);
      (void)oa::split_url(in);
      break;
  }
  return 0;
}
