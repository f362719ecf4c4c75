#include "core/oauth.hpp"

#include <gtest/gtest.h>

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <memory>
#include <string>
#include <vector>

using namespace mcprt::oauth;
using nlohmann::json;

namespace {

using strings = std::vector<std::string>;

} // namespace

TEST(OAuthChallenge, ReadsTheBearerParametersQuotedOrNot) {
  auto c = parse_www_authenticate(
    R"(Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp")");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->error, "insufficient_scope");
  EXPECT_EQ(c->scope, "mcp:basic mcp:write");
  EXPECT_EQ(c->resource_metadata, "http://h/.well-known/oauth-protected-resource/mcp");
  auto t = parse_www_authenticate("bearer scope=read,error=invalid_token");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->scope, "read");
  EXPECT_EQ(t->error, "invalid_token");
}

TEST(OAuthChallenge, FindsBearerAmongOtherSchemesAndStopsAtTheNext) {
  auto c = parse_www_authenticate(R"(Basic realm="x", Bearer scope="a \"b\"", DPoP algs="ES256", scope="not-ours")");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->scope, "a \"b\"");
  EXPECT_FALSE(parse_www_authenticate(R"(Basic realm="x")"));
  EXPECT_FALSE(parse_www_authenticate(""));
  EXPECT_TRUE(parse_www_authenticate("Bearer"));
}

TEST(OAuthChallenge, SurvivesJunk) {
  for (std::string junk : {"\"", "=", "Bearer ====", "Bearer scope=\"unterminated", ",,,", "Bearer a=\"\\", "\x01\x02"})
    (void)parse_www_authenticate(junk); // must not crash or hang
  std::string huge(100000, 'a');
  (void)parse_www_authenticate("Bearer scope=\"" + huge);
  SUCCEED();
}

TEST(OAuthDiscovery, ProtectedResourceMetadataOrder) {
  EXPECT_EQ(protected_resource_metadata_urls("http://h:1/mcp", ""),
            (strings{"http://h:1/.well-known/oauth-protected-resource/mcp", "http://h:1/.well-known/oauth-protected-resource"}));
  EXPECT_EQ(protected_resource_metadata_urls("http://h:1/mcp", "http://h:1/custom/metadata.json"),
            (strings{"http://h:1/custom/metadata.json", "http://h:1/.well-known/oauth-protected-resource/mcp",
                     "http://h:1/.well-known/oauth-protected-resource"}));
  EXPECT_EQ(protected_resource_metadata_urls("https://h/", ""), (strings{"https://h/.well-known/oauth-protected-resource"}));
  // A challenge URL that is not http(s) is not fetched.
  EXPECT_EQ(protected_resource_metadata_urls("http://h/mcp", "file:///etc/passwd").size(), 2u);
}

TEST(OAuthDiscovery, AuthorizationServerMetadataOrderNeverTheRootForAPathIssuer) {
  EXPECT_EQ(authorization_server_metadata_urls("http://as:9"),
            (strings{"http://as:9/.well-known/oauth-authorization-server", "http://as:9/.well-known/openid-configuration"}));
  EXPECT_EQ(authorization_server_metadata_urls("http://as:9/tenant1/"),
            (strings{"http://as:9/.well-known/oauth-authorization-server/tenant1",
                     "http://as:9/.well-known/openid-configuration/tenant1",
                     "http://as:9/tenant1/.well-known/openid-configuration"}));
  EXPECT_TRUE(authorization_server_metadata_urls("ftp://x").empty());
}

TEST(OAuthDiscovery, ResourceMustNameThisServer) {
  EXPECT_TRUE(resource_matches("http://h:1/mcp", "http://h:1/mcp"));
  EXPECT_TRUE(resource_matches("http://h:1/mcp", "http://h:1"));
  EXPECT_TRUE(resource_matches("http://h:1/mcp/x", "http://h:1/mcp/"));
  EXPECT_FALSE(resource_matches("http://h:1/mcp", "http://h:2/mcp"));
  EXPECT_FALSE(resource_matches("http://h:1/mcp", "https://h:1/mcp"));
  EXPECT_FALSE(resource_matches("http://h:1/mcpx", "http://h:1/mcp"));
  EXPECT_FALSE(resource_matches("http://h:1/mcp", "http://evil.example/mcp"));
  EXPECT_EQ(canonical_resource("HTTP://H:1/mcp?x=1#frag"), "http://h:1/mcp");
}

TEST(OAuthMetadata, ResourceMetadataNeedsAResource) {
  std::string why;
  EXPECT_FALSE(parse_protected_resource_metadata(json{{"authorization_servers", {"http://as"}}}, &why));
  EXPECT_NE(why.find("resource"), std::string::npos);
  auto m = parse_protected_resource_metadata(
    json{{"resource", "http://h/mcp"}, {"authorization_servers", {"http://as", "javascript:x", 3}}, {"scopes_supported", {"a"}}},
    &why);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->authorization_servers, strings{"http://as"});
  EXPECT_EQ(m->scopes_supported, strings{"a"});
}

TEST(OAuthMetadata, IssuerMustMatchUnlessSkipped) {
  json j{{"issuer", "http://as/oauth"}, {"authorization_endpoint", "http://as/oauth/authorize"},
         {"token_endpoint", "http://as/oauth/token"}, {"client_id_metadata_document_supported", true}};
  std::string why;
  EXPECT_FALSE(parse_authorization_server_metadata(j, "http://as", &why));
  EXPECT_NE(why.find("issuer"), std::string::npos);
  EXPECT_TRUE(parse_authorization_server_metadata(j, "http://as/oauth/", &why));
  auto m = parse_authorization_server_metadata(j, "", &why);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->client_id_metadata_document_supported);
  EXPECT_FALSE(parse_authorization_server_metadata(json{{"issuer", "http://as"}}, "http://as", &why));
}

TEST(OAuthMetadata, DefaultEndpointsSitAtTheServersOrigin) {
  auto m = default_endpoints("http://h:5/some/mcp");
  EXPECT_EQ(m.authorization_endpoint, "http://h:5/authorize");
  EXPECT_EQ(m.token_endpoint, "http://h:5/token");
  EXPECT_EQ(m.registration_endpoint, "http://h:5/register");
}

TEST(OAuthScope, ChallengeThenResourceThenNone) {
  EXPECT_EQ(choose_scope("mcp:basic", strings{"a", "b"}, std::nullopt, true), "mcp:basic");
  EXPECT_EQ(choose_scope("", strings{"a", "b"}, std::nullopt, true), "a b");
  EXPECT_EQ(choose_scope("", std::nullopt, strings{"x"}, true), "");
}

TEST(OAuthScope, OfflineAccessOnlyWhenTheServerListsIt) {
  EXPECT_EQ(choose_scope("", strings{"mcp:basic"}, strings{"mcp:basic", "offline_access"}, true), "mcp:basic offline_access");
  EXPECT_EQ(choose_scope("", strings{"mcp:basic"}, strings{"mcp:basic", "mcp:read"}, true), "mcp:basic");
  EXPECT_EQ(choose_scope("", strings{"mcp:basic"}, strings{"offline_access"}, false), "mcp:basic");
  EXPECT_EQ(merge_scopes("a b", "b c"), "a b c");
}

TEST(OAuthClientAuth, FollowsTheServersList) {
  EXPECT_EQ(choose_client_auth({"client_secret_basic"}, true, false), client_auth::client_secret_basic);
  EXPECT_EQ(choose_client_auth({"client_secret_post"}, true, false), client_auth::client_secret_post);
  EXPECT_EQ(choose_client_auth({"none"}, false, false), client_auth::none);
  EXPECT_EQ(choose_client_auth({"private_key_jwt"}, false, true), client_auth::private_key_jwt);
  EXPECT_EQ(choose_client_auth({}, true, false), client_auth::client_secret_basic);
  EXPECT_EQ(choose_client_auth({}, false, false), client_auth::none);
}

TEST(OAuthPkce, S256OfTheVerifier) {
  // RFC 7636 appendix B.
  const unsigned char bytes[] = {116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186,
                                 22, 212, 37, 77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141, 121};
  auto p = make_pkce(std::string(reinterpret_cast<const char*>(bytes), sizeof bytes));
  EXPECT_EQ(p.verifier, "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk");
  EXPECT_EQ(p.challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
}

TEST(OAuthForm, EncodesAndDecodes) {
  EXPECT_EQ(form_encode({{"a b", "c&d=e"}, {"x", "http://h/cb?y=1"}}), "a%20b=c%26d%3De&x=http%3A%2F%2Fh%2Fcb%3Fy%3D1");
  auto q = parse_query("code=abc&state=x%2By+z&bad=%zz&empty=");
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[1].second, "x+y z");
  EXPECT_FALSE(form_unescape("%4"));
  EXPECT_EQ(base64("ab"), "YWI=");
  EXPECT_EQ(base64url("\xfb\xff"), "-_8");
}

TEST(OAuthRequest, AuthorizationUrlCarriesPkceStateAndResource) {
  auto url = authorization_url("http://as/authorize", {"cid", "http://127.0.0.1:5/callback", "a b", "st", "ch", "http://h/mcp"});
  EXPECT_EQ(url.rfind("http://as/authorize?response_type=code&client_id=cid&", 0), 0u) << url;
  for (auto part : {"code_challenge=ch", "code_challenge_method=S256", "state=st", "scope=a%20b", "resource=http%3A%2F%2Fh%2Fmcp",
                    "redirect_uri=http%3A%2F%2F127.0.0.1%3A5%2Fcallback"})
    EXPECT_NE(url.find(part), std::string::npos) << part;
  auto bare = authorization_url("http://as/authorize?tenant=1", {"c", "r", "", "s", "h", ""});
  EXPECT_EQ(bare.find("scope="), std::string::npos);
  EXPECT_EQ(bare.find("resource="), std::string::npos);
  EXPECT_NE(bare.find("?tenant=1&response_type"), std::string::npos);
  auto cb = parse_callback("code=abc&state=st");
  ASSERT_TRUE(cb);
  EXPECT_EQ(cb->code, "abc");
  EXPECT_FALSE(parse_callback("state=only"));
}

TEST(OAuthToken, ReadsAnswerAndExpiry) {
  std::string why;
  auto t = parse_token_response(200, R"({"access_token":"tok","token_type":"bearer","expires_in":3600,"refresh_token":"r","scope":"a"})",
                                1000, &why);
  ASSERT_TRUE(t) << why;
  EXPECT_EQ(t->expires_at, 4600);
  EXPECT_EQ(t->refresh_token, "r");
  EXPECT_FALSE(parse_token_response(200, R"({"token_type":"Bearer"})", 0, &why));
  EXPECT_FALSE(parse_token_response(200, R"({"access_token":"t","token_type":"mac"})", 0, &why));
  EXPECT_TRUE(parse_token_response(200, R"({"access_token":"jag","token_type":"N_A"})", 0, &why, true));
  EXPECT_FALSE(parse_token_response(200, R"({"access_token":"bad token"})", 0, &why));
}

TEST(OAuthToken, ErrorsNameTheServersCodeNeverATokenOrTheBody) {
  std::string why;
  EXPECT_FALSE(parse_token_response(400, R"({"error":"invalid_grant","error_description":"code expired","access_token":"SECRET-1"})",
                                    0, &why));
  EXPECT_NE(why.find("invalid_grant"), std::string::npos);
  EXPECT_NE(why.find("code expired"), std::string::npos);
  EXPECT_EQ(why.find("SECRET-1"), std::string::npos);
  EXPECT_FALSE(parse_token_response(500, "refresh_token=SECRET-2", 0, &why));
  EXPECT_EQ(why.find("SECRET-2"), std::string::npos);
  EXPECT_FALSE(parse_registration_response(400, R"({"client_secret":"SECRET-3"})", &why));
  EXPECT_EQ(why.find("SECRET-3"), std::string::npos);
}

TEST(OAuthRegistration, AsksForRefreshTokensAndReadsTheClient) {
  auto j = registration_request("mcprt", {"http://127.0.0.1:5/callback"}, "a", "none");
  EXPECT_EQ(j["grant_types"], json({"authorization_code", "refresh_token"}));
  EXPECT_EQ(j["redirect_uris"], json({"http://127.0.0.1:5/callback"}));
  EXPECT_EQ(j["token_endpoint_auth_method"], "none");
  std::string why;
  auto r = parse_registration_response(201, R"({"client_id":"c","client_secret":"s","client_secret_expires_at":99})", &why);
  ASSERT_TRUE(r) << why;
  EXPECT_EQ(r->client_id, "c");
  EXPECT_EQ(r->client_secret_expires_at, 99);
}

TEST(OAuthJwt, SignsAnES256AssertionThatVerifies) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  ASSERT_TRUE(key);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  ASSERT_EQ(PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr), 1);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  std::string pem(data, static_cast<std::size_t>(len));

  std::string why;
  auto jwt = sign_jwt(client_assertion_claims("cid", "http://as", 100, "j1"), pem, "ES256", &why);
  ASSERT_FALSE(jwt.empty()) << why;
  auto dot1 = jwt.find('.');
  auto dot2 = jwt.rfind('.');
  ASSERT_NE(dot1, dot2);
  EXPECT_EQ(jwt.substr(0, dot1), base64url(R"({"alg":"ES256","typ":"JWT"})"));
  EXPECT_EQ(jwt.size() - dot2 - 1, 86u); // 64 bytes of r || s, base64url

  EXPECT_TRUE(sign_jwt(json::object(), pem, "RS256", &why).empty()); // an EC key for an RSA algorithm
  EXPECT_TRUE(sign_jwt(json::object(), "-----BEGIN PRIVATE KEY-----\nSECRETKEY\n", "ES256", &why).empty());
  EXPECT_EQ(why.find("SECRETKEY"), std::string::npos);
  EXPECT_TRUE(sign_jwt(json::object(), pem, "none", &why).empty());
}
