#include "io/http_common.hpp"

#include <httplib.h>

#include <algorithm>
#include <array>

#include "core/ascii.hpp"
#include "core/http_url.hpp"

namespace mcprt::io {

std::unique_ptr<httplib::ClientImpl> make_http_client(const http_url& url, std::chrono::milliseconds connect,
                                                      std::chrono::milliseconds read, std::chrono::milliseconds write) {
  std::unique_ptr<httplib::ClientImpl> c;
  if (url.scheme == "https") {
    auto ssl = std::make_unique<httplib::SSLClient>(url.host, url.port);
    ssl->enable_server_certificate_verification(true);
    c = std::move(ssl);
  } else {
    c = std::make_unique<httplib::ClientImpl>(url.host, url.port);
  }
  c->set_keep_alive(true);
  c->set_follow_location(false);
  c->set_connection_timeout(connect);
  c->set_read_timeout(read);
  c->set_write_timeout(write);
  return c;
}

std::string media_type(const httplib::Response& res) {
  auto ct = res.get_header_value("Content-Type");
  return ascii_lower(trim_space(std::string_view(ct).substr(0, ct.find(';'))));
}

std::string describe_http_error(httplib::Error err, std::chrono::milliseconds timeout) {
  switch (err) {
    case httplib::Error::Connection: return "cannot connect (connection refused or host unreachable)";
    case httplib::Error::ConnectionTimeout: return "connect timed out";
    case httplib::Error::BindIPAddress: return "cannot bind the local address";
    case httplib::Error::Read:
      return "connection lost or nothing received within " + std::to_string(timeout.count()) + " ms";
    case httplib::Error::Write: return "connection lost while sending the request";
    case httplib::Error::Canceled: return "request cancelled";
    case httplib::Error::SSLConnection: return "TLS handshake failed";
    case httplib::Error::SSLLoadingCerts: return "cannot load the TLS CA certificates";
    case httplib::Error::SSLServerVerification: return "TLS server certificate verification failed";
    case httplib::Error::ExceedRedirectCount: return "too many redirects";
    case httplib::Error::Compression: return "cannot decompress the response";
    default: return "request failed (" + httplib::to_string(err) + ")";
  }
}

// Cut on a character boundary, so UTF-8 text stays UTF-8; the connection
// actor replaces whatever else is invalid before a reason reaches JSON.
std::string excerpt(std::string_view text, std::size_t max) {
  std::size_t cut = std::min(text.size(), max);
  for (int k = 0; k < 3 && cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80;
       ++k)
    --cut;
  std::string out;
  for (char c : text.substr(0, cut)) {
    unsigned char u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u == 0x7f ? ' ' : c);
  }
  if (text.size() > cut) out += "…";
  return out;
}

bool valid_header_name(std::string_view name) {
  if (name.empty()) return false;
  for (unsigned char c : name)
    if (c <= 0x20 || c >= 0x7f || c == ':') return false;
  return true;
}

bool valid_header_value(std::string_view value) {
  for (unsigned char c : value)
    if (c == '\r' || c == '\n' || c == '\0') return false;
  return true;
}

bool transport_owned_header(std::string_view name) {
  static constexpr std::array<std::string_view, 9> owned = {
    "accept", "content-type",   "content-length",       "transfer-encoding", "connection",
    "host",   "mcp-session-id", "mcp-protocol-version", "last-event-id"};
  return std::any_of(owned.begin(), owned.end(), [&](std::string_view o) { return ascii_iequals(o, name); });
}

std::vector<std::string> query_values(std::string_view target) {
  std::vector<std::string> out;
  auto q = target.find('?');
  if (q == std::string_view::npos) return out;
  auto rest = target.substr(q + 1);
  while (!rest.empty()) {
    auto amp = rest.find('&');
    auto pair = rest.substr(0, amp);
    auto eq = pair.find('=');
    if (eq != std::string_view::npos) out.emplace_back(pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return out;
}

} // namespace mcprt::io
