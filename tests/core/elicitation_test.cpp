#include "core/elicitation.hpp"

#include <gtest/gtest.h>

using namespace mcprt;
using nlohmann::json;

namespace {

// The requested schema of the conformance suite's
// elicitation-sep1034-client-defaults scenario.
json sep1034_schema() {
  return json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "description": "User name", "default": "John Doe"},
      "age": {"type": "integer", "description": "User age", "default": 30},
      "score": {"type": "number", "description": "User score", "default": 95.5},
      "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
      "verified": {"type": "boolean", "description": "Verification status", "default": true}
    },
    "required": []
  })");
}

} // namespace

TEST(ElicitationDefaults, EveryPrimitiveTypeAndEnumDefaultIsFilled) {
  auto d = defaults_of_requested_schema(sep1034_schema());
  EXPECT_TRUE(d.complete());
  EXPECT_EQ(d.content, json::parse(R"({"name":"John Doe","age":30,"score":95.5,
                                       "status":"active","verified":true})"));
  EXPECT_TRUE(d.content["age"].is_number_integer());
}

TEST(ElicitationDefaults, PropertiesWithoutADefaultAreLeftOut) {
  auto d = defaults_of_requested_schema(json::parse(R"({"type":"object","properties":{
      "a":{"type":"string"},"b":{"type":"boolean","default":false}}})"));
  EXPECT_TRUE(d.complete());
  EXPECT_EQ(d.content, json::parse(R"({"b":false})"));
}

TEST(ElicitationDefaults, ADefaultOfTheWrongTypeIsLeftOut) {
  auto d = defaults_of_requested_schema(json::parse(R"({"type":"object","properties":{
      "s":{"type":"string","default":5},
      "n":{"type":"number","default":"5"},
      "i":{"type":"integer","default":2.5},
      "b":{"type":"boolean","default":"true"},
      "o":{"type":"object","default":{}},
      "t":{"default":"no type"},
      "notschema":7}})"));
  EXPECT_TRUE(d.complete());
  EXPECT_EQ(d.content, json::object());
}

TEST(ElicitationDefaults, AnIntegralFloatIsAnInteger) {
  auto d = defaults_of_requested_schema(
      json::parse(R"({"type":"object","properties":{"i":{"type":"integer","default":30.0}}})"));
  ASSERT_TRUE(d.content.contains("i"));
  EXPECT_TRUE(d.content["i"].is_number_integer());
  EXPECT_EQ(d.content["i"], 30);
}

TEST(ElicitationDefaults, AnEnumDefaultMustBeAnOption) {
  auto d = defaults_of_requested_schema(json::parse(R"({"type":"object","properties":{
      "plain":{"type":"string","enum":["a","b"],"default":"c"},
      "titled":{"type":"string","oneOf":[{"const":"x","title":"X"},{"const":"y","title":"Y"}],"default":"y"},
      "titled_bad":{"type":"string","oneOf":[{"const":"x","title":"X"}],"default":"z"}}})"));
  EXPECT_EQ(d.content, json::parse(R"({"titled":"y"})"));
}

TEST(ElicitationDefaults, AMultiSelectDefaultListsOptions) {
  auto d = defaults_of_requested_schema(json::parse(R"({"type":"object","properties":{
      "many":{"type":"array","items":{"type":"string","enum":["a","b","c"]},"default":["a","c"]},
      "titled":{"type":"array","items":{"anyOf":[{"const":"x","title":"X"}]},"default":["x"]},
      "bad":{"type":"array","items":{"type":"string","enum":["a"]},"default":["a","q"]},
      "not_strings":{"type":"array","items":{"type":"string"},"default":[1]}}})"));
  EXPECT_EQ(d.content, json::parse(R"({"many":["a","c"],"titled":["x"]})"));
}

TEST(ElicitationDefaults, ARequiredFieldWithoutADefaultMakesItIncomplete) {
  auto d = defaults_of_requested_schema(json::parse(R"({"type":"object","properties":{
      "a":{"type":"string"},"b":{"type":"string","default":"x"}},"required":["a","b"]})"));
  EXPECT_FALSE(d.complete());
  EXPECT_EQ(d.missing_required, std::vector<std::string>{"a"});
}

TEST(ElicitationDefaults, SchemasBeyondTheLimitsAreRefusedWhole) {
  elicitation_limits limits;
  limits.max_properties = 3;
  limits.max_options = 2;
  json props = json::object();
  for (int i = 0; i < 4; ++i)
    props["p" + std::to_string(i)] = {{"type", "string"}, {"default", "d"}};
  auto d = defaults_of_requested_schema({{"type", "object"}, {"properties", props}}, limits);
  EXPECT_FALSE(d.complete());
  EXPECT_EQ(d.content, json::object());
  EXPECT_NE(d.problem.find("more than 3 properties"), std::string::npos);

  // An enum too long to check leaves its default out.
  d = defaults_of_requested_schema(json::parse(R"({"type":"object","properties":{
      "e":{"type":"string","enum":["a","b","c"],"default":"a"}}})"), limits);
  EXPECT_EQ(d.content, json::object());
}

TEST(ElicitationDefaults, NotAnObjectSchemaIsAProblem) {
  EXPECT_FALSE(defaults_of_requested_schema(json("x")).complete());
  EXPECT_FALSE(defaults_of_requested_schema(json::parse(R"({"properties":[]})")).complete());
  EXPECT_TRUE(defaults_of_requested_schema(json::object()).complete()); // nothing asked
}

TEST(AcceptDefaultsAnswer, AcceptsFormModeWithTheDefaults) {
  json params = {{"message", "please"}, {"requestedSchema", sep1034_schema()}};
  auto a = accept_defaults_answer(params);
  EXPECT_EQ(a["action"], "accept");
  EXPECT_EQ(a["content"]["name"], "John Doe");
  params["mode"] = "form";
  EXPECT_EQ(accept_defaults_answer(params)["action"], "accept");
}

TEST(AcceptDefaultsAnswer, DeclinesUrlModeIncompleteDefaultsAndNoSchema) {
  EXPECT_EQ(accept_defaults_answer(json::parse(
                R"({"mode":"url","message":"m","url":"https://x","elicitationId":"1"})")),
            (json{{"action", "decline"}}));
  EXPECT_EQ(accept_defaults_answer(json::parse(R"({"message":"m"})")), (json{{"action", "decline"}}));
  EXPECT_EQ(accept_defaults_answer(json::parse(R"({"requestedSchema":{"type":"object",
      "properties":{"a":{"type":"string"}},"required":["a"]}})")),
            (json{{"action", "decline"}}));
  EXPECT_EQ(accept_defaults_answer(json()), (json{{"action", "decline"}}));
  EXPECT_EQ(accept_defaults_answer(json::parse(R"({"mode":7,"requestedSchema":{}})")),
            (json{{"action", "decline"}}));
}
