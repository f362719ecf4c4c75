#include <gtest/gtest.h>

#include "core/sse_endpoint.hpp"

using namespace mcprt;

namespace {

http_url base(const std::string& u = "http://127.0.0.1:3001/sse") {
  return *http_url::parse(u);
}

std::string resolved(std::string_view endpoint, const std::string& stream = "http://127.0.0.1:3001/sse") {
  std::string why;
  auto u = resolve_sse_endpoint(base(stream), endpoint, &why);
  return u ? u->origin() + u->target : "ERROR: " + why;
}

} // namespace

TEST(SseEndpoint, ResolvesTheFormsServersSend) {
  EXPECT_EQ(resolved("/message?sessionId=abc"), "http://127.0.0.1:3001/message?sessionId=abc");
  EXPECT_EQ(resolved("  /message?sessionId=abc\n"), "http://127.0.0.1:3001/message?sessionId=abc");
  EXPECT_EQ(resolved("http://127.0.0.1:3001/m?s=1"), "http://127.0.0.1:3001/m?s=1");
  EXPECT_EQ(resolved("//127.0.0.1:3001/m"), "http://127.0.0.1:3001/m");
  EXPECT_EQ(resolved("messages?s=1", "http://h:8/a/b/sse?x=y"), "http://h:8/a/b/messages?s=1");
  EXPECT_EQ(resolved("?sessionId=1", "http://h:8/a/sse?x=y"), "http://h:8/a/sse?sessionId=1");
  EXPECT_EQ(resolved("/m#frag"), "http://127.0.0.1:3001/m");
  // The default port is the same origin as the explicit one.
  EXPECT_EQ(resolved("http://Example.COM:80/m", "http://example.com/sse"), "http://Example.COM:80/m");
}

TEST(SseEndpoint, RefusesAnotherOrigin) {
  for (auto e : {"http://evil.example/m?sessionId=1", "//evil.example/m", "https://127.0.0.1:3001/m",
                 "http://127.0.0.1:3002/m", "http://localhost:3001/m"}) {
    auto r = resolved(e);
    EXPECT_NE(r.find("another origin"), std::string::npos) << e << " → " << r;
  }
}

TEST(SseEndpoint, ARefusalDoesNotQuoteTheOtherHost) {
  // Found by fuzzing: the other origin's host is the server's text, of any
  // length and encoding; quoting it made the reason unbounded.
  std::string why;
  std::string host(3000, 'x');
  host += "\xdb\xff";
  EXPECT_FALSE(resolve_sse_endpoint(base(), "//" + host + "/m", &why));
  EXPECT_LT(why.size(), 200u) << why;
  EXPECT_EQ(why.find("xxx"), std::string::npos) << why;
  EXPECT_NE(why.find("another origin than http://127.0.0.1:3001"), std::string::npos) << why;
}

TEST(SseEndpoint, RefusesJunkWithoutQuotingTheSession) {
  std::string why;
  EXPECT_FALSE(resolve_sse_endpoint(base(), "", &why));
  EXPECT_NE(why.find("empty"), std::string::npos) << why;
  EXPECT_FALSE(resolve_sse_endpoint(base(), "/m?sessionId=SECRET id", &why));
  EXPECT_EQ(why.find("SECRET"), std::string::npos) << why;
  EXPECT_FALSE(resolve_sse_endpoint(base(), "ftp://127.0.0.1:3001/m", &why));
  EXPECT_FALSE(resolve_sse_endpoint(base(), "http://user:pw@127.0.0.1:3001/m", &why));
  EXPECT_FALSE(resolve_sse_endpoint(base(), "/" + std::string(max_sse_endpoint_bytes, 'a'), &why));
  EXPECT_NE(why.find("longer"), std::string::npos) << why;
}
