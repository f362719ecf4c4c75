#include "core/http_rules.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace mcprt::http;

namespace {

header_list with(std::initializer_list<header> hs) {
  return header_list(hs);
}

const listener local{"127.0.0.1", 4100};

} // namespace

TEST(HttpHost, LoopbackIsAnAddressNotATextPrefix) {
  for (auto h : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "::ffff:127.0.0.1", "localhost", "LocalHost"})
    EXPECT_TRUE(is_loopback_host(h)) << h;
  for (auto h : {"127.evil.example", "127.0.0.1.nip.io", "1270.0.0.1", "128.0.0.1", "0.0.0.0", "::", "10.0.0.1",
                 "::ffff:10.0.0.1", "localhost.evil.example", "", "127"})
    EXPECT_FALSE(is_loopback_host(h)) << h;
}

TEST(HttpHost, ALoopbackListenerAnswersToItsOwnNamesWithItsPort) {
  for (auto h : {"127.0.0.1:4100", "localhost:4100", "LOCALHOST:4100", "[::1]:4100", " 127.0.0.1:4100 "})
    EXPECT_EQ(check_host(with({{"host", h}}), local), std::nullopt) << h;
  for (auto h : {"evil.example:4100", "127.0.0.1:4101", "127.0.0.1", "localhost", "127.0.0.1:4100.evil",
                 "127.0.0.1:4100@evil", "", "[::1]", "0.0.0.0:4100", "127.0.0.2:4100"}) {
    auto r = check_host(with({{"host", h}}), local);
    ASSERT_TRUE(r) << h;
    EXPECT_EQ(r->status, 403) << h;
    EXPECT_EQ(r->code, "host_not_allowed");
  }
  // DNS rebinding names the attacker's host: the message shows it escaped.
  auto r = check_host(with({{"host", "evil\n.example:4100"}}), local);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->message.find('\n'), std::string::npos) << r->message;
}

TEST(HttpHost, MissingOrRepeatedHostIsABadRequest) {
  auto r = check_host({}, local);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  r = check_host(with({{"host", "127.0.0.1:4100"}, {"host", "evil:4100"}}), local);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

TEST(HttpHost, OtherLoopbackAddressesAndPort80) {
  listener v6{"::1", 9};
  EXPECT_EQ(check_host(with({{"host", "[::1]:9"}}), v6), std::nullopt);
  EXPECT_EQ(check_host(with({{"host", "127.0.0.1:9"}}), v6), std::nullopt);
  listener other{"127.0.0.5", 80};
  EXPECT_EQ(check_host(with({{"host", "127.0.0.5"}}), other), std::nullopt);
  EXPECT_EQ(check_host(with({{"host", "127.0.0.5:80"}}), other), std::nullopt);
  EXPECT_EQ(check_host(with({{"host", "localhost"}}), other), std::nullopt);
  // Off loopback a token is required and any Host is taken.
  listener any{"0.0.0.0", 4100};
  EXPECT_TRUE(allowed_hosts(any).empty());
  EXPECT_EQ(check_host(with({{"host", "build-box:4100"}}), any), std::nullopt);
}

TEST(HttpOrigin, AbsentOrListed) {
  std::vector<std::string> allowed{"http://app.example:3000"};
  auto v = check_origin({}, allowed);
  EXPECT_FALSE(v.refused);
  EXPECT_FALSE(v.allowed_origin);
  v = check_origin(with({{"origin", "http://app.example:3000"}}), allowed);
  EXPECT_FALSE(v.refused);
  EXPECT_EQ(v.allowed_origin, "http://app.example:3000");
  v = check_origin(with({{"origin", "HTTP://APP.example:3000"}}), allowed);
  EXPECT_EQ(v.allowed_origin, "http://app.example:3000");
  for (auto o : {"http://evil.example", "null", "", "http://app.example:3001", "https://app.example:3000"}) {
    v = check_origin(with({{"origin", o}}), allowed);
    ASSERT_TRUE(v.refused) << o;
    EXPECT_EQ(v.refused->status, 403);
    EXPECT_EQ(v.refused->code, "origin_not_allowed");
    EXPECT_FALSE(v.allowed_origin);
  }
  v = check_origin(with({{"origin", "http://app.example:3000"}, {"origin", "http://evil"}}), allowed);
  EXPECT_TRUE(v.refused);
}

TEST(HttpOrigin, OnlySerializedOriginsCanBeAllowed) {
  for (auto o : {"http://localhost:3000", "https://app.example", "http://[::1]:8080", "http://127.0.0.1"})
    EXPECT_TRUE(is_origin(o)) << o;
  for (auto o : {"null", "*", "app.example", "http://", "http://a/b", "http://a:", "ftp://a", "http://user@a",
                 "http://a:123456", "http://a b", "http://[zz]"})
    EXPECT_FALSE(is_origin(o)) << o;
}

TEST(HttpBearer, ConstantTimeCompareOfTheWholeToken) {
  EXPECT_EQ(check_bearer({}, ""), std::nullopt);
  EXPECT_EQ(check_bearer(with({{"authorization", "Bearer s3cret"}}), "s3cret"), std::nullopt);
  EXPECT_EQ(check_bearer(with({{"authorization", "bearer s3cret"}}), "s3cret"), std::nullopt);
  for (auto a : {"Bearer s3cre", "Bearer s3cret2", "Basic s3cret", "s3cret", "Bearer ", ""}) {
    auto r = check_bearer(with({{"authorization", a}}), "s3cret");
    ASSERT_TRUE(r) << a;
    EXPECT_EQ(r->status, 401);
    EXPECT_EQ(r->message.find("s3cret"), std::string::npos) << "the token leaked into " << r->message;
  }
  EXPECT_TRUE(check_bearer({}, "s3cret"));
  EXPECT_TRUE(check_bearer(with({{"authorization", "Bearer s3cret"}, {"authorization", "Bearer s3cret"}}), "s3cret"));
  EXPECT_TRUE(same_secret("abc", "abc"));
  EXPECT_FALSE(same_secret("abc", "abd"));
  EXPECT_FALSE(same_secret("abc", "ab"));
  EXPECT_FALSE(same_secret("", "a"));
}

TEST(HttpContentType, OnlyApplicationJson) {
  for (auto t : {"application/json", "Application/JSON", "application/json; charset=utf-8",
                 "application/json;charset=\"UTF-8\"", "application/json ; foo=bar"})
    EXPECT_TRUE(is_json_media_type(t)) << t;
  for (auto t : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                 "application/json-patch+json", "application/jsonx", "application/json; charset=latin1", "",
                 "application/json; bad"})
    EXPECT_FALSE(is_json_media_type(t)) << t;
  EXPECT_EQ(check_json_content_type(with({{"content-type", "application/json"}})), std::nullopt);
  auto r = check_json_content_type(with({{"content-type", "text/plain"}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 415);
  EXPECT_EQ(r->code, "unsupported_media_type");
  EXPECT_TRUE(check_json_content_type({}));
  EXPECT_TRUE(check_json_content_type(with({{"content-type", "application/json"}, {"content-type", "text/plain"}})));
}

TEST(HttpPath, DecodesSegmentsAndRefusesWhatNoNameHolds) {
  auto p = decode_path("/workspace/mcp/my%20server/approve?x=1");
  ASSERT_FALSE(p.refused);
  EXPECT_EQ(p.segments, (std::vector<std::string>{"workspace", "mcp", "my server", "approve"}));
  p = decode_path("/workspace/mcp/a%2Fb/restart");
  ASSERT_FALSE(p.refused);
  EXPECT_EQ(p.segments[2], "a/b");
  p = decode_path("/caf%C3%A9");
  ASSERT_FALSE(p.refused);
  EXPECT_EQ(p.segments[0], "caf\xC3\xA9");
  for (auto t : {"/%FF", "/%00", "/%C0%AF", "/%ED%A0%80", "/%0A", "/a%1Bb", "/%", "/%F", "/%GG", "x", "",
                 "*", "http://evil/healthz", "/%E2%80%AE", "/%C2%85", "/\xFF", "/a\x01"}) {
    auto r = decode_path(t);
    ASSERT_TRUE(r.refused) << t;
    EXPECT_EQ(r.refused->status, 400) << t;
    EXPECT_EQ(r.refused->code, "bad_path");
    for (unsigned char c : r.refused->message)
      EXPECT_TRUE(c >= 0x20 && c != 0x7F) << "a raw control byte in " << r.refused->message;
  }
}

TEST(HttpRoute, EveryRouteItsMethodsAndTheRest) {
  auto r = resolve_route("GET", "/healthz");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::healthz);
  r = resolve_route("HEAD", "/workspace/mcp");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::snapshot);
  r = resolve_route("GET", "/workspace/mcp/events");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::events);
  r = resolve_route("POST", "/workspace/mcp/tools/call");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::call);
  r = resolve_route("POST", "/workspace/mcp/project-tools/approve");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::approve);
  EXPECT_EQ(r.match->server, "project-tools");
  r = resolve_route("POST", "/workspace/mcp/tools/restart");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::restart);
  EXPECT_EQ(r.match->server, "tools");
  r = resolve_route("POST", "/mcp");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::mcp_post);
  EXPECT_EQ(r.match->server, "");
  for (auto method : {"POST", "GET", "DELETE"}) {
    r = resolve_route(method, "/mcp/review");
    ASSERT_TRUE(r.match) << method;
    EXPECT_EQ(r.match->server, "review") << "a tool set's endpoint";
  }
  EXPECT_EQ(resolve_route("DELETE", "/mcp/review").match->id, route_id::mcp_delete);
  r = resolve_route("POST", "/mcp/review/extra");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 404);

  r = resolve_route("POST", "/healthz");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 405);
  EXPECT_EQ(r.allow, "GET, HEAD");
  r = resolve_route("GET", "/workspace/mcp/echo/approve");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 405);
  EXPECT_EQ(r.allow, "POST");
  r = resolve_route("DELETE", "/workspace/mcp");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 405);
  r = resolve_route("GET", "/nope");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 404);
  r = resolve_route("POST", "/workspace/mcp//approve");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 404);
  r = resolve_route("GET", "/%FF");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 400);
  r = resolve_route("G\x1b[31mET", "/nope\n");
  ASSERT_TRUE(r.refused);
  for (unsigned char c : r.refused->message)
    EXPECT_TRUE(c >= 0x20 && c != 0x7F) << r.refused->message;
}

TEST(HttpShown, EscapesAndShortens) {
  EXPECT_EQ(shown("a\nb"), "'a\\nb'");
  auto long_text = std::string(10000, 'x');
  auto s = shown(long_text);
  EXPECT_LT(s.size(), 250u);
  EXPECT_NE(s.find("10000 bytes"), std::string::npos);
}

TEST(HttpEventId, DecimalOnly) {
  EXPECT_EQ(parse_event_id("0"), 0u);
  EXPECT_EQ(parse_event_id("18446744073709551"), 18446744073709551u);
  for (auto t : {"", "-1", "1e3", "abc", " 1", "12345678901234567890"})
    EXPECT_EQ(parse_event_id(t), std::nullopt) << t;
}

TEST(HttpNames, PlainNamesOnly) {
  for (auto n : {"echo", "project-tools", "caf\xC3\xA9", "a/b", "tool_1", "名前"})
    EXPECT_TRUE(is_plain_name(n)) << n;
  for (auto n : {"", "a\nb", "a\tb", "\x1b[31m", "\xFF", "a\xC2\x85", "\xE2\x80\xAEx", "a\x7F"})
    EXPECT_FALSE(is_plain_name(n)) << n;
  EXPECT_FALSE(is_plain_name(std::string(513, 'a')));
  EXPECT_FALSE(is_plain_name(std::string("a\0b", 3)));
}

TEST(HttpRoute, ResourcePromptAndCompletionRoutesNameTheirServer) {
  struct want {
    const char* method;
    const char* target;
    route_id id;
  } wants[] = {
    {"GET", "/workspace/mcp/fs/resources", route_id::resources},
    {"HEAD", "/workspace/mcp/fs/resources", route_id::resources},
    {"GET", "/workspace/mcp/fs/resource-templates", route_id::resource_templates},
    {"POST", "/workspace/mcp/fs/resources/read", route_id::resource_read},
    {"POST", "/workspace/mcp/fs/resources/subscribe", route_id::resource_subscribe},
    {"POST", "/workspace/mcp/fs/resources/unsubscribe", route_id::resource_unsubscribe},
    {"POST", "/workspace/mcp/fs/prompts/get", route_id::prompt_get},
    {"POST", "/workspace/mcp/fs/complete", route_id::complete},
    {"GET", "/workspace/mcp/fs/prompts", route_id::prompts},
  };
  for (auto& w : wants) {
    auto r = resolve_route(w.method, w.target);
    ASSERT_TRUE(r.match) << w.target;
    EXPECT_EQ(r.match->id, w.id) << w.target;
    EXPECT_EQ(r.match->server, "fs") << w.target;
  }
  // A percent-encoded name is decoded; the old routes keep their meaning.
  auto r = resolve_route("POST", "/workspace/mcp/my%20server/resources/read");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->server, "my server");
  r = resolve_route("POST", "/workspace/mcp/tools/call");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::call);
  r = resolve_route("POST", "/workspace/mcp/fs/resources");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 405);
  EXPECT_EQ(r.allow, "GET, HEAD");
  r = resolve_route("GET", "/workspace/mcp/fs/prompts/get");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 405);
  r = resolve_route("POST", "/workspace/mcp//resources/read");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 404);
}

// The cancel route of a tool call: its path names the call id,
// it takes POST only, and it does not shadow a server's routes.
TEST(HttpRoute, TheCancelRouteNamesTheCallIdAndTakesPostOnly) {
  auto r = resolve_route("POST", "/workspace/mcp/calls/job-42/cancel");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::call_cancel);
  EXPECT_EQ(r.match->server, "job-42");
  r = resolve_route("GET", "/workspace/mcp/calls/job-42/cancel");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 405);
  EXPECT_EQ(r.allow, "POST");
  r = resolve_route("POST", "/workspace/mcp/calls//cancel");
  EXPECT_FALSE(r.match);
  // A server named "calls" keeps its routes.
  r = resolve_route("POST", "/workspace/mcp/calls/resources/read");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::resource_read);
  EXPECT_EQ(r.match->server, "calls");
}

// The answers to servers' requests for the host: the path names
// the request's id; a server named "elicitations" keeps its routes.
TEST(HttpRoute, HostAnswerRoutesNameTheRequestIdAndTakePostOnly) {
  auto r = resolve_route("POST", "/workspace/mcp/elicitations/0a1b2c");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::elicitation_answer);
  EXPECT_EQ(r.match->server, "0a1b2c");
  r = resolve_route("POST", "/workspace/mcp/sampling/0a1b2c");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::sampling_answer);
  EXPECT_EQ(r.match->server, "0a1b2c");
  r = resolve_route("GET", "/workspace/mcp/sampling/0a1b2c");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 405);
  r = resolve_route("POST", "/workspace/mcp/elicitations/restart");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::restart);
  EXPECT_EQ(r.match->server, "elicitations");
}
