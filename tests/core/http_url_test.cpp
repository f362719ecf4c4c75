#include "core/http_url.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace mcprt;

namespace {

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

} // namespace

TEST(HttpUrl, ParsesHttpAndHttps) {
  auto u = http_url::parse("http://127.0.0.1:8080/mcp");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->scheme, "http");
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->target, "/mcp");
  EXPECT_EQ(u->display, "http://127.0.0.1:8080/mcp");

  u = http_url::parse("HTTPS://example.com");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->target, "/");

  u = http_url::parse("http://example.com/a/b?token=s3cret#frag");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->target, "/a/b?token=s3cret");
  EXPECT_FALSE(contains(u->display, "s3cret")) << u->display;

  u = http_url::parse("http://[::1]:9000?x=1");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 9000);
  EXPECT_EQ(u->target, "/?x=1");
  EXPECT_EQ(u->origin(), "http://[::1]:9000");
}

TEST(HttpUrl, RejectsBadUrlsWithoutEchoingSecrets) {
  for (const char* bad :
       {"", "example.com/mcp", "ftp://example.com/", "http:///mcp", "http://host:0/",
        "http://host:99999/", "http://host:12a/", "http://host:/", "http://[::1/",
        "http://exa mple.com/", "http://user:hunter22@example.com/"}) {
    std::string why;
    EXPECT_FALSE(http_url::parse(bad, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
    EXPECT_FALSE(contains(why, "hunter22")) << why;
  }
}

TEST(HttpUrl, DropsTheFragmentAndKeepsPortBounds) {
  auto u = http_url::parse("https://h:65535/p#x?y");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->port, 65535);
  EXPECT_EQ(u->target, "/p");
  EXPECT_EQ(u->display, "https://h:65535/p");
  std::string why;
  EXPECT_FALSE(http_url::parse("http://[::1]x:80/", &why));
  EXPECT_NE(why.find("IPv6"), std::string::npos) << why;
  EXPECT_FALSE(http_url::parse("http://h:65536/", &why));
  EXPECT_FALSE(http_url::parse("http://h:99999999999999999999999/", &why)) << "no overflow";
  EXPECT_FALSE(http_url::parse("http://h/\x7f", &why));
}

TEST(HttpUrl, RejectsHostsThatWouldReadBackAsAnotherUrl) {
  // Found by fuzzing (tests/fuzz/regressions/url/): "a[::2]" was a host, and
  // its origin "[a[::2]]:900" read back as something else.
  for (const char* bad : {"http://jjj[::2]:900/", "http://a]:b:80/", "http://a:b:80/", "http://[abc]/",
                          "http://[::1%<x>]/", "http://a\\b/", "http://a{b}/"}) {
    std::string why;
    EXPECT_FALSE(http_url::parse(bad, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  for (const char* good : {"http://my-host.example_1.com/", "http://[fe80::1%25eth0]:8/", "http://10.0.0.1:8/"}) {
    auto u = http_url::parse(good);
    ASSERT_TRUE(u) << good;
    auto again = http_url::parse(u->origin() + u->target);
    ASSERT_TRUE(again) << good;
    EXPECT_EQ(again->host, u->host);
  }
}

TEST(HostPort, TakesHostColonPortAndBracketedIpv6AndNothingElse) {
  auto a = parse_host_port("127.0.0.1:4242");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 4242);
  auto b = parse_host_port("[::1]:65535");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 65535);
  for (auto bad : {"", "nohost", ":80", "host:", "host:0", "host:65536", "host:123456", "host:8o", "[]:80",
                   "a b:80", "a/b:80"})
    EXPECT_FALSE(parse_host_port(bad)) << bad;
  EXPECT_FALSE(parse_host_port(std::string(300, 'h') + ":80"));
}
