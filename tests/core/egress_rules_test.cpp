#include "core/egress_rules.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace mcprt::egress;

namespace {

allow_entry entry_of(const std::string& text) {
  std::string why;
  auto e = parse_allow_entry(text, &why);
  EXPECT_TRUE(e) << text << ": " << why;
  return e ? *e : allow_entry{};
}

std::vector<allow_entry> entries_of(const std::vector<std::string>& texts) {
  auto l = parse_allow_list(texts);
  EXPECT_TRUE(l.errors.empty()) << l.errors.front();
  return l.entries;
}

head_verdict egress_head(const std::string& text) {
  auto end = find_head_end(text, 0);
  EXPECT_NE(end, std::string::npos) << text;
  return parse_proxy_head(std::string_view(text).substr(0, end == std::string::npos ? text.size() : end));
}

std::string field_of(const proxy_request& r, const std::string& name) {
  for (const auto& [n, v] : r.fields)
    if (n == name) return v;
  return "<none>";
}

} // namespace

TEST(EgressAllowList, EntriesAreHostsWithAnOptionalPort) {
  auto e = entry_of("api.github.com");
  EXPECT_EQ(e.host, "api.github.com");
  EXPECT_EQ(e.port, 0);
  EXPECT_FALSE(e.subdomains);
  e = entry_of("LocalHost:8080");
  EXPECT_EQ(e.host, "localhost");
  EXPECT_EQ(e.port, 8080);
  e = entry_of("[::1]:443");
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 443);
  EXPECT_TRUE(e.ip_literal);
  EXPECT_EQ(e.text(), "[::1]:443");
  e = entry_of("[0:0::1]");
  EXPECT_EQ(e.host, "::1") << "IPv6 literals compare in canonical form";
  e = entry_of("127.0.0.1:3000");
  EXPECT_EQ(e.host, "127.0.0.1");
  EXPECT_TRUE(e.ip_literal);
  e = entry_of("127.0.0.1.");
  EXPECT_EQ(e.host, "127.0.0.1");
  EXPECT_TRUE(e.ip_literal) << "a final dot does not make an address a name";
  EXPECT_EQ(normalized_host("127.0.0.1."), "127.0.0.1");
  e = entry_of("example.com.");
  EXPECT_EQ(e.host, "example.com") << "one trailing dot is the same name";
}

TEST(EgressAllowList, BadEntriesSayWhyAndAreLeftOut) {
  for (const std::string& bad : std::vector<std::string>{"",
                                                         " api.github.com",
                                                         "api.github.com:0",
                                                         "api.github.com:65536",
                                                         "host:",
                                                         "host:80x",
                                                         "::1",
                                                         "::1:80",
                                                         "[::1",
                                                         "[1.2.3.4]:80",
                                                         "*",
                                                         "*.com",
                                                         "a.*.example.com",
                                                         "*.127.0.0.1",
                                                         "api..github.com",
                                                         "example.com..",
                                                         ".github.com",
                                                         "http://api.github.com",
                                                         "api.github.com/path",
                                                         "a b",
                                                         std::string(254, 'a'),
                                                         "host:+80",
                                                         "[::1]x"}) {
    std::string why;
    EXPECT_FALSE(parse_allow_entry(bad, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  auto l = parse_allow_list({"ok.example", "bad entry", "ok.example", "other:1"});
  ASSERT_EQ(l.errors.size(), 1u);
  EXPECT_NE(l.errors[0].find("network[1]"), std::string::npos) << l.errors[0];
  ASSERT_EQ(l.entries.size(), 2u) << "the repeated entry is kept once";
  EXPECT_EQ(l.entries[1].text(), "other:1");
}

TEST(EgressAllowList, MatchingIsOnTheNameAsAskedCaseBlindAndByPort) {
  auto list = entries_of({"api.github.com", "localhost:8080"});
  EXPECT_TRUE(is_allowed(list, normalized_host("API.GitHub.com"), 443));
  EXPECT_TRUE(is_allowed(list, normalized_host("api.github.com."), 80));
  EXPECT_TRUE(is_allowed(list, "localhost", 8080));
  EXPECT_FALSE(is_allowed(list, "localhost", 8081)) << "the entry names its port";
  EXPECT_FALSE(is_allowed(list, "127.0.0.1", 8080)) << "localhost and 127.0.0.1 are different names";
  EXPECT_FALSE(is_allowed(list, "[::1]", 8080));
  EXPECT_FALSE(is_allowed(list, "github.com", 443));
  EXPECT_FALSE(is_allowed(list, "evil-api.github.com", 443));
  EXPECT_FALSE(is_allowed(list, "api.github.com.evil.example", 443));
  EXPECT_FALSE(is_allowed(list, "", 443));
  auto ip = entries_of({"127.0.0.1"});
  EXPECT_TRUE(is_allowed(ip, "127.0.0.1", 1));
  EXPECT_FALSE(is_allowed(ip, "localhost", 1));
  EXPECT_FALSE(is_allowed(ip, "127.1", 1)) << "another spelling is another name";
  auto v6 = entries_of({"[::1]:9"});
  EXPECT_TRUE(is_allowed(v6, normalized_host("[0::1]"), 9));
}

TEST(EgressAllowList, AWildcardCoversNamesStrictlyBelowItsDomain) {
  auto list = entries_of({"*.example.com:443"});
  EXPECT_TRUE(is_allowed(list, "api.example.com", 443));
  EXPECT_TRUE(is_allowed(list, "a.b.example.com", 443));
  EXPECT_FALSE(is_allowed(list, "example.com", 443));
  EXPECT_FALSE(is_allowed(list, "badexample.com", 443));
  EXPECT_FALSE(is_allowed(list, ".example.com", 443));
  EXPECT_FALSE(is_allowed(list, "api.example.com", 80));
  EXPECT_EQ(list[0].text(), "*.example.com:443");
}

TEST(EgressAllowList, APublicNameMayNotLeadToThisHost) {
  auto loop4 = *mcprt::oauth::parse_ip_literal("127.0.0.1");
  auto loop6 = *mcprt::oauth::parse_ip_literal("::1");
  auto zero = *mcprt::oauth::parse_ip_literal("0.0.0.0");
  auto pub = *mcprt::oauth::parse_ip_literal("140.82.112.6");
  EXPECT_TRUE(address_permitted("api.github.com", pub));
  EXPECT_FALSE(address_permitted("api.github.com", loop4)) << "DNS that says 127.0.0.1 reaches the daemon's host";
  EXPECT_FALSE(address_permitted("api.github.com", loop6));
  EXPECT_FALSE(address_permitted("api.github.com", zero));
  EXPECT_TRUE(address_permitted("localhost", loop4));
  EXPECT_TRUE(address_permitted("localhost", loop6));
  EXPECT_TRUE(address_permitted("127.0.0.1", loop4));
  EXPECT_FALSE(address_permitted("localhost", zero));
  EXPECT_FALSE(address_permitted("0.0.0.0", zero));
}

TEST(EgressHead, TheEndIsFoundOnceWhateverTheChunks) {
  std::string head = "CONNECT a:1 HTTP/1.1\r\nHost: a:1\r\n\r\nextra";
  EXPECT_EQ(find_head_end(head, 0), head.size() - 5);
  // Fed a byte at a time, resuming where the last call stopped.
  std::size_t scanned = 0, end = std::string::npos;
  for (std::size_t n = 1; n <= head.size() && end == std::string::npos; ++n) {
    auto from = scanned;
    end = find_head_end(std::string_view(head).substr(0, n), from, &scanned);
    EXPECT_LE(scanned, n);
  }
  EXPECT_EQ(end, head.size() - 5);
  EXPECT_EQ(find_head_end("GET http://a/ HTTP/1.1\n\nbody", 0), 24u) << "bare LFs end a head too";
  EXPECT_EQ(find_head_end("GET http://a/ HTTP/1.1\r\nHost: a\r\n", 0), std::string::npos);
  EXPECT_EQ(find_head_end("GET http://a/ HTTP/1.1\r\n\r", 0), std::string::npos);
}

TEST(EgressHead, ConnectNamesHostAndPort) {
  auto v = egress_head("CONNECT API.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n");
  ASSERT_TRUE(v.request) << v.reason;
  EXPECT_TRUE(v.request->is_connect);
  EXPECT_EQ(v.request->host, "api.github.com");
  EXPECT_EQ(v.request->port, 443);
  EXPECT_EQ(field_of(*v.request, "Host"), "api.github.com:443");
  v = egress_head("CONNECT [::1]:8443 HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(v.request) << v.reason;
  EXPECT_EQ(v.request->host, "::1");
  EXPECT_EQ(v.request->port, 8443);
  for (auto bad :
       {"CONNECT api.github.com HTTP/1.1\r\n\r\n", "CONNECT api.github.com:0 HTTP/1.1\r\n\r\n",
        "CONNECT ::1:80 HTTP/1.1\r\n\r\n", "CONNECT http://a:1/ HTTP/1.1\r\n\r\n", "CONNECT a:1 HTTP/2.0\r\n\r\n",
        "CONNECT  a:1 HTTP/1.1\r\n\r\n", "CONNECT a:1\r\n\r\n", "CONNECT a%2e:1 HTTP/1.1\r\n\r\n"}) {
    auto r = egress_head(bad);
    EXPECT_FALSE(r.request) << bad;
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_FALSE(r.reason.empty());
  }
  auto r = egress_head("CONNECT a.example:99999 HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.host, "a.example") << "a refusal names the host once it is known";
}

TEST(EgressHead, AnAbsoluteUriBecomesOriginFormWithTheUrisHost) {
  auto v = egress_head(
    "POST http://LocalHost:8080/mcp?x=1#frag HTTP/1.1\r\nHost: evil.example\r\nProxy-Authorization: Basic eA==\r\n"
    "Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\nKeep-Alive: 5\r\nContent-Length: 2\r\n"
    "X-Thing:  v  \r\n\r\n");
  ASSERT_TRUE(v.request) << v.reason;
  const auto& r = *v.request;
  EXPECT_FALSE(r.is_connect);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.host, "localhost");
  EXPECT_EQ(r.port, 8080);
  EXPECT_EQ(r.origin_target, "/mcp?x=1");
  EXPECT_EQ(field_of(r, "X-Thing"), "v");
  auto up = upstream_head(r);
  EXPECT_EQ(up.rfind("POST /mcp?x=1 HTTP/1.1\r\nHost: LocalHost:8080\r\n", 0), 0u) << up;
  EXPECT_EQ(up.find("evil.example"), std::string::npos) << "the client's Host is replaced by the URI's";
  EXPECT_EQ(up.find("Proxy-"), std::string::npos) << up;
  EXPECT_EQ(up.find("Keep-Alive"), std::string::npos) << up;
  EXPECT_EQ(up.find("keep-alive"), std::string::npos) << up;
  EXPECT_NE(up.find("\r\nContent-Length: 2\r\n"), std::string::npos) << up;
  EXPECT_NE(up.find("\r\nConnection: close\r\n\r\n"), std::string::npos) << up;
  EXPECT_EQ(up.substr(up.size() - 4), "\r\n\r\n");

  v = egress_head("GET http://a.example HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(v.request);
  EXPECT_EQ(v.request->port, 80);
  EXPECT_EQ(v.request->origin_target, "/");
  EXPECT_EQ(upstream_head(*v.request).rfind("GET / HTTP/1.1\r\nHost: a.example\r\n", 0), 0u);
  v = egress_head("GET HTTP://[::1]:81?q HTTP/1.1\r\nConnection: Upgrade, foo\r\nUpgrade: websocket\r\n\r\n");
  ASSERT_TRUE(v.request) << v.reason;
  EXPECT_EQ(v.request->host, "::1");
  EXPECT_EQ(v.request->origin_target, "/?q");
  auto ws = upstream_head(*v.request);
  EXPECT_NE(ws.find("Host: [::1]:81\r\n"), std::string::npos) << ws;
  EXPECT_NE(ws.find("Connection: upgrade\r\n"), std::string::npos) << ws;
  EXPECT_NE(ws.find("Upgrade: websocket\r\n"), std::string::npos) << ws;
}

TEST(EgressHead, WhatIsNotAProxyRequestIsRefusedWithItsReason) {
  auto r = egress_head("GET /mcp HTTP/1.1\r\nHost: api.github.com\r\n\r\n");
  EXPECT_FALSE(r.request);
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.reason.find("names no host"), std::string::npos) << r.reason;
  r = egress_head("GET https://api.github.com/ HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.host, "api.github.com");
  EXPECT_NE(r.reason.find("CONNECT"), std::string::npos);
  for (auto bad :
       {"GET ftp://a/ HTTP/1.1\r\n\r\n", "GET http://user@a/ HTTP/1.1\r\n\r\n", "GET http:///x HTTP/1.1\r\n\r\n",
        "GET http://a:x/ HTTP/1.1\r\n\r\n", "GET http://a/ HTTP/1.1\r\nX: 1\r\n folded\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\nNoColon\r\n\r\n", "GET http://a/ HTTP/1.1\r\nBad Name: 1\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\nX: a\rb\r\n\r\n", "GE(T http://a/ HTTP/1.1\r\n\r\n", "\r\n\r\n",
        "GET http://a/\xff HTTP/1.1\r\n\r\n"}) {
    auto v = egress_head(bad);
    EXPECT_FALSE(v.request) << bad;
    EXPECT_EQ(v.status, 400) << bad;
  }
}

TEST(EgressHead, HeadsAreBoundedInBytesAndFields) {
  std::string big = "GET http://a/ HTTP/1.1\r\nX: " + std::string(max_head_bytes, 'x') + "\r\n\r\n";
  auto r = parse_proxy_head(big);
  EXPECT_FALSE(r.request);
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.reason.find("16384"), std::string::npos) << r.reason;
  std::string many = "GET http://a/ HTTP/1.1\r\n";
  for (std::size_t i = 0; i <= max_head_fields; ++i)
    many += "X" + std::to_string(i) + ": 1\r\n";
  many += "\r\n";
  r = egress_head(many);
  EXPECT_FALSE(r.request);
  EXPECT_EQ(r.status, 400);
}

TEST(EgressHead, ARefusalSaysWhyAndNamesTheHostEscaped) {
  auto text = refusal_response(403, "not in the server's network allow-list", "evil.example", 443);
  EXPECT_EQ(text.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u);
  auto body = text.substr(text.find("\r\n\r\n") + 4);
  EXPECT_EQ(body, "mcprt egress proxy: evil.example:443: not in the server's network allow-list\n");
  EXPECT_NE(text.find("Content-Length: " + std::to_string(body.size()) + "\r\n"), std::string::npos);
  auto v6 = refusal_response(400, "x", "::1", 1);
  EXPECT_NE(v6.find("[::1]:1: x"), std::string::npos) << v6;
  auto ctl = refusal_response(403, "x", "a\r\nSet-Cookie: b", 0);
  EXPECT_EQ(ctl.find("\r\nSet-Cookie"), std::string::npos) << "the host cannot add a header";
  EXPECT_EQ(connect_established(), "HTTP/1.1 200 Connection established\r\n\r\n");
}
