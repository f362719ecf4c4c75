#include "core/proxy_choice.hpp"

#include <gtest/gtest.h>

#include <map>

namespace mcprt {
namespace {

env_lookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ProxyChoice, EachSchemeTakesItsOwnVariableAndFallsBackToAllProxy) {
  auto env = env_of({{"HTTPS_PROXY", "http://s:1"}, {"HTTP_PROXY", "http://p:2"}});
  EXPECT_EQ(choose_proxy("https", "example.com", 443, "", env), "http://s:1");
  EXPECT_EQ(choose_proxy("http", "example.com", 80, "", env), "http://p:2");
  auto all = env_of({{"ALL_PROXY", "socks5h://a:3"}});
  EXPECT_EQ(choose_proxy("https", "example.com", 443, "", all), "socks5h://a:3");
  EXPECT_EQ(choose_proxy("http", "example.com", 80, "", env_of({})), "");
}

TEST(ProxyChoice, TheLowerCaseNameWinsAndAnEmptyValueCountsAsUnset) {
  auto env = env_of({{"https_proxy", "http://lower:1"}, {"HTTPS_PROXY", "http://upper:1"}});
  EXPECT_EQ(choose_proxy("https", "example.com", 443, "", env), "http://lower:1");
  auto empty = env_of({{"https_proxy", ""}, {"HTTPS_PROXY", "http://upper:1"}});
  EXPECT_EQ(choose_proxy("https", "example.com", 443, "", empty), "http://upper:1");
}

TEST(ProxyChoice, NoProxyNamesHostsTheirSubdomainsIpsAndPorts) {
  auto env = env_of({{"HTTPS_PROXY", "http://s:1"},
                     {"NO_PROXY", " internal.corp, .svc ,10.1.2.3,[fd00::1], api.example.com:8443"}});
  EXPECT_EQ(choose_proxy("https", "internal.corp", 443, "", env), "");
  EXPECT_EQ(choose_proxy("https", "mcp.internal.corp", 443, "", env), "");
  EXPECT_EQ(choose_proxy("https", "INTERNAL.CORP", 443, "", env), "") << "host names compare case-blind";
  EXPECT_EQ(choose_proxy("https", "notinternal.corp", 443, "", env), "http://s:1") << "a label boundary, not a suffix";
  EXPECT_EQ(choose_proxy("https", "a.svc", 443, "", env), "");
  EXPECT_EQ(choose_proxy("https", "10.1.2.3", 443, "", env), "");
  EXPECT_EQ(choose_proxy("https", "10.1.2.30", 443, "", env), "http://s:1") << "IP literals match exactly";
  EXPECT_EQ(choose_proxy("https", "fd00::1", 443, "", env), "");
  EXPECT_EQ(choose_proxy("https", "api.example.com", 8443, "", env), "");
  EXPECT_EQ(choose_proxy("https", "api.example.com", 443, "", env), "http://s:1") << "the entry names a port";
  auto star = env_of({{"HTTPS_PROXY", "http://s:1"}, {"no_proxy", "*"}});
  EXPECT_EQ(choose_proxy("https", "example.com", 443, "", star), "");
}

TEST(ProxyChoice, LoopbackNeverGoesThroughAnEnvironmentProxy) {
  auto env = env_of({{"HTTP_PROXY", "http://p:2"}, {"HTTPS_PROXY", "http://p:2"}});
  for (const char* host : {"localhost", "mcp.localhost", "127.0.0.1", "127.9.8.7", "::1", "LOCALHOST"})
    EXPECT_EQ(choose_proxy("http", host, 80, "", env), "") << host;
  EXPECT_EQ(choose_proxy("http", "128.0.0.1", 80, "", env), "http://p:2");
  EXPECT_EQ(choose_proxy("http", "localhost.example.com", 80, "", env), "http://p:2");
}

TEST(ProxyChoice, AServersOwnProxyWinsEvenForLoopbackAndDirectTurnsProxiesOff) {
  auto env = env_of({{"HTTPS_PROXY", "http://s:1"}, {"NO_PROXY", "example.com"}});
  EXPECT_EQ(choose_proxy("https", "example.com", 443, "http://mine:9", env), "http://mine:9");
  EXPECT_EQ(choose_proxy("http", "127.0.0.1", 80, "http://mine:9", env), "http://mine:9");
  EXPECT_EQ(choose_proxy("https", "other.org", 443, "direct", env), "");
  EXPECT_EQ(choose_proxy("https", "other.org", 443, "NONE", env), "");
}

} // namespace
} // namespace mcprt
