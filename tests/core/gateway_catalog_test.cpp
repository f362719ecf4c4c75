#include "core/gateway_catalog.hpp"

#include <chrono>
#include <ctime>

#include <gtest/gtest.h>

#include "catalog_test_support.hpp"

using namespace mcprt;
using mcprt::test::server_view;
using nlohmann::json;

namespace {

std::vector<std::string> catalog_names(const json& list, const char* key, const char* field = "name") {
  std::vector<std::string> out;
  for (const auto& e : list.at(key))
    out.push_back(e.at(field).get<std::string>());
  return out;
}

const gateway_left_out* find_left_out(const gateway_catalog& c, const std::string& server,
                                      const std::string& reason) {
  for (const auto& l : c.left_out())
    if (l.server == server && l.reason == reason) return &l;
  return nullptr;
}

} // namespace

// ---- tools and prompts ------------------------------------------------------

TEST(GatewayCatalog, DefaultPrefixIsServerNameAndTwoUnderscores) {
  EXPECT_EQ(default_gateway_prefix("fs"), "fs__");
  EXPECT_EQ(default_gateway_prefix(""), "__");
}

TEST(GatewayCatalog, ToolsAreExposedWithPrefixAndKeepTheirOtherFields) {
  auto fs = server_view("fs");
  fs.tools.push_back({{"name", "read"}, {"inputSchema", {{"type", "object"}}}, {"annotations", {{"x", 1}}}});
  auto c = gateway_catalog::build({fs});
  auto list = c.tools_list();
  ASSERT_EQ(list.at("tools").size(), 1u);
  EXPECT_EQ(list["tools"][0]["name"], "fs__read");
  EXPECT_EQ(list["tools"][0]["inputSchema"], json({{"type", "object"}}));
  EXPECT_EQ(list["tools"][0]["annotations"], json({{"x", 1}}));
  ASSERT_TRUE(c.tool("fs__read"));
  EXPECT_EQ(*c.tool("fs__read"), (gateway_route{"fs", "read"}));
  EXPECT_FALSE(c.tool("read"));
  EXPECT_FALSE(c.tool("fs__"));
}

TEST(GatewayCatalog, ServersAreOrderedByNameBytes) {
  // "B" < "a" in byte order.
  auto c = gateway_catalog::build({server_view("a", {"x"}), server_view("B", {"y"}), server_view("Z", {"z"})});
  EXPECT_EQ(catalog_names(c.tools_list(), "tools"), (std::vector<std::string>{"B__y", "Z__z", "a__x"}));
}

TEST(GatewayCatalog, SameExposedNameFromTwoServersFirstByNameKeepsIt) {
  auto one = server_view("one", {"t"});
  auto two = server_view("two", {"t", "u"});
  one.prefix = "p_";
  two.prefix = "p_";
  // Passed in reverse order: the winner is decided by name, not position.
  auto c = gateway_catalog::build({two, one});
  EXPECT_EQ(catalog_names(c.tools_list(), "tools"), (std::vector<std::string>{"p_t", "p_u"}));
  EXPECT_EQ(c.tool("p_t")->server, "one");
  EXPECT_EQ(c.tool("p_u")->server, "two");
  const auto* l = find_left_out(c, "two", "name_conflict");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, "tool");
  EXPECT_EQ(l->name, "t");
  EXPECT_EQ(l->exposed, "p_t");
  EXPECT_EQ(l->kept_by, "one");
  EXPECT_EQ(c.left_out().size(), 1u);
}

TEST(GatewayCatalog, AProjectServerCannotTakeANameAUserServerHasEvenWhenItSortsFirst) {
  auto repo = server_view("aaa", {"search"});
  repo.prefix = "";
  repo.project = true;
  auto mine = server_view("zzz", {"search"});
  mine.prefix = "";
  auto c = gateway_catalog::build({repo, mine});
  ASSERT_TRUE(c.tool("search"));
  EXPECT_EQ(c.tool("search")->server, "zzz");
  const auto* l = find_left_out(c, "aaa", "name_conflict");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kept_by, "zzz");
}

TEST(GatewayCatalog, AProjectServersTemplateCannotCatchReadsMeantForAUserServer) {
  auto repo = server_view("aaa");
  repo.project = true;
  repo.resource_templates.push_back({{"uriTemplate", "{+anything}"}, {"name", "all"}});
  repo.resources.push_back({{"uri", "file:///home/u/notes.md"}, {"name", "n"}});
  auto mine = server_view("zzz");
  mine.resource_templates.push_back({{"uriTemplate", "file:///{+path}"}, {"name", "files"}});
  mine.resources.push_back({{"uri", "file:///home/u/notes.md"}, {"name", "n"}});
  auto c = gateway_catalog::build({repo, mine});
  EXPECT_EQ(c.resource_server("file:///home/u/.ssh/id_ed25519"), std::optional<std::string>("zzz"));
  EXPECT_EQ(c.resource_server("file:///home/u/notes.md"), std::optional<std::string>("zzz"));
  // What only the project server's template matches is still its own.
  EXPECT_EQ(c.resource_server("repo://thing"), std::optional<std::string>("aaa"));
}

TEST(GatewayCatalog, NamesAndUrisWithControlCharactersAreRefused) {
  auto s = server_view("s", {"ok", "bad\nname", std::string("nul\0x", 5), "esc\x1b[2J", "del\x7f"});
  s.resources.push_back({{"uri", "file:///a\r\nb"}, {"name", "r"}});
  s.resources.push_back({{"uri", "file:///fine"}, {"name", "f"}});
  auto c = gateway_catalog::build({s});
  EXPECT_EQ(catalog_names(c.tools_list(), "tools"), (std::vector<std::string>{"s__ok"}));
  EXPECT_EQ(catalog_names(c.resources_list(), "resources", "uri"), (std::vector<std::string>{"file:///fine"}));
  const auto* l = find_left_out(c, "s", "invalid");
  ASSERT_NE(l, nullptr);
}

TEST(GatewayCatalog, PrefixCollisionAcrossDifferentNamesIsAConflict) {
  // "a__b__" + "c" and "a_" + "_b__c" give the same exposed name.
  auto ab = server_view("a__b", {"c"});
  auto a = server_view("a", {"_b__c"});
  a.prefix = "a_";
  auto c = gateway_catalog::build({ab, a});
  EXPECT_EQ(*c.tool("a__b__c"), (gateway_route{"a", "_b__c"}));
  ASSERT_NE(find_left_out(c, "a__b", "name_conflict"), nullptr);
}

TEST(GatewayCatalog, DuplicateNameWithinOneServerFirstKeepsIt) {
  auto s = server_view("s");
  s.tools.push_back({{"name", "t"}, {"description", "first"}});
  s.tools.push_back({{"name", "t"}, {"description", "second"}});
  auto c = gateway_catalog::build({s});
  ASSERT_EQ(c.tools_list()["tools"].size(), 1u);
  EXPECT_EQ(c.tools_list()["tools"][0]["description"], "first");
  const auto* l = find_left_out(c, "s", "name_conflict");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kept_by, "s");
}

TEST(GatewayCatalog, EmptyPrefixExposesOwnNames) {
  auto s = server_view("plain", {"search"});
  s.prefix = "";
  auto other = server_view("other", {"search"});
  auto c = gateway_catalog::build({s, other});
  EXPECT_EQ(c.tool("search")->server, "plain");
  EXPECT_EQ(c.tool("search")->name, "search");
  EXPECT_EQ(c.tool("other__search")->server, "other");
}

TEST(GatewayCatalog, EmptyPrefixConflictsWithAnotherServersPrefixedName) {
  auto a = server_view("a", {"b__x"});
  a.prefix = "";
  auto b = server_view("b", {"x"});
  auto c = gateway_catalog::build({b, a});
  EXPECT_EQ(c.tool("b__x")->server, "a");
  EXPECT_EQ(c.tool("b__x")->name, "b__x");
  const auto* l = find_left_out(c, "b", "name_conflict");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kept_by, "a");
}

TEST(GatewayCatalog, PromptsAreExposedAndConflictLikeTools) {
  auto a = server_view("a");
  auto b = server_view("b");
  a.prompts.push_back({{"name", "greet"}, {"arguments", json::array()}});
  b.prefix = "a__";
  b.prompts.push_back({{"name", "greet"}});
  b.prompts.push_back({{"name", "bye"}});
  auto c = gateway_catalog::build({a, b});
  EXPECT_EQ(catalog_names(c.prompts_list(), "prompts"), (std::vector<std::string>{"a__greet", "a__bye"}));
  EXPECT_EQ(*c.prompt("a__greet"), (gateway_route{"a", "greet"}));
  EXPECT_EQ(*c.prompt("a__bye"), (gateway_route{"b", "bye"}));
  EXPECT_FALSE(c.tool("a__greet"));
  const auto* l = find_left_out(c, "b", "name_conflict");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, "prompt");
}

TEST(GatewayCatalog, UnavailableServersShowNothing) {
  auto up = server_view("up", {"t"});
  auto down = server_view("down", {"t"});
  down.available = false;
  down.capabilities = {{"completions", json::object()}};
  down.resources.push_back({{"uri", "file:///x"}});
  auto c = gateway_catalog::build({up, down});
  EXPECT_EQ(catalog_names(c.tools_list(), "tools"), (std::vector<std::string>{"up__t"}));
  EXPECT_TRUE(c.resources_list()["resources"].empty());
  EXPECT_FALSE(c.resource_server("file:///x"));
  EXPECT_FALSE(c.capabilities().contains("completions"));
}

TEST(GatewayCatalog, SecondServerWithTheSameNameIsIgnored) {
  auto first = server_view("s", {"a"});
  auto second = server_view("s", {"b"});
  auto c = gateway_catalog::build({first, second});
  EXPECT_EQ(catalog_names(c.tools_list(), "tools"), (std::vector<std::string>{"s__a"}));
}

TEST(GatewayCatalog, ServerWithoutANameIsIgnored) {
  auto nameless = server_view("", {"a"});
  nameless.prefix = "";
  auto c = gateway_catalog::build({nameless});
  EXPECT_TRUE(c.tools_list()["tools"].empty());
  EXPECT_FALSE(c.tool("a"));
  EXPECT_FALSE(c.guess_server_of_tool("a"));
}

// ---- hostile input ------------------------------------------------------------

TEST(GatewayCatalog, OddEntriesAreSkippedAndCounted) {
  auto s = server_view("s", {"ok"});
  s.tools.push_back(json::array({1, 2}));
  s.tools.push_back("name");
  s.tools.push_back(nullptr);
  s.tools.push_back({{"name", 42}});
  s.tools.push_back({{"name", json::object()}});
  s.tools.push_back({{"name", ""}});
  s.tools.push_back({{"description", "no name"}});
  s.tools.push_back({{"name", std::string(513, 'x')}});
  s.tools.push_back({{"name", std::string(128, 'y')}}); // the longest valid MCP name
  s.resources.push_back({{"uri", 7}});
  s.resources.push_back({{"name", "r"}});
  s.resources.push_back({{"uri", "file:///ok"}});
  auto c = gateway_catalog::build({s});
  // The longest valid name is shown within the 64 characters model APIs
  // take, and still reaches the server under its own name.
  auto long_name = shortened_tool_name("s__" + std::string(128, 'y'));
  EXPECT_EQ(catalog_names(c.tools_list(), "tools"), (std::vector<std::string>{"s__ok", long_name}));
  EXPECT_EQ(c.tool(long_name)->name, std::string(128, 'y'));
  const gateway_left_out* tools = nullptr;
  const gateway_left_out* resources = nullptr;
  for (const auto& l : c.left_out()) {
    EXPECT_EQ(l.reason, "invalid");
    if (l.kind == "tool") tools = &l;
    if (l.kind == "resource") resources = &l;
  }
  ASSERT_NE(tools, nullptr);
  EXPECT_EQ(tools->count, 8u);
  ASSERT_NE(resources, nullptr);
  EXPECT_EQ(resources->count, 2u);
  EXPECT_EQ(c.left_out().size(), 2u);
}

TEST(GatewayCatalog, CapsEntriesPerKindAcrossServers) {
  gateway_limits lim;
  lim.max_entries = 3;
  auto a = server_view("a", {"1", "2"});
  auto b = server_view("b", {"1", "2", "3"});
  auto c = gateway_catalog::build({a, b}, lim);
  EXPECT_EQ(catalog_names(c.tools_list(), "tools"), (std::vector<std::string>{"a__1", "a__2", "b__1"}));
  const auto* l = find_left_out(c, "b", "over_limit");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->count, 2u);
  EXPECT_EQ(l->kind, "tool");
}

TEST(GatewayCatalog, DefaultCapHoldsTenThousandTools) {
  auto s = server_view("s");
  for (int i = 0; i < 10005; ++i)
    s.tools.push_back({{"name", "t" + std::to_string(i)}});
  auto c = gateway_catalog::build({s});
  EXPECT_EQ(c.tools_list()["tools"].size(), 10000u);
  ASSERT_NE(find_left_out(c, "s", "over_limit"), nullptr);
  EXPECT_EQ(find_left_out(c, "s", "over_limit")->count, 5u);
}

TEST(GatewayCatalog, CapabilitiesThatAreNotAnObjectOfferNothing) {
  auto s = server_view("s");
  s.capabilities = json::array({"logging"});
  auto t = server_view("t");
  t.capabilities = {{"completions", nullptr}, {"logging", false}, {"resources", "subscribe"}};
  auto c = gateway_catalog::build({s, t});
  EXPECT_TRUE(c.servers_with("logging").empty());
  EXPECT_TRUE(c.servers_with("completions").empty());
  EXPECT_TRUE(c.servers_with("resources.subscribe").empty());
  EXPECT_EQ(c.servers_with("resources"), (std::vector<std::string>{"t"}));
  EXPECT_TRUE(c.servers_with("").empty());
  EXPECT_TRUE(c.servers_with(".").empty());
}

// ---- resources and templates ----------------------------------------------------

TEST(GatewayCatalog, ResourcesKeepTheirUrisAndFirstServerKeepsADuplicate) {
  auto a = server_view("a");
  auto b = server_view("b");
  a.resources.push_back({{"uri", "file:///same"}, {"name", "from a"}});
  b.resources.push_back({{"uri", "file:///same"}, {"name", "from b"}});
  b.resources.push_back({{"uri", "file:///b-only"}, {"name", "b"}});
  auto c = gateway_catalog::build({b, a});
  EXPECT_EQ(catalog_names(c.resources_list(), "resources", "uri"),
            (std::vector<std::string>{"file:///same", "file:///b-only"}));
  EXPECT_EQ(c.resources_list()["resources"][0]["name"], "from a");
  EXPECT_EQ(c.resource_server("file:///same"), "a");
  EXPECT_EQ(c.resource_server("file:///b-only"), "b");
  EXPECT_FALSE(c.resource_server("file:///nowhere"));
  const auto* l = find_left_out(c, "b", "name_conflict");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, "resource");
  EXPECT_EQ(l->name, "file:///same");
  EXPECT_EQ(l->kept_by, "a");
}

TEST(GatewayCatalog, ReadsRouteByTemplateFirstServerByNameWins) {
  auto gh = server_view("gh");
  gh.resource_templates.push_back({{"uriTemplate", "repo://{owner}/{name}/issues/{n}"}, {"name", "issue"}});
  auto any = server_view("zz");
  any.resource_templates.push_back({{"uriTemplate", "repo://{+rest}"}, {"name", "any"}});
  auto c = gateway_catalog::build({any, gh});
  EXPECT_EQ(catalog_names(c.resource_templates_list(), "resourceTemplates", "uriTemplate"),
            (std::vector<std::string>{"repo://{owner}/{name}/issues/{n}", "repo://{+rest}"}));
  EXPECT_EQ(c.resource_server("repo://x/y/issues/3"), "gh");
  EXPECT_EQ(c.resource_server("repo://x/y/pulls/3"), "zz");
  EXPECT_FALSE(c.resource_server("file:///x"));
}

TEST(GatewayCatalog, ListedUriWinsOverAnEarlierServersTemplate) {
  auto a = server_view("a");
  a.resource_templates.push_back({{"uriTemplate", "file:///{+path}"}});
  auto b = server_view("b");
  b.resources.push_back({{"uri", "file:///etc/hosts"}});
  auto c = gateway_catalog::build({a, b});
  EXPECT_EQ(c.resource_server("file:///etc/hosts"), "b");
  EXPECT_EQ(c.resource_server("file:///etc/passwd"), "a");
}

TEST(GatewayCatalog, SameTemplateTwiceFirstKeepsIt) {
  auto a = server_view("a");
  auto b = server_view("b");
  a.resource_templates.push_back({{"uriTemplate", "x://{id}"}});
  b.resource_templates.push_back({{"uriTemplate", "x://{id}"}});
  auto c = gateway_catalog::build({b, a});
  EXPECT_EQ(c.resource_templates_list()["resourceTemplates"].size(), 1u);
  EXPECT_EQ(c.resource_server("x://7"), "a");
  const auto* l = find_left_out(c, "b", "name_conflict");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, "resource_template");
}

TEST(GatewayCatalog, InvalidTemplateIsShownButRoutesNoRead) {
  auto a = server_view("a");
  a.resource_templates.push_back({{"uriTemplate", "x://{id"}});
  auto b = server_view("b");
  b.resource_templates.push_back({{"uriTemplate", "x://{+any}"}});
  auto c = gateway_catalog::build({a, b});
  EXPECT_EQ(c.resource_templates_list()["resourceTemplates"].size(), 2u);
  EXPECT_EQ(c.resource_server("x://id"), "b");
  // Completion on the template as listed still reaches its server.
  EXPECT_EQ(c.completion({{"type", "ref/resource"}, {"uri", "x://{id"}})->server, "a");
}

TEST(GatewayCatalog, OverlongUriIsNotMatchedAgainstTemplates) {
  gateway_limits lim;
  lim.max_uri_bytes = 16;
  auto a = server_view("a");
  a.resource_templates.push_back({{"uriTemplate", "x://{+any}"}});
  auto c = gateway_catalog::build({a}, lim);
  EXPECT_EQ(c.resource_server("x://short"), "a");
  EXPECT_FALSE(c.resource_server("x://" + std::string(20, 'a')));
}

TEST(GatewayCatalog, TemplatesAreCappedByTheirTotalBytes) {
  gateway_limits lim;
  lim.max_template_bytes_total = 20;
  auto a = server_view("a");
  a.resource_templates.push_back({{"uriTemplate", "aaaa://{x}"}}); // 10 bytes
  a.resource_templates.push_back({{"uriTemplate", "bbbb://{x}"}}); // 20 in all
  a.resource_templates.push_back({{"uriTemplate", "c://{x}"}});
  auto c = gateway_catalog::build({a}, lim);
  EXPECT_EQ(c.resource_templates_list()["resourceTemplates"].size(), 2u);
  EXPECT_EQ(c.resource_server("bbbb://1"), "a");
  EXPECT_FALSE(c.resource_server("c://1"));
  ASSERT_NE(find_left_out(c, "a", "over_limit"), nullptr);
  EXPECT_EQ(find_left_out(c, "a", "over_limit")->count, 1u);
}

// GCC says __SANITIZE_ADDRESS__; clang answers __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool gateway_catalog_test_sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool gateway_catalog_test_sanitized = true;
#else
constexpr bool gateway_catalog_test_sanitized = false;
#endif
#else
constexpr bool gateway_catalog_test_sanitized = false;
#endif

TEST(GatewayCatalog, WorstCaseTemplatesStillAnswerAReadQuickly) {
  // A hostile server fills the template budget with templates whose every
  // position stays alive, and a client reads the longest URI matched.
  auto evil = server_view("evil");
  std::string tpl;
  while (tpl.size() + 8 < 1024)
    tpl += "{+a}";
  for (int i = 0; tpl.size() * (i + 1) <= 8192; ++i)
    evil.resource_templates.push_back({{"uriTemplate", tpl + std::to_string(i) + "!"}});
  auto c = gateway_catalog::build({evil});
  EXPECT_EQ(c.resource_templates_list()["resourceTemplates"].size(), 8u);
  // The thread's CPU time, not the clock's: two other test processes on
  // two cores stretched an ASan run from 3.4 s to 5.3 s of wall time. An
  // exponential matcher would take years, so the bound only has to be far
  // above the polynomial one's: about 0.25 s plain, 3 s under ASan+UBSan.
  auto cpu_now = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
  };
  auto start = cpu_now();
  EXPECT_FALSE(c.resource_server(std::string(8192, 'a')));
  auto took = cpu_now() - start;
  const auto bound = std::chrono::seconds(gateway_catalog_test_sanitized ? 20 : 5);
  EXPECT_LT(took, bound) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

// ---- URI templates ------------------------------------------------------------

TEST(GatewayCatalog, TemplateLevelOneMatchesUnreservedOnly) {
  EXPECT_TRUE(uri_template_matches("file:///{name}", "file:///readme.md"));
  EXPECT_TRUE(uri_template_matches("file:///{name}", "file:///a%20b"));
  EXPECT_TRUE(uri_template_matches("file:///{name}", "file:///")); // undefined expands to nothing
  EXPECT_FALSE(uri_template_matches("file:///{name}", "file:///dir/readme.md"));
  EXPECT_FALSE(uri_template_matches("file:///{name}", "file:///a?b"));
  EXPECT_FALSE(uri_template_matches("file:///{name}", "http:///a"));
  EXPECT_TRUE(uri_template_matches("users/{id}/posts/{post}", "users/42/posts/7"));
  EXPECT_FALSE(uri_template_matches("users/{id}/posts/{post}", "users/42/comments/7"));
  EXPECT_TRUE(uri_template_matches("{a}{b}", "xyz"));
  EXPECT_TRUE(uri_template_matches("list/{x}", "list/a,b,c")); // a list value
}

TEST(GatewayCatalog, TemplateReservedAndFragmentExpansion) {
  EXPECT_TRUE(uri_template_matches("file:///{+path}", "file:///dir/sub/readme.md"));
  EXPECT_TRUE(uri_template_matches("{+base}/x", "http://h:1/a?b=c/x"));
  EXPECT_FALSE(uri_template_matches("{+base}/x", "http://h/y"));
  EXPECT_TRUE(uri_template_matches("doc{#section}", "doc#intro/part"));
  EXPECT_TRUE(uri_template_matches("doc{#section}", "doc"));
  EXPECT_FALSE(uri_template_matches("doc{#section}", "doc/intro"));
}

TEST(GatewayCatalog, TemplatePathLabelAndParameterExpansion) {
  EXPECT_TRUE(uri_template_matches("repo{/owner,name}", "repo/a/b"));
  EXPECT_TRUE(uri_template_matches("repo{/owner,name}", "repo"));
  EXPECT_TRUE(uri_template_matches("repo{/segs*}/end", "repo/a/b/c/end"));
  EXPECT_FALSE(uri_template_matches("repo{/owner}", "repo-a"));
  EXPECT_TRUE(uri_template_matches("file{.ext}", "file.tar.gz"));
  EXPECT_TRUE(uri_template_matches("map{;x,y}", "map;x=1;y=2"));
  EXPECT_FALSE(uri_template_matches("map{;x,y}", "map?x=1"));
}

TEST(GatewayCatalog, TemplateQueryExpansion) {
  EXPECT_TRUE(uri_template_matches("search{?q,lang}", "search?q=cat&lang=en"));
  EXPECT_TRUE(uri_template_matches("search{?q,lang}", "search"));
  EXPECT_TRUE(uri_template_matches("search{?q}{&page}", "search?q=x&page=2"));
  EXPECT_TRUE(uri_template_matches("search{?q}{&page}", "search&page=2")); // q undefined
  EXPECT_FALSE(uri_template_matches("search{?q}", "search?q=a/b"));        // '/' is encoded in a query value
  EXPECT_FALSE(uri_template_matches("search{?q}", "search#x"));
  EXPECT_TRUE(uri_template_matches("s/{id}{?v}", "s/12?v=3"));
  EXPECT_FALSE(uri_template_matches("s/{id}{?v}", "s/12/3"));
}

TEST(GatewayCatalog, TemplateModifiersAndValidity) {
  EXPECT_TRUE(uri_template_valid("x/{var:3}/{list*}/{a.b}/{%41}"));
  EXPECT_TRUE(uri_template_matches("x/{var:3}", "x/abc"));
  EXPECT_TRUE(uri_template_matches("no-expressions", "no-expressions"));
  EXPECT_FALSE(uri_template_matches("no-expressions", "no-expression"));
  for (const char* bad : {"x{", "x}", "x{}", "x{a", "x{{a}}", "x{=a}", "x{!a}", "x{a,}", "x{,a}", "x{a:0}",
                          "x{a:12345}", "x{a:}", "x{a.}", "x{.}", "x{a b}", "x{%4}", "x{a-b}"}) {
    EXPECT_FALSE(uri_template_valid(bad)) << bad;
    EXPECT_FALSE(uri_template_matches(bad, "x")) << bad;
  }
}

TEST(GatewayCatalog, TemplateMatchingStaysLinearOnAdversarialInput) {
  // Many adjacent expressions that could each take any split of the URI:
  // backtracking would be exponential, the state set is not.
  std::string tpl;
  for (int i = 0; i < 100; ++i)
    tpl += "{+v" + std::to_string(i) + "}";
  tpl += "!";
  std::string uri(8000, 'a');
  EXPECT_FALSE(uri_template_matches(tpl, uri));
  EXPECT_TRUE(uri_template_matches(tpl, uri + "!"));
}

// ---- completion routing ---------------------------------------------------------

TEST(GatewayCatalog, CompletionRoutesPromptRefsByExposedName) {
  auto a = server_view("a");
  a.prompts.push_back({{"name", "greet"}});
  auto c = gateway_catalog::build({a});
  auto r = c.completion({{"type", "ref/prompt"}, {"name", "a__greet"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (gateway_route{"a", "greet"}));
  EXPECT_FALSE(c.completion({{"type", "ref/prompt"}, {"name", "greet"}}));
  EXPECT_FALSE(c.completion({{"type", "ref/prompt"}, {"name", 3}}));
}

TEST(GatewayCatalog, CompletionRoutesResourceRefsByTemplateOrUri) {
  auto a = server_view("a");
  a.resource_templates.push_back({{"uriTemplate", "x://{+any}"}});
  auto b = server_view("b");
  b.resource_templates.push_back({{"uriTemplate", "x://{id}"}});
  b.resources.push_back({{"uri", "x://fixed"}});
  auto c = gateway_catalog::build({a, b});
  // The template as listed goes to its own server, even though a's matches it too.
  EXPECT_EQ(*c.completion({{"type", "ref/resource"}, {"uri", "x://{id}"}}), (gateway_route{"b", "x://{id}"}));
  EXPECT_EQ(c.completion({{"type", "ref/resource"}, {"uri", "x://fixed"}})->server, "b");
  EXPECT_EQ(c.completion({{"type", "ref/resource"}, {"uri", "x://other/thing"}})->server, "a");
  EXPECT_FALSE(c.completion({{"type", "ref/resource"}, {"uri", "y://"}}));
}

TEST(GatewayCatalog, CompletionIgnoresOddRefs) {
  auto c = gateway_catalog::build({server_view("a", {"t"})});
  for (const json& ref : {json(nullptr), json("ref/prompt"), json::array(), json::object(), json({{"type", 1}}),
                          json({{"type", "ref/tool"}, {"name", "a__t"}}), json({{"type", "ref/resource"}}),
                          json({{"type", "ref/prompt"}})})
    EXPECT_FALSE(c.completion(ref)) << ref.dump();
}

// ---- guess_server_of_tool ------------------------------------------------------

TEST(GatewayCatalog, GuessFindsTheServerOfAStaleToolByLongestPrefix) {
  auto git = server_view("git", {"log"});
  auto github = server_view("github");
  github.prefix = "git__hub_";
  github.available = false;
  auto c = gateway_catalog::build({git, github});
  EXPECT_EQ(c.guess_server_of_tool("git__log"), "git");           // shown
  EXPECT_EQ(c.guess_server_of_tool("git__status"), "git");        // available but no such tool
  EXPECT_EQ(c.guess_server_of_tool("git__hub_issues"), "github"); // the longer prefix wins
  EXPECT_FALSE(c.guess_server_of_tool("git__"));                  // nothing after the prefix
  EXPECT_FALSE(c.guess_server_of_tool("svn__log"));
}

TEST(GatewayCatalog, GuessPrefersAnUnavailableServerAmongEqualPrefixes) {
  auto a = server_view("a");
  auto b = server_view("b");
  a.prefix = b.prefix = "x_";
  b.available = false;
  auto c = gateway_catalog::build({a, b});
  EXPECT_EQ(c.guess_server_of_tool("x_t"), "b");
  b.available = true;
  c = gateway_catalog::build({a, b});
  EXPECT_EQ(c.guess_server_of_tool("x_t"), "a");
}

TEST(GatewayCatalog, GuessUsesEmptyPrefixOnlyWhenNothingElseMatches) {
  auto bare = server_view("bare");
  bare.prefix = "";
  bare.available = false;
  auto fs = server_view("fs");
  fs.available = false;
  auto c = gateway_catalog::build({bare, fs});
  EXPECT_EQ(c.guess_server_of_tool("fs__read"), "fs");
  EXPECT_EQ(c.guess_server_of_tool("read"), "bare");
  EXPECT_FALSE(c.guess_server_of_tool(""));
  // An available server with the empty prefix shows all its tools: a name
  // it does not show is not its own.
  bare.available = true;
  c = gateway_catalog::build({bare, fs});
  EXPECT_FALSE(c.guess_server_of_tool("read"));
}

// ---- capabilities -------------------------------------------------------------

TEST(GatewayCatalog, CapabilitiesAlwaysListTheListsWithListChanged) {
  auto c = gateway_catalog::build({});
  auto caps = c.capabilities();
  EXPECT_EQ(caps["tools"], json({{"listChanged", true}}));
  EXPECT_EQ(caps["prompts"], json({{"listChanged", true}}));
  EXPECT_EQ(caps["resources"], json({{"listChanged", true}}));
  EXPECT_EQ(caps["logging"], json::object());
  EXPECT_FALSE(caps.contains("completions"));
}

TEST(GatewayCatalog, CapabilitiesUnionSubscribeAndCompletions) {
  auto a = server_view("a");
  a.capabilities = {{"resources", {{"subscribe", true}}}, {"logging", json::object()}};
  auto b = server_view("b");
  b.capabilities = {{"completions", json::object()}, {"resources", {{"subscribe", false}}}};
  auto c = gateway_catalog::build({a, b});
  auto caps = c.capabilities();
  EXPECT_EQ(caps["resources"], json({{"listChanged", true}, {"subscribe", true}}));
  EXPECT_EQ(caps["completions"], json::object());
  EXPECT_EQ(c.servers_with("logging"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(c.servers_with("resources.subscribe"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(c.servers_with("completions"), (std::vector<std::string>{"b"}));
  EXPECT_EQ(c.servers_with("resources"), (std::vector<std::string>{"a", "b"}));
}

// ---- diff -------------------------------------------------------------------

TEST(GatewayCatalog, DiffReportsOnlyListsThatChanged) {
  auto a = server_view("a", {"t"});
  a.prompts.push_back({{"name", "p"}});
  a.resources.push_back({{"uri", "x://1"}});
  auto before = gateway_catalog::build({a});
  auto same = gateway_catalog::build({a});
  EXPECT_FALSE(gateway_catalog::diff(before, same).any());

  auto changed_tool = a;
  changed_tool.tools[0]["description"] = "new";
  auto ch = gateway_catalog::diff(before, gateway_catalog::build({changed_tool}));
  EXPECT_TRUE(ch.tools);
  EXPECT_FALSE(ch.prompts);
  EXPECT_FALSE(ch.resources);

  auto new_prompt = a;
  new_prompt.prompts.push_back({{"name", "q"}});
  ch = gateway_catalog::diff(before, gateway_catalog::build({new_prompt}));
  EXPECT_FALSE(ch.tools);
  EXPECT_TRUE(ch.prompts);

  auto new_template = a;
  new_template.resource_templates.push_back({{"uriTemplate", "x://{id}"}});
  ch = gateway_catalog::diff(before, gateway_catalog::build({new_template}));
  EXPECT_TRUE(ch.resources);
  EXPECT_FALSE(ch.tools);
}

TEST(GatewayCatalog, DiffSeesAServerGoingAwayAndAPrefixChange) {
  auto a = server_view("a", {"t"});
  auto b = server_view("b");
  b.available = false;
  auto before = gateway_catalog::build({a, b});
  // b going out with nothing to show changes no list.
  auto b_up_empty = b;
  b_up_empty.available = true;
  EXPECT_FALSE(gateway_catalog::diff(before, gateway_catalog::build({a, b_up_empty})).any());

  auto a_down = a;
  a_down.available = false;
  auto ch = gateway_catalog::diff(before, gateway_catalog::build({a_down, b}));
  EXPECT_TRUE(ch.tools);
  EXPECT_FALSE(ch.prompts);

  auto renamed = a;
  renamed.prefix = "A_";
  EXPECT_TRUE(gateway_catalog::diff(before, gateway_catalog::build({renamed, b})).tools);
}

// ---- tools held back since their server's approval ------------------------------

TEST(GatewayCatalog, AHeldBackToolIsNotListedButItsCallReachesTheRuntime) {
  auto proj = server_view("proj", {"add"});
  proj.held_tools = {"echo"};
  auto c = gateway_catalog::build({proj});
  EXPECT_EQ(catalog_names(c.tools_list(), "tools"), (std::vector<std::string>{"proj__add"}));
  EXPECT_FALSE(c.tool("proj__echo"));
  ASSERT_TRUE(c.held_tool("proj__echo"));
  EXPECT_EQ(*c.held_tool("proj__echo"), (gateway_route{"proj", "echo"}));
  // A name another server shows stays that server's.
  auto user = server_view("a", {"x"});
  user.prefix = "proj__";
  auto held = server_view("proj", {});
  held.held_tools = {"x"};
  auto both = gateway_catalog::build({user, held});
  EXPECT_FALSE(both.held_tool("proj__x"));
  EXPECT_EQ(*both.tool("proj__x"), (gateway_route{"a", "x"}));
}
