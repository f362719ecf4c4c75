#include "core/oauth_endpoints.hpp"

#include <gtest/gtest.h>

#include "core/oauth.hpp"

using namespace mcprt::oauth;

namespace {

ip_address ip(const char* text) {
  auto a = parse_ip_literal(text);
  EXPECT_TRUE(a) << text;
  return a.value_or(ip_address{});
}

// The MCP server at http://127.0.0.1:8000/mcp, with the daemon on 127.0.0.1:4711.
endpoint_context loopback_server() {
  endpoint_context c;
  c.server_scheme = "http";
  c.server_host = "127.0.0.1";
  c.server_port = 8000;
  c.server_addresses = {ip("127.0.0.1")};
  own_listener daemon;
  daemon.addresses = {ip("127.0.0.1")};
  daemon.port = 4711;
  c.own.push_back(daemon);
  return c;
}

endpoint_context public_server() {
  endpoint_context c;
  c.server_scheme = "https";
  c.server_host = "mcp.example.com";
  c.server_port = 443;
  c.server_addresses = {ip("93.184.216.34"), ip("2606:2800:220:1::1")};
  return c;
}

endpoint_target target(const char* scheme, const char* host, int port, std::vector<ip_address> addresses) {
  endpoint_target t;
  t.scheme = scheme;
  t.host = host;
  t.port = port;
  t.shown = std::string(scheme) + "://" + host + ":" + std::to_string(port) + "/x";
  t.addresses = std::move(addresses);
  return t;
}

} // namespace

TEST(OAuthEndpointRules, ScopesAreDecidedByTheAddressNotItsText) {
  EXPECT_EQ(scope_of(ip("127.0.0.1")), address_scope::loopback);
  EXPECT_EQ(scope_of(ip("127.255.3.4")), address_scope::loopback);
  EXPECT_EQ(scope_of(ip("::1")), address_scope::loopback);
  EXPECT_EQ(scope_of(ip("[::ffff:127.0.0.1]")), address_scope::loopback) << "an IPv4-mapped address is IPv4";
  EXPECT_EQ(scope_of(ip("10.0.0.1")), address_scope::private_network);
  EXPECT_EQ(scope_of(ip("172.16.0.1")), address_scope::private_network);
  EXPECT_EQ(scope_of(ip("172.31.255.255")), address_scope::private_network);
  EXPECT_EQ(scope_of(ip("172.32.0.1")), address_scope::public_network);
  EXPECT_EQ(scope_of(ip("192.168.1.1")), address_scope::private_network);
  EXPECT_EQ(scope_of(ip("169.254.169.254")), address_scope::private_network);
  EXPECT_EQ(scope_of(ip("fd00::1")), address_scope::private_network);
  EXPECT_EQ(scope_of(ip("fc00::1")), address_scope::private_network);
  EXPECT_EQ(scope_of(ip("fe80::1")), address_scope::private_network);
  EXPECT_EQ(scope_of(ip("0.0.0.0")), address_scope::unspecified);
  EXPECT_EQ(scope_of(ip("::")), address_scope::unspecified);
  EXPECT_EQ(scope_of(ip("8.8.8.8")), address_scope::public_network);
  EXPECT_EQ(scope_of(ip("2001:db8::1")), address_scope::public_network);
  // Names and the resolver's odd numeric forms are not literals: what the
  // resolver makes of them is judged instead.
  EXPECT_FALSE(parse_ip_literal("127.evil.example"));
  EXPECT_FALSE(parse_ip_literal("127.1"));
  EXPECT_FALSE(parse_ip_literal("localhost"));
}

TEST(OAuthEndpointRules, TheDaemonsOwnListenerIsNeverAnEndpoint) {
  auto c = loopback_server();
  auto why = endpoint_refusal("registration endpoint", target("http", "127.0.0.1", 4711, {ip("127.0.0.1")}), c);
  EXPECT_NE(why.find("registration endpoint http://127.0.0.1:4711/x"), std::string::npos) << why;
  EXPECT_NE(why.find("mcprt's own HTTP listener"), std::string::npos) << why;
  // By name too: every address a name resolves to is checked.
  EXPECT_FALSE(endpoint_refusal("token endpoint", target("http", "localhost", 4711, {ip("::1"), ip("127.0.0.1")}), c).empty());
  // A listener on every address is every address at that port.
  own_listener any;
  any.addresses = {ip("0.0.0.0")};
  any.port = 9000;
  c.own.push_back(any);
  EXPECT_FALSE(endpoint_refusal("token endpoint", target("http", "127.0.0.1", 9000, {ip("127.0.0.1")}), c).empty());
  // Another port on loopback is not the daemon, and the server is on loopback.
  EXPECT_EQ(endpoint_refusal("token endpoint", target("http", "127.0.0.1", 4712, {ip("127.0.0.1")}), c), "");
  // Not even on the MCP server's own origin.
  auto same = loopback_server();
  same.server_port = 4711;
  EXPECT_FALSE(endpoint_refusal("token endpoint", target("http", "127.0.0.1", 4711, {ip("127.0.0.1")}), same).empty());
}

TEST(OAuthEndpointRules, HttpsUnlessAllOfItIsOnLoopback) {
  auto local = loopback_server();
  EXPECT_EQ(endpoint_refusal("token endpoint", target("http", "localhost", 9000, {ip("127.0.0.1"), ip("::1")}), local), "");
  auto plain = endpoint_refusal("token endpoint", target("http", "192.0.2.10", 80, {ip("192.0.2.10")}), local);
  EXPECT_NE(plain.find("not https"), std::string::npos) << plain;
  EXPECT_EQ(endpoint_refusal("token endpoint", target("https", "192.0.2.10", 443, {ip("192.0.2.10")}), local), "");
  // A name with one public address among loopback ones is not loopback.
  EXPECT_FALSE(
    endpoint_refusal("token endpoint", target("http", "mixed.example", 80, {ip("127.0.0.1"), ip("192.0.2.10")}), local)
      .empty());
  // An https MCP server gets https endpoints only, loopback or not.
  auto remote = public_server();
  EXPECT_FALSE(endpoint_refusal("token endpoint", target("http", "auth.example.com", 80, {ip("192.0.2.10")}), remote).empty());
  EXPECT_EQ(endpoint_refusal("token endpoint", target("https", "auth.example.com", 443, {ip("192.0.2.10")}), remote), "");
}

TEST(OAuthEndpointRules, NoRequestIntoThisMachineOrTheNetworkOnARemotePartysWord) {
  auto remote = public_server();
  auto loop = endpoint_refusal("token endpoint", target("https", "127.0.0.1", 443, {ip("127.0.0.1")}), remote);
  EXPECT_NE(loop.find("loopback address 127.0.0.1"), std::string::npos) << loop;
  for (const char* a : {"10.0.0.1", "172.20.1.1", "192.168.0.1", "169.254.169.254", "fd12::1", "fe80::1"}) {
    auto why = endpoint_refusal("registration endpoint", target("https", "internal.example", 443, {ip(a)}), remote);
    EXPECT_NE(why.find("private or link-local"), std::string::npos) << a << ": " << why;
  }
  for (const char* a : {"0.0.0.0", "::"}) {
    auto why = endpoint_refusal("token endpoint", target("https", "zero.example", 443, {ip(a)}), remote);
    EXPECT_NE(why.find("unspecified"), std::string::npos) << a << ": " << why;
  }
  // An MCP server on loopback does not open the network either.
  auto priv = endpoint_refusal("registration endpoint", target("http", "10.0.0.1", 80, {ip("10.0.0.1")}), loopback_server());
  EXPECT_NE(priv.find("private or link-local address 10.0.0.1"), std::string::npos) << priv;
  // A server on the private network may use an authorization server there.
  endpoint_context lan;
  lan.server_scheme = "https";
  lan.server_host = "10.1.2.3";
  lan.server_port = 443;
  lan.server_addresses = {ip("10.1.2.3")};
  EXPECT_EQ(endpoint_refusal("token endpoint", target("https", "10.9.9.9", 443, {ip("10.9.9.9")}), lan), "");
  EXPECT_FALSE(endpoint_refusal("token endpoint", target("https", "127.0.0.1", 443, {ip("127.0.0.1")}), lan).empty());
}

TEST(OAuthEndpointRules, TheServersOwnOriginIsHeldToTheListenerRuleOnly) {
  endpoint_context lan;
  lan.server_scheme = "http";
  lan.server_host = "10.1.2.3";
  lan.server_port = 8080;
  lan.server_addresses = {ip("10.1.2.3")};
  EXPECT_EQ(endpoint_refusal("protected resource metadata", target("http", "10.1.2.3", 8080, {ip("10.1.2.3")}), lan), "");
  EXPECT_FALSE(endpoint_refusal("token endpoint", target("http", "10.1.2.3", 8081, {ip("10.1.2.3")}), lan).empty());
}

TEST(OAuthEndpointRules, RefusalsAreEscapedAndNameTheEndpoint) {
  auto t = target("http", "10.0.0.1", 80, {ip("10.0.0.1")});
  t.shown = "http://10.0.0.1:80/\x1b[31mred";
  auto why = endpoint_refusal("token endpoint", t, loopback_server());
  EXPECT_EQ(why.find('\x1b'), std::string::npos) << why;
  EXPECT_NE(why.find("token endpoint http://10.0.0.1:80/"), std::string::npos) << why;
}

TEST(OAuthIssuer, MetadataMustNameTheIssuerItWasFetchedFor) {
  EXPECT_EQ(issuer_mismatch("https://as.example/tenant", "https://as.example/tenant/"), "");
  auto why = issuer_mismatch("https://evil.example", "https://as.example");
  EXPECT_NE(why.find("https://evil.example"), std::string::npos) << why;
  EXPECT_NE(why.find("RFC 8414"), std::string::npos) << why;
  EXPECT_FALSE(issuer_mismatch("", "https://as.example").empty()) << "no issuer is not the issuer";
}

TEST(OAuthIssuer, TheAuthorizationResponseIssIsChecked) {
  EXPECT_EQ(callback_issuer_problem(std::string("https://as.example"), "https://as.example", true), "");
  EXPECT_EQ(callback_issuer_problem(std::nullopt, "https://as.example", false), "");
  auto wrong = callback_issuer_problem(std::string("https://evil.example"), "https://as.example", false);
  EXPECT_NE(wrong.find("RFC 9207"), std::string::npos) << wrong;
  EXPECT_FALSE(callback_issuer_problem(std::string("https://as.example/"), "https://as.example", false).empty())
    << "simple string comparison";
  auto missing = callback_issuer_problem(std::nullopt, "https://as.example", true);
  EXPECT_NE(missing.find("no 'iss'"), std::string::npos) << missing;
  // What the redirect and the metadata bring in.
  auto cb = parse_callback("code=c&state=s&iss=https%3A%2F%2Fas.example");
  ASSERT_TRUE(cb);
  EXPECT_EQ(cb->iss, std::optional<std::string>("https://as.example"));
  EXPECT_FALSE(parse_callback("code=c&state=s")->iss);
  auto m = parse_authorization_server_metadata(
    nlohmann::json{{"issuer", "https://as.example"}, {"token_endpoint", "https://as.example/token"},
                   {"authorization_response_iss_parameter_supported", true}},
    "https://as.example", nullptr);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->authorization_response_iss_parameter_supported);
}

TEST(OAuthRefreshBinding, ARefreshGoesOnlyWhereTheTokensCameFrom) {
  std::string why;
  EXPECT_EQ(refresh_endpoint("https://as/token", "https://as/token", &why), "https://as/token");
  EXPECT_EQ(refresh_endpoint("https://as/token", "", &why), "https://as/token") << "discovery said nothing";
  EXPECT_FALSE(refresh_endpoint("https://as/token", "https://other/token", &why));
  EXPECT_NE(why.find("https://other/token"), std::string::npos) << why;
  EXPECT_NE(why.find("not sent"), std::string::npos) << why;
  // An older record, bound to nothing: only what discovery names for its
  // issuer, and nothing when discovery names nothing.
  EXPECT_EQ(refresh_endpoint("", "https://as/token", &why), "https://as/token");
  EXPECT_FALSE(refresh_endpoint("", "", &why));
}
