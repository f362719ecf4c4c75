#include "core/oauth_token_store.hpp"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HasSubstr;
using testing::IsEmpty;
using testing::SizeIs;

namespace mcprt {
namespace {

using test::read_bytes;
using test::write_bytes;
using test::mode_of;
using test::joined;

const std::string url_a = "https://mcp.example.com/mcp";
const std::string url_b = "https://other.example.org/sse";

std::vector<fs::path> token_backups_in(const fs::path& dir) {
  return test::files_starting_with(dir, "mcp-oauth.json.corrupt-");
}

oauth_credentials full_credentials() {
  oauth_credentials c;
  c.issuer = "https://auth.example.com";
  c.client_id = "client-123";
  c.client_secret = "s3cret";
  c.client_secret_expires_at = 1893456000;
  c.access_token = "at-abc";
  c.token_type = "Bearer";
  c.refresh_token = "rt-def";
  c.scope = "mcp:read mcp:write";
  c.expires_at = 1767225600;
  c.resource = "https://mcp.example.com/mcp";
  c.token_endpoint = "https://auth.example.com/oauth/token";
  return c;
}

class OAuthTokenStore : public testing::Test {
protected:
  void SetUp() override {
    auto templ = (fs::temp_directory_path() / "mcprt-oauth-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    file_ = oauth_token_store::default_path(dir_);
  }

  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  fs::path dir_;
  fs::path file_;
};

TEST_F(OAuthTokenStore, IsEmptyWithoutAFileAndReadingCreatesNothing) {
  oauth_token_store store{file_};
  EXPECT_EQ(store.get(url_a, "dynamic"), std::nullopt);
  EXPECT_FALSE(fs::exists(file_.parent_path()));
  EXPECT_THAT(store.warnings(), IsEmpty());
}

TEST_F(OAuthTokenStore, RoundTripsEveryField) {
  auto c = full_credentials();
  {
    oauth_token_store store{file_};
    store.put(url_a, "client-123", c);
    EXPECT_EQ(store.get(url_a, "client-123"), c);
  }
  oauth_token_store fresh{file_};
  auto got = fresh.get(url_a, "client-123");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->issuer, c.issuer);
  EXPECT_EQ(got->client_id, c.client_id);
  EXPECT_EQ(got->client_secret, c.client_secret);
  EXPECT_EQ(got->client_secret_expires_at, c.client_secret_expires_at);
  EXPECT_EQ(got->access_token, c.access_token);
  EXPECT_EQ(got->token_type, c.token_type);
  EXPECT_EQ(got->refresh_token, c.refresh_token);
  EXPECT_EQ(got->scope, c.scope);
  EXPECT_EQ(got->expires_at, c.expires_at);
  EXPECT_EQ(got->resource, c.resource);
  EXPECT_EQ(got->token_endpoint, c.token_endpoint);
  EXPECT_EQ(fresh.get(url_a, "dynamic"), std::nullopt);
  EXPECT_EQ(fresh.get(url_b, "client-123"), std::nullopt);
  EXPECT_THAT(fresh.warnings(), IsEmpty());
}

TEST_F(OAuthTokenStore, AnOlderRecordWithoutTheTokenEndpointReadsAsUnbound) {
  // Written before the token endpoint was kept: still usable, bound to nothing.
  fs::create_directories(file_.parent_path());
  write_bytes(file_, json{{url_a, {{"dynamic", {{"issuer", "https://auth.example.com"}, {"client_id", "c"},
                                                {"refresh_token", "rt"}}}}}}.dump());
  oauth_token_store store{file_};
  auto got = store.get(url_a, "dynamic");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->refresh_token, "rt");
  EXPECT_EQ(got->token_endpoint, "");
  EXPECT_THAT(store.warnings(), IsEmpty());
  // Kept as a string like the others; another type makes the record unusable.
  auto doc = json::parse(read_bytes(file_));
  doc[url_a]["dynamic"]["token_endpoint"] = 7;
  write_bytes(file_, doc.dump());
  oauth_token_store again{file_};
  EXPECT_EQ(again.get(url_a, "dynamic"), std::nullopt);
  EXPECT_THAT(joined(again.warnings()), HasSubstr("\"token_endpoint\""));
}

TEST_F(OAuthTokenStore, WritesTheDocumentedLayoutAndOmitsUnknownFields) {
  oauth_token_store store{file_};
  oauth_credentials pub; // a public, dynamically registered client
  pub.client_id = "dyn-1";
  pub.access_token = "at";
  store.put(url_a, std::string{oauth_token_store::dynamic_client}, pub);
  store.put(url_a, "client-123", full_credentials());
  auto doc = json::parse(read_bytes(file_));
  EXPECT_EQ(doc[url_a]["dynamic"], (json{{"client_id", "dyn-1"}, {"access_token", "at"}}));
  EXPECT_EQ(doc[url_a]["client-123"]["expires_at"], 1767225600);
  EXPECT_EQ(doc[url_a]["client-123"]["client_secret_expires_at"], 1893456000);
  EXPECT_EQ(doc[url_a]["client-123"]["token_type"], "Bearer");
  EXPECT_EQ(oauth_token_store{file_}.get(url_a, "dynamic"), pub);
}

TEST_F(OAuthTokenStore, WritesTheFileWithMode0600UnderAPermissiveUmask) {
  auto old = ::umask(0);
  oauth_token_store store{file_};
  try {
    store.put(url_a, "dynamic", full_credentials());
  } catch (...) {
    ::umask(old);
    throw;
  }
  ::umask(old);
  EXPECT_EQ(mode_of(file_), 0600);
  EXPECT_EQ(mode_of(fs::path{file_.string() + ".lock"}), 0600);
  EXPECT_EQ(mode_of(file_.parent_path()), 0700);
}

TEST_F(OAuthTokenStore, CreatesAMissingHomeDirectory) {
  auto home = dir_ / "no" / "home";
  oauth_token_store store{oauth_token_store::default_path(home)};
  store.put(url_a, "dynamic", full_credentials());
  EXPECT_EQ(mode_of(dir_ / "no") & 0077, 0u);
  EXPECT_EQ(mode_of(home / ".mcprt"), 0700);
  EXPECT_EQ(oauth_token_store{home / ".mcprt" / "mcp-oauth.json"}.get(url_a, "dynamic"), full_credentials());
}

TEST_F(OAuthTokenStore, CorruptFileIsKeptAsideAndNeverLostThenAPutWorks) {
  fs::create_directories(file_.parent_path());
  const std::string garbage = "{\"" + url_a + "\": {\"dynamic\": {\"access_token\": \"at-";
  write_bytes(file_, garbage);
  oauth_token_store store{file_};
  EXPECT_EQ(store.get(url_a, "dynamic"), std::nullopt);
  EXPECT_EQ(store.get(url_a, "dynamic"), std::nullopt);
  ASSERT_THAT(store.warnings(), SizeIs(1)) << joined(store.warnings());
  EXPECT_THAT(store.warnings()[0], HasSubstr(file_.string()));
  EXPECT_THAT(store.warnings()[0], HasSubstr("not valid JSON"));
  EXPECT_EQ(read_bytes(file_), garbage) << "reading never changes the file";
  store.take_warnings();

  store.put(url_a, "dynamic", full_credentials());
  auto backups = token_backups_in(file_.parent_path());
  ASSERT_THAT(backups, SizeIs(1));
  EXPECT_EQ(read_bytes(backups[0]), garbage);
  EXPECT_EQ(mode_of(backups[0]), 0600);
  ASSERT_THAT(store.warnings(), SizeIs(1));
  EXPECT_THAT(store.warnings()[0], HasSubstr(backups[0].string()));
  oauth_token_store fresh{file_};
  EXPECT_EQ(fresh.get(url_a, "dynamic"), full_credentials());
  EXPECT_THAT(fresh.warnings(), IsEmpty());
}

TEST_F(OAuthTokenStore, MalformedRecordsReadAsAbsentAndGoodOnesSurvive) {
  fs::create_directories(file_.parent_path());
  auto good = json{{"client_id", "c"}, {"access_token", "at"}, {"expires_at", nullptr}};
  write_bytes(file_,
              json{
                {url_a, {{"dynamic", good}, {"bad", {{"expires_at", 1.5}}}}},
                {url_b, 7},
              }
                .dump());
  oauth_token_store store{file_};
  auto got = store.get(url_a, "dynamic");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->access_token, "at");
  EXPECT_EQ(got->expires_at, std::nullopt);
  EXPECT_EQ(store.get(url_a, "bad"), std::nullopt);
  EXPECT_EQ(store.get(url_b, "dynamic"), std::nullopt);
  auto text = joined(store.warnings());
  ASSERT_THAT(store.warnings(), SizeIs(2)) << text;
  EXPECT_THAT(text, HasSubstr(file_.string()));
  EXPECT_THAT(text, HasSubstr("\"bad\""));
  EXPECT_THAT(text, HasSubstr("\"" + url_b + "\""));
  EXPECT_THAT(text, HasSubstr("\"expires_at\""));
}

// The secrets rule: whatever is wrong with the file, no text the store
// produces quotes a token or a client secret.
TEST_F(OAuthTokenStore, NoWarningOrErrorEverQuotesASecret) {
  fs::create_directories(file_.parent_path());
  const std::vector<std::string> secrets = {"SECRET-AT-1", "SECRET-RT-2", "SECRET-CS-3", "SECRET-AT-4",
                                            "SECRET-RT-5", "SECRET-6",    "SECRET-7",    "SECRET-8"};
  std::vector<std::string> texts;
  auto check = [&](const std::string& when) {
    for (auto& t : texts)
      for (auto& s : secrets)
        EXPECT_THAT(t, testing::Not(HasSubstr(s))) << when << ": " << t;
    texts.clear();
  };
  auto collect = [&](oauth_token_store& store) {
    for (auto& w : store.take_warnings())
      texts.push_back(w);
  };

  // Records of the wrong shape, each holding secrets in its other fields
  // and in the mistyped field itself.
  write_bytes(
    file_,
    json{
      {url_a,
       {{"dynamic", {{"access_token", 5}, {"refresh_token", "SECRET-RT-2"}, {"client_secret", "SECRET-CS-3"}}},
        {"cid", {{"refresh_token", {"SECRET-RT-5"}}, {"access_token", "SECRET-AT-1"}}},
        {"cid2", {{"expires_at", "SECRET-6"}}},
        {"cid3", {{"client_secret", {{"v", "SECRET-7"}}}}},
        {"cid4", "SECRET-AT-4"}}},
      {url_b, "SECRET-8"},
    }
      .dump());
  oauth_token_store store{file_};
  for (auto key : {"dynamic", "cid", "cid2", "cid3", "cid4"})
    EXPECT_EQ(store.get(url_a, key), std::nullopt) << key;
  EXPECT_EQ(store.get(url_b, "dynamic"), std::nullopt);
  EXPECT_THAT(store.warnings(), SizeIs(6)) << joined(store.warnings());
  collect(store);
  check("reading malformed records");

  // The next write backs the file up and says so.
  store.put(url_b, "dynamic", full_credentials());
  collect(store);
  EXPECT_THAT(texts, SizeIs(1));
  check("backing up");

  // Invalid JSON around a secret.
  write_bytes(file_, "{\"" + url_a + "\": {\"dynamic\": {\"access_token\": \"SECRET-AT-1\" "
                                     "\"refresh_token\": \"SECRET-RT-2\"}}}");
  store.reload();
  EXPECT_EQ(store.get(url_a, "dynamic"), std::nullopt);
  collect(store);
  EXPECT_THAT(texts, SizeIs(1));
  check("reading invalid JSON");

  // Invalid UTF-8 in a secret being stored.
  auto bad = full_credentials();
  bad.access_token = "SECRET-AT-1\xff";
  bad.client_secret = "SECRET-CS-3";
  try {
    store.put(url_a, "dynamic", bad);
    ADD_FAILURE() << "expected invalid UTF-8 to be refused";
  } catch (const std::invalid_argument& e) {
    texts.push_back(e.what());
  }
  collect(store);
  check("writing invalid UTF-8");
}

TEST_F(OAuthTokenStore, WarningsCutTheQueryAndUserInfoOfAServerUrl) {
  // Some servers take an API key in the URL; a warning names the server
  // without it.
  fs::create_directories(file_.parent_path());
  const std::string keyed = "https://me:SECRET-10@h.example/mcp?api_key=SECRET-9#SECRET-11";
  write_bytes(file_, json{{keyed, {{"dynamic", 5}}}, {"https://h.example/v2?k=SECRET-12", 5}}.dump());
  oauth_token_store store{file_};
  EXPECT_EQ(store.get(keyed, "dynamic"), std::nullopt);
  auto text = joined(store.warnings());
  ASSERT_THAT(store.warnings(), SizeIs(2)) << text;
  EXPECT_THAT(text, HasSubstr("\"https://h.example/mcp?…\""));
  EXPECT_THAT(text, HasSubstr("\"https://h.example/v2?…\""));
  EXPECT_THAT(text, testing::Not(HasSubstr("SECRET"))) << text;
  EXPECT_THAT(text, testing::Not(HasSubstr("me:"))) << text;
}

TEST_F(OAuthTokenStore, SeesCredentialsWrittenByAnotherInstance) {
  oauth_token_store reader{file_};
  EXPECT_EQ(reader.get(url_a, "dynamic"), std::nullopt);
  oauth_token_store writer{file_};
  auto c = full_credentials();
  writer.put(url_a, "dynamic", c);
  EXPECT_EQ(reader.get(url_a, "dynamic"), c);
  c.access_token = "at-refreshed";
  writer.put(url_a, "dynamic", c);
  EXPECT_EQ(reader.get(url_a, "dynamic")->access_token, "at-refreshed");
  writer.forget(url_a);
  EXPECT_EQ(reader.get(url_a, "dynamic"), std::nullopt);
}

TEST_F(OAuthTokenStore, AWriteKeepsWhatOthersWroteSinceItLastRead) {
  oauth_token_store a{file_};
  oauth_token_store b{file_};
  a.put(url_a, "dynamic", full_credentials());
  b.put(url_b, "dynamic", full_credentials()); // b never read url_a
  a.put(url_a, "client-123", full_credentials());
  oauth_token_store check{file_};
  EXPECT_TRUE(check.get(url_a, "dynamic").has_value());
  EXPECT_TRUE(check.get(url_b, "dynamic").has_value());
  EXPECT_TRUE(check.get(url_a, "client-123").has_value());
}

TEST_F(OAuthTokenStore, TwoProcessesWritingConcurrentlyNeverLoseAnEntry) {
  constexpr int per_child = 30;
  // Both writers start at once, so their writes overlap.
  ASSERT_TRUE(mcprt::test::run_forked_writers(2, [&](int child) {
    oauth_token_store store{file_};
    for (int i = 0; i < per_child; ++i) {
      auto creds = full_credentials();
      creds.access_token = "at-" + std::to_string(child) + "-" + std::to_string(i);
      // Both children write under one URL too, so they touch one object.
      store.put(i % 2 == 0 ? url_a : url_b + std::to_string(i),
                "client-" + std::to_string(child) + "-" + std::to_string(i), creds);
    }
  }));
  oauth_token_store store{file_};
  for (int child = 0; child < 2; ++child)
    for (int i = 0; i < per_child; ++i) {
      auto key = "client-" + std::to_string(child) + "-" + std::to_string(i);
      auto got = store.get(i % 2 == 0 ? url_a : url_b + std::to_string(i), key);
      ASSERT_TRUE(got.has_value()) << key;
      EXPECT_EQ(got->access_token, "at-" + std::to_string(child) + "-" + std::to_string(i));
    }
  EXPECT_THAT(json::parse(read_bytes(file_))[url_a], SizeIs(per_child));
  EXPECT_THAT(store.warnings(), IsEmpty());
}

TEST_F(OAuthTokenStore, ForgetDropsEveryClientOfTheUrlOnly) {
  oauth_token_store store{file_};
  store.put(url_a, "dynamic", full_credentials());
  store.put(url_a, "client-123", full_credentials());
  store.put(url_b, "dynamic", full_credentials());
  EXPECT_TRUE(store.forget(url_a));
  EXPECT_EQ(store.get(url_a, "dynamic"), std::nullopt);
  EXPECT_EQ(store.get(url_a, "client-123"), std::nullopt);
  EXPECT_TRUE(store.get(url_b, "dynamic").has_value());
  EXPECT_FALSE(store.forget(url_a));
  EXPECT_FALSE(json::parse(read_bytes(file_)).contains(url_a));
  EXPECT_THROW(store.forget(""), std::invalid_argument);
}

TEST_F(OAuthTokenStore, ForgetWithNothingStoredCreatesNoFile) {
  oauth_token_store store{file_};
  EXPECT_FALSE(store.forget(url_a));
  EXPECT_FALSE(store.forget_tokens(url_a, "dynamic"));
  EXPECT_FALSE(fs::exists(file_));
}

TEST_F(OAuthTokenStore, ForgetTokensKeepsTheClientRegistration) {
  oauth_token_store store{file_};
  store.put(url_a, "dynamic", full_credentials());
  store.put(url_a, "client-123", full_credentials());
  EXPECT_TRUE(store.forget_tokens(url_a, "dynamic"));
  auto got = store.get(url_a, "dynamic");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->access_token, "");
  EXPECT_EQ(got->refresh_token, "");
  EXPECT_EQ(got->token_type, "");
  EXPECT_EQ(got->expires_at, std::nullopt);
  EXPECT_EQ(got->issuer, full_credentials().issuer);
  EXPECT_EQ(got->client_id, full_credentials().client_id);
  EXPECT_EQ(got->client_secret, full_credentials().client_secret);
  EXPECT_EQ(got->client_secret_expires_at, full_credentials().client_secret_expires_at);
  EXPECT_EQ(got->resource, full_credentials().resource);
  EXPECT_EQ(store.get(url_a, "client-123"), full_credentials()) << "other clients untouched";
  EXPECT_FALSE(store.forget_tokens(url_a, "dynamic")) << "nothing left to drop";
  EXPECT_FALSE(store.forget_tokens(url_b, "dynamic"));
  EXPECT_EQ(oauth_token_store{file_}.get(url_a, "dynamic"), got);
}

TEST_F(OAuthTokenStore, PutRefusesEmptyNames) {
  oauth_token_store store{file_};
  EXPECT_THROW(store.put("", "dynamic", full_credentials()), std::invalid_argument);
  EXPECT_THROW(store.put(url_a, "", full_credentials()), std::invalid_argument);
  EXPECT_FALSE(fs::exists(file_));
}

TEST_F(OAuthTokenStore, FifoAtThePathIsReadWithoutBlockingAndNeverReplaced) {
  fs::create_directories(file_.parent_path());
  ASSERT_EQ(::mkfifo(file_.c_str(), 0600), 0);
  oauth_token_store store{file_};
  auto r = std::async(std::launch::async, [&] { return store.get(url_a, "dynamic"); });
  ASSERT_EQ(r.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "blocked on a FIFO";
  EXPECT_EQ(r.get(), std::nullopt);
  ASSERT_THAT(store.warnings(), SizeIs(1));
  EXPECT_THAT(store.warnings()[0], HasSubstr(file_.string()));
  EXPECT_THAT(store.warnings()[0], HasSubstr("not a regular file"));
  try {
    store.put(url_a, "dynamic", full_credentials());
    ADD_FAILURE() << "expected the FIFO to be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(file_.string()));
    EXPECT_THAT(e.what(), HasSubstr("not a regular file"));
  }
  struct stat st {};
  ASSERT_EQ(::lstat(file_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST_F(OAuthTokenStore, SymlinkToADeviceAtThePathIsRefusedWithoutHanging) {
  fs::create_directories(file_.parent_path());
  fs::create_symlink("/dev/zero", file_);
  oauth_token_store store{file_};
  auto r = std::async(std::launch::async, [&] { return store.get(url_a, "dynamic"); });
  ASSERT_EQ(r.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_EQ(r.get(), std::nullopt);
  ASSERT_THAT(store.warnings(), SizeIs(1));
  EXPECT_THAT(store.warnings()[0], HasSubstr("not a regular file"));
  EXPECT_THROW(store.put(url_a, "dynamic", full_credentials()), std::runtime_error);
  EXPECT_TRUE(fs::is_symlink(file_));
}

TEST_F(OAuthTokenStore, AWriteNeverGoesThroughASymlinkAtThePath) {
  // The rename replaces the link itself: the file it pointed to keeps its
  // content, and the store's own file is a regular file from then on.
  fs::create_directories(file_.parent_path());
  auto victim = dir_ / "victim.json";
  write_bytes(victim, "{}");
  fs::create_symlink(victim, file_);
  oauth_token_store store{file_};
  EXPECT_EQ(store.get(url_a, "dynamic"), std::nullopt);
  store.put(url_a, "dynamic", full_credentials());
  EXPECT_EQ(read_bytes(victim), "{}");
  EXPECT_FALSE(fs::is_symlink(file_));
  EXPECT_EQ(mode_of(file_), 0600);
  EXPECT_EQ(oauth_token_store{file_}.get(url_a, "dynamic"), full_credentials());
}

TEST_F(OAuthTokenStore, SymlinkedLockFileIsRefused) {
  fs::create_directories(file_.parent_path());
  auto victim = dir_ / "victim";
  fs::create_symlink(victim, file_.string() + ".lock");
  oauth_token_store store{file_};
  try {
    store.put(url_a, "dynamic", full_credentials());
    ADD_FAILURE() << "expected the symlinked lock file to be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("symbolic link"));
  }
  EXPECT_FALSE(fs::exists(victim));
  EXPECT_FALSE(fs::exists(file_));
}

TEST(OAuthTokenStorePath, DefaultPathIsUnderTheConfigDirectory) {
  EXPECT_EQ(oauth_token_store::default_path("/home/u"), fs::path{"/home/u/.mcprt/mcp-oauth.json"});
  EXPECT_EQ(oauth_token_store::default_path("/home/u", ".qwen"), fs::path{"/home/u/.qwen/mcp-oauth.json"});
}

} // namespace
} // namespace mcprt
