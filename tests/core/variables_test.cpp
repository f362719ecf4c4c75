#include "core/variables.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "core/untrusted_text.hpp"

using namespace mcprt;
using nlohmann::json;
using kind = expansion_problem::kind;

namespace {

const std::string secret = "sk-live-SECRET-0123456789abcdef";

variable_context make_context() {
  static const std::map<std::string, std::string> env{
      {"HOME", "/home/u"},    {"EMPTY", ""},          {"TOKEN", secret},
      {"LOOP", "${HOME}"},    {"A_1", "a1"},          {"userHome", "/from/env"},
      {"DOLLAR", "$"},        {"BRACE", "${"},
  };
  static const std::map<std::string, std::string> inputs{{"token", "input-" + secret}, {"my.id-2", "v2"}};
  variable_context ctx;
  ctx.env = [](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  ctx.input = [](const std::string& id) -> std::optional<std::string> {
    auto it = inputs.find(id);
    if (it == inputs.end()) return std::nullopt;
    return it->second;
  };
  ctx.workspace_folder = "/work/proj/";
  ctx.user_home = "/home/u";
  return ctx;
}

std::string value(std::string_view text) {
  auto r = expand_variables(text, make_context());
  EXPECT_FALSE(r.problem) << text << ": " << r.problem->message();
  return r.value;
}

expansion_problem problem(std::string_view text, const variable_context& ctx = make_context()) {
  auto r = expand_variables(text, ctx);
  EXPECT_TRUE(r.problem) << text << " expanded to " << r.value;
  EXPECT_EQ(r.value, "") << text;
  return r.problem.value_or(expansion_problem{});
}

} // namespace

TEST(VariablesText, ExpandsPlainReferences) {
  EXPECT_EQ(value("${HOME}"), "/home/u");
  EXPECT_EQ(value("x=${HOME}/bin:${A_1}."), "x=/home/u/bin:a1.");
  EXPECT_EQ(value("${EMPTY}"), "");
  EXPECT_EQ(value("no variables"), "no variables");
  EXPECT_EQ(value(""), "");
}

TEST(VariablesText, MissingVariableIsAProblemNamingIt) {
  auto p = problem("pre ${NOPE} post");
  EXPECT_EQ(p.what, kind::missing_variable);
  EXPECT_EQ(p.variable, "NOPE");
  EXPECT_EQ(p.key_path, "");
  EXPECT_EQ(p.message(), "variable NOPE is not set and has no default");
}

TEST(VariablesText, DefaultIsUsedWhenUnsetOrEmptyButNotWhenSet) {
  EXPECT_EQ(value("${NOPE:-fallback}"), "fallback");
  EXPECT_EQ(value("${EMPTY:-fallback}"), "fallback");
  EXPECT_EQ(value("${HOME:-fallback}"), "/home/u");
  // An empty default is a default: the result is empty, not an error.
  EXPECT_EQ(value("[${NOPE:-}]"), "[]");
  // The default is literal text: spaces, colons, dashes and `$` as written.
  EXPECT_EQ(value("${NOPE:-a b:-c $d}"), "a b:-c $d");
}

TEST(VariablesText, EnvPrefixReadsTheEnvironmentWithoutADefault) {
  EXPECT_EQ(value("${env:HOME}"), "/home/u");
  EXPECT_EQ(value("${env:EMPTY}"), "");
  auto p = problem("${env:NOPE}");
  EXPECT_EQ(p.what, kind::missing_variable);
  EXPECT_EQ(p.variable, "env:NOPE");
  EXPECT_EQ(p.message(), "variable env:NOPE is not set");
}

TEST(VariablesText, PredefinedNamesComeFromTheContext) {
  EXPECT_EQ(value("${workspaceFolder}/src"), "/work/proj//src");
  EXPECT_EQ(value("${workspaceFolderBasename}"), "proj");
  // The context's userHome, not the environment variable of that name.
  EXPECT_EQ(value("${userHome}"), "/home/u");
  EXPECT_EQ(value("a${pathSeparator}b${/}c"), "a/b/c");
}

TEST(VariablesText, EmptyPredefinedValueCountsAsUnset) {
  auto ctx = make_context();
  ctx.workspace_folder = "";
  ctx.user_home = "";
  auto p = problem("${workspaceFolder}", ctx);
  EXPECT_EQ(p.what, kind::missing_variable);
  EXPECT_EQ(p.variable, "workspaceFolder");
  EXPECT_EQ(p.message(), "variable workspaceFolder has no value here");
  EXPECT_EQ(problem("${userHome}", ctx).variable, "userHome");
  EXPECT_EQ(problem("${workspaceFolderBasename}", ctx).variable, "workspaceFolderBasename");
  auto r = expand_variables("${userHome:-/tmp}", ctx);
  ASSERT_FALSE(r.problem);
  EXPECT_EQ(r.value, "/tmp");
  ctx.workspace_folder = "/";
  EXPECT_EQ(problem("${workspaceFolderBasename}", ctx).what, kind::missing_variable);
}

TEST(VariablesText, InputsComeFromTheInputLookup) {
  EXPECT_EQ(value("${input:my.id-2}"), "v2");
  auto p = problem("${input:other}");
  EXPECT_EQ(p.what, kind::missing_input);
  EXPECT_EQ(p.variable, "input:other");
  EXPECT_EQ(p.message(), "input 'other' has no stored value (run `mcprt input set other`)");
  // No input lookup at all: the same kind, so the caller asks for input.
  auto ctx = make_context();
  ctx.input = nullptr;
  EXPECT_EQ(problem("${input:token}", ctx).what, kind::missing_input);
  // No env lookup: everything is unset.
  ctx.env = nullptr;
  EXPECT_EQ(problem("${HOME}", ctx).what, kind::missing_variable);
}

TEST(VariablesText, OtherWellFormedReferencesAreUnsupported) {
  for (auto [text, shown] : std::map<std::string, std::string>{
           {"${config:x}", "config:x"},
           {"${command:y.z}", "command:y.z"},
           {"${foo:bar}", "foo:..."},
           {"${TOKEN:sk_live_123}", "TOKEN:..."},
           {"${env:1X}", "env:1X"},
           {"${env:}", "env:"},
           {"${input:}", "input:"},
           {"${input:a b}", "input:..."},
           {"${workspaceFolder:other}", "workspaceFolder:..."},
           {"${VAR-x}", "VAR-..."},
           {"${VAR:=x}", "VAR:=..."},
           {"${VAR:?x}", "VAR:?..."},
           {"${foo bar}", "foo..."},
           {"${env:HOME:-x}", "env:..."},
       }) {
    auto p = problem(text);
    EXPECT_EQ(p.what, kind::unsupported) << text;
    EXPECT_EQ(p.variable, shown) << text;
    EXPECT_EQ(p.message(), "unsupported variable " + shown) << text;
  }
}

TEST(VariablesText, DollarWithoutBraceIsLiteral) {
  EXPECT_EQ(value("$HOME"), "$HOME");
  EXPECT_EQ(value("$$ and $"), "$$ and $");
  EXPECT_EQ(value("cost: 5$"), "cost: 5$");
  EXPECT_EQ(value("$${HOME}"), "$/home/u");
  EXPECT_EQ(value("$ {HOME}"), "$ {HOME}");
}

TEST(VariablesText, UnterminatedReferenceIsLiteralToTheEnd) {
  EXPECT_EQ(value("${HOME"), "${HOME");
  EXPECT_EQ(value("${HOME}/${NOPE"), "/home/u/${NOPE");
  // Nothing after an unclosed `${` is expanded: no `}` can close it either.
  EXPECT_EQ(value("a${ ${HOME"), "a${ ${HOME");
  EXPECT_EQ(value("${"), "${");
}

TEST(VariablesText, BraceNotFollowedByANameIsLiteralAndScanningGoesOn) {
  EXPECT_EQ(value("${1}"), "${1}");
  EXPECT_EQ(value("sh -c 'echo ${1} ${#} ${@}'"), "sh -c 'echo ${1} ${#} ${@}'");
  EXPECT_EQ(value("${ HOME }"), "${ HOME }");
  EXPECT_EQ(value("${}"), "${}");
  EXPECT_EQ(value("${${HOME}}"), "${/home/u}");
  EXPECT_EQ(value("${-${HOME}"), "${-/home/u");
}

TEST(VariablesText, DefaultEndsAtTheFirstBraceAndMayNotHoldAReference) {
  // `${A:-${B}}`: the default would be `${B` up to the first `}`; rather
  // than a value with a literal `${B` or a stray `}`, it is an error,
  // whether A is set or not.
  for (auto [text, shown] : std::map<std::string, std::string>{
           {"${NOPE:-${HOME}}", "NOPE:-..."}, {"${HOME:-${HOME}}", "HOME:-..."}, {"${NOPE:-x${y}", "NOPE:-..."}}) {
    auto p = problem(text);
    EXPECT_EQ(p.what, kind::unsupported) << text;
    EXPECT_EQ(p.variable, shown) << text;
  }
  // A `}` ends the default; what follows is ordinary text.
  EXPECT_EQ(value("${NOPE:-a}b}"), "ab}");
}

TEST(VariablesText, SubstitutedValuesAreNeverExpandedAgain) {
  EXPECT_EQ(value("${LOOP}"), "${HOME}");
  EXPECT_EQ(value("${BRACE}HOME}"), "${HOME}");
  EXPECT_EQ(value("${DOLLAR}{HOME}"), "${HOME}");
}

TEST(VariablesText, TooLongStopsAtTheBound) {
  // 16 MiB of "${HOME}" would be ~18 MiB expanded; it stops at 1 MiB.
  std::string text;
  for (std::size_t i = 0; i < (16u << 20) / 7; ++i)
    text += "${HOME}";
  auto r = expand_variables(text, make_context());
  ASSERT_TRUE(r.problem);
  EXPECT_EQ(r.problem->what, kind::too_long);
  EXPECT_EQ(r.problem->variable, "HOME");
  EXPECT_EQ(r.value, "");
  // Literal text crossing it: no variable to name.
  std::string literal(max_expanded_bytes, 'x');
  auto l = expand_variables(literal + "${EMPTY}", make_context());
  EXPECT_FALSE(l.problem);
  EXPECT_EQ(l.value.size(), max_expanded_bytes);
  l = expand_variables(literal + "${EMPTY}!", make_context());
  ASSERT_TRUE(l.problem);
  EXPECT_EQ(l.problem->what, kind::too_long);
  EXPECT_EQ(l.problem->variable, "");
}

TEST(VariablesText, HasVariablesIsACheapContainsCheck) {
  EXPECT_TRUE(has_variables("a${b"));
  EXPECT_TRUE(has_variables("${1}"));
  EXPECT_FALSE(has_variables("$HOME {x}"));
  EXPECT_FALSE(has_variables(""));
}

TEST(VariablesText, ProblemNamesAreEscapedAndCut) {
  std::string long_prefix(200, 'p');
  auto p = problem("${config:" + long_prefix + "}");
  EXPECT_EQ(p.what, kind::unsupported);
  EXPECT_EQ(p.variable, "config:" + std::string(57, 'p') + "...");
  // An unknown prefix shows only its name, cut too.
  auto u = problem("${" + long_prefix + ":x}");
  EXPECT_EQ(u.variable.rfind(std::string(64, 'p') + "...", 0), 0u) << u.variable;
  EXPECT_EQ(u.variable.find('x'), std::string::npos) << u.variable;
  // A control character after the name: shown only up to the name.
  auto q = problem("${VAR\x1b[31m}");
  EXPECT_EQ(q.variable, "VAR...");
  EXPECT_EQ(escape_for_display(q.message()).size(), q.message().size());
}

TEST(VariablesSpec, ExpandsEveryExpandableKey) {
  json spec = json::parse(R"({
    "command": "${HOME}/bin/srv", "args": ["--root", "${workspaceFolder}", 7],
    "env": {"TOKEN": "${TOKEN}", "${HOME}": "name stays"}, "cwd": "${userHome}",
    "url": "https://h/${A_1}", "httpUrl": "https://h/${env:A_1}",
    "headers": {"Authorization": "Bearer ${input:token}"}})");
  auto r = expand_server_spec(spec, make_context());
  ASSERT_FALSE(r.problem) << r.problem->message();
  EXPECT_EQ(r.spec["command"], "/home/u/bin/srv");
  EXPECT_EQ(r.spec["args"], json::parse(R"(["--root", "/work/proj/", 7])"));
  EXPECT_EQ(r.spec["env"]["TOKEN"], secret);
  // Names are not expanded, only values.
  EXPECT_EQ(r.spec["env"]["${HOME}"], "name stays");
  EXPECT_EQ(r.spec["env"].size(), 2u);
  EXPECT_EQ(r.spec["cwd"], "/home/u");
  EXPECT_EQ(r.spec["url"], "https://h/a1");
  EXPECT_EQ(r.spec["httpUrl"], "https://h/a1");
  EXPECT_EQ(r.spec["headers"]["Authorization"], "Bearer input-" + secret);
}

TEST(VariablesSpec, LeavesOtherKeysAndNonStringValuesUntouched) {
  json spec = json::parse(R"({
    "command": "${HOME}", "timeout": 1500, "trust": true, "type": "${HOME}",
    "description": "${NOPE}", "includeTools": ["${NOPE}"], "prefix": "${x:y}",
    "cwd": 5, "url": null, "env": ["${NOPE}"], "headers": "${NOPE}", "args": {"a": "${NOPE}"},
    "futureField": {"command": "${NOPE}"}})");
  auto r = expand_server_spec(spec, make_context());
  ASSERT_FALSE(r.problem) << r.problem->message();
  json expected = spec;
  expected["command"] = "/home/u";
  EXPECT_EQ(r.spec, expected);
}

TEST(VariablesSpec, SpecWithoutVariablesComesBackUnchanged) {
  json spec = json::parse(R"({"command": "node", "args": ["$HOME", "{x}"], "env": {"A": "b"}})");
  auto r = expand_server_spec(spec, make_context());
  EXPECT_FALSE(r.problem);
  EXPECT_EQ(r.spec, spec);
  // Not an object: returned as is.
  auto s = expand_server_spec(json("${NOPE}"), make_context());
  EXPECT_FALSE(s.problem);
  EXPECT_EQ(s.spec, "${NOPE}");
}

TEST(VariablesSpec, KeyPathOfEachKeyKind) {
  auto path_of = [](json spec) {
    auto r = expand_server_spec(spec, make_context());
    EXPECT_TRUE(r.problem) << spec.dump();
    // On a problem the spec comes back unexpanded.
    EXPECT_EQ(r.spec, spec);
    return r.problem ? r.problem->key_path : std::string("(none)");
  };
  EXPECT_EQ(path_of({{"command", "${NOPE}"}}), "command");
  EXPECT_EQ(path_of({{"args", {"a", "${HOME}", "${NOPE}"}}}), "args[2]");
  EXPECT_EQ(path_of({{"env", {{"GITHUB_TOKEN", "${NOPE}"}}}}), "env.GITHUB_TOKEN");
  EXPECT_EQ(path_of({{"cwd", "${NOPE}"}}), "cwd");
  EXPECT_EQ(path_of({{"url", "${NOPE}"}}), "url");
  EXPECT_EQ(path_of({{"httpUrl", "${NOPE}"}}), "httpUrl");
  EXPECT_EQ(path_of({{"headers", {{"Authorization", "${NOPE}"}}}}), "headers.Authorization");
  // A header name with a control character is escaped in the path.
  EXPECT_EQ(path_of({{"headers", {{"X-\nForged", "${NOPE}"}}}}), "headers.X-\\nForged");
  std::string long_name(100, 'N');
  EXPECT_EQ(path_of({{"env", {{long_name, "${NOPE}"}}}}), "env." + std::string(64, 'N') + "...");
}

TEST(VariablesSpec, ReportsTheFirstProblemWithItsMessage) {
  // Keys in the object's order (nlohmann::json sorts them): args before env.
  json spec = {{"env", {{"TOKEN", "${input:token2}"}}}, {"args", {"ok", "${config:x}"}}};
  auto r = expand_server_spec(spec, make_context());
  ASSERT_TRUE(r.problem);
  EXPECT_EQ(r.problem->what, kind::unsupported);
  EXPECT_EQ(r.problem->message(), "args[1]: unsupported variable config:x");
  spec.erase("args");
  r = expand_server_spec(spec, make_context());
  ASSERT_TRUE(r.problem);
  EXPECT_EQ(r.problem->what, kind::missing_input);
  EXPECT_EQ(r.problem->message(), "env.TOKEN: input 'token2' has no stored value (run `mcprt input set token2`)");
  r = expand_server_spec({{"args", {"x", "y", "${GITHUB_TOKEN}"}}}, make_context());
  ASSERT_TRUE(r.problem);
  EXPECT_EQ(r.problem->message(), "args[2]: variable GITHUB_TOKEN is not set and has no default");
}

TEST(VariablesSpec, MessagesNeverHoldAValue) {
  // The secret is expanded fine in one place; an error elsewhere must not
  // carry it (nor the default's text, nor an input's value).
  json spec = json::parse(R"({
    "args": ["${TOKEN}", "${input:token}", "${NOPE:-)" + secret + R"(}"],
    "env": {"A": "${TOKEN}${HOME:-)" + secret + R"(${X}}"},
    "headers": {"B": "${TOKEN}"}, "url": "${config:x}"})");
  auto r = expand_server_spec(spec, make_context());
  ASSERT_TRUE(r.problem);
  EXPECT_EQ(r.problem->key_path, "env.A");
  EXPECT_EQ(r.problem->variable, "HOME:-...");
  for (auto& text : {r.problem->message(), r.problem->variable, r.problem->key_path}) {
    EXPECT_EQ(text.find("SECRET"), std::string::npos) << text;
    EXPECT_EQ(text.find("/home/u"), std::string::npos) << text;
  }
  auto t = expand_server_spec({{"args", {"${TOKEN}", std::string(max_expanded_bytes, 'x') + "${TOKEN}"}}},
                              make_context());
  ASSERT_TRUE(t.problem);
  EXPECT_EQ(t.problem->what, kind::too_long);
  EXPECT_EQ(t.problem->key_path, "args[1]");
  EXPECT_EQ(t.problem->message().find("SECRET"), std::string::npos);
}

TEST(VariablesSpec, ExpandedStringsOfOneEntryAreBoundedTogether) {
  // Each element is well under 1 MiB; together they pass the entry's bound.
  std::string half(max_expanded_bytes / 2, 'h');
  json args = json::array();
  for (std::size_t i = 0; i < 2 * max_expanded_spec_bytes / max_expanded_bytes + 1; ++i)
    args.push_back(half + "${HOME}");
  auto r = expand_server_spec({{"args", args}}, make_context());
  ASSERT_TRUE(r.problem);
  EXPECT_EQ(r.problem->what, kind::too_long);
  EXPECT_EQ(r.problem->key_path, "args[" + std::to_string(2 * max_expanded_spec_bytes / max_expanded_bytes - 1) + "]");
  // Strings without variables do not count: they are copies of the file.
  json plain = json::array();
  for (std::size_t i = 0; i < 10; ++i)
    plain.push_back(half);
  plain.push_back("${HOME}");
  auto p = expand_server_spec({{"args", plain}}, make_context());
  ASSERT_FALSE(p.problem);
  EXPECT_EQ(p.spec["args"][10], "/home/u");
}

TEST(VariablesEnvironment, ProcessEnvironmentReadsAtCallTime) {
  auto env = process_environment();
  ::unsetenv("MCPRT_VARIABLES_TEST");
  EXPECT_EQ(env("MCPRT_VARIABLES_TEST"), std::nullopt);
  ::setenv("MCPRT_VARIABLES_TEST", "now set", 1);
  EXPECT_EQ(env("MCPRT_VARIABLES_TEST"), "now set");
  ::unsetenv("MCPRT_VARIABLES_TEST");
}

TEST(VariablesSpec, SpecHasVariablesLooksOnlyWhereExpansionHappens) {
  EXPECT_FALSE(spec_has_variables(nlohmann::json::parse(R"({"command": "x", "args": ["$HOME"], "env": {"A": "b"}})")));
  EXPECT_FALSE(spec_has_variables(nlohmann::json::parse(R"({"command": "x", "description": "${NOT_EXPANDED}"})")));
  EXPECT_FALSE(spec_has_variables(nlohmann::json::parse(R"({"command": "x", "env": {"${NAME}": "b"}})")));
  EXPECT_FALSE(spec_has_variables(nlohmann::json::array()));
  for (auto text : {R"({"command": "${X}"})", R"({"cwd": "${workspaceFolder}"})", R"({"url": "${U}"})",
                    R"({"httpUrl": "${U}"})", R"({"args": ["a", "${X}"]})", R"({"env": {"A": "${X}"}})",
                    R"({"headers": {"A": "${X}"}})"})
    EXPECT_TRUE(spec_has_variables(nlohmann::json::parse(text))) << text;
}
