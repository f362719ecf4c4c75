#include "core/input_store.hpp"

#include <chrono>
#include <cstdlib>
#include <future>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>
#include "test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ElementsAre;
using testing::HasSubstr;
using testing::IsEmpty;
using testing::Not;
using testing::SizeIs;

namespace mcprt {
namespace {

using test::joined;
using test::mode_of;
using test::read_bytes;
using test::write_bytes;

std::vector<fs::path> input_backups_in(const fs::path& dir) {
  return test::files_starting_with(dir, "mcp-inputs.json.corrupt-");
}

class InputStore : public testing::Test {
protected:
  void SetUp() override {
    auto templ = (fs::temp_directory_path() / "mcprt-inputs-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    file_ = input_store::default_path(dir_);
  }

  void TearDown() override {
    std::error_code ec;
    for (auto& e : fs::recursive_directory_iterator(dir_, ec))
      if (e.is_directory(ec)) fs::permissions(e.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }

  fs::path dir_;
  fs::path file_;
};

TEST(InputStorePath, DefaultPathIsUnderTheConfigDirectory) {
  EXPECT_EQ(input_store::default_path("/home/u"), fs::path{"/home/u/.mcprt/mcp-inputs.json"});
  EXPECT_EQ(input_store::default_path("/home/u", ".gemini"), fs::path{"/home/u/.gemini/mcp-inputs.json"});
  EXPECT_EQ(input_store{"/x/y.json"}.path(), fs::path{"/x/y.json"});
}

TEST(InputIdProblem, AcceptsTheDocumentedAlphabetUpTo64Characters) {
  for (std::string id : {std::string{"a"}, std::string{"api-key"}, std::string{"API_KEY"}, std::string{"token.v2"},
                         std::string{"0"}, std::string{"-"}, std::string(64, 'x')})
    EXPECT_EQ(input_id_problem(id), std::nullopt) << id;
}

TEST(InputIdProblem, RefusesEverythingElseWithoutQuotingTheId) {
  for (std::string id : {std::string{}, std::string(65, 'x'), std::string{"a b"}, std::string{"a/b"},
                         std::string{"ключ"}, std::string{"a:b"}, std::string{"a\nb"}, std::string{"a\0b", 3},
                         std::string{"${input:x}"}, std::string{"SECRETVALUE!"}}) {
    auto why = input_id_problem(id);
    ASSERT_TRUE(why.has_value()) << id;
    EXPECT_FALSE(why->empty());
    if (id.size() > 1) {
      EXPECT_THAT(*why, Not(HasSubstr(id))) << *why;
    }
  }
  EXPECT_THAT(*input_id_problem(""), HasSubstr("empty"));
  EXPECT_THAT(*input_id_problem(std::string(65, 'x')), HasSubstr("64"));
}

TEST_F(InputStore, IsEmptyWithoutAFileAndReadingCreatesNothing) {
  input_store store{file_};
  EXPECT_EQ(store.get("/proj", "key"), std::nullopt);
  EXPECT_THAT(store.ids("/proj"), IsEmpty());
  EXPECT_FALSE(fs::exists(file_));
  EXPECT_FALSE(fs::exists(file_.parent_path()));
  EXPECT_THAT(store.warnings(), IsEmpty());
}

TEST_F(InputStore, SetGetAndPersistAcrossInstances) {
  {
    input_store store{file_};
    store.set("/proj", "api-key", "s3cret");
    store.set("/proj", "other", "line one\nline two");
    EXPECT_EQ(store.get("/proj", "api-key"), "s3cret");
  }
  input_store store{file_};
  EXPECT_EQ(store.get("/proj", "api-key"), "s3cret");
  EXPECT_EQ(store.get("/proj", "other"), "line one\nline two");
  EXPECT_EQ(store.get("/proj", "missing"), std::nullopt);
  EXPECT_THAT(store.warnings(), IsEmpty());
}

TEST_F(InputStore, SetReplacesAnOldValue) {
  input_store store{file_};
  store.set("/proj", "k", "one");
  store.set("/proj", "k", "two");
  EXPECT_EQ(store.get("/proj", "k"), "two");
  EXPECT_EQ(input_store{file_}.get("/proj", "k"), "two");
}

TEST_F(InputStore, WritesTheDocumentedShape) {
  input_store store{file_};
  store.set("/proj", "b", "2");
  store.set("/proj", "a", "1");
  store.set("/other", "a", "x");
  auto expected = json{{"/proj", {{"a", "1"}, {"b", "2"}}}, {"/other", {{"a", "x"}}}};
  auto bytes = read_bytes(file_);
  EXPECT_EQ(json::parse(bytes), expected);
  EXPECT_EQ(bytes, expected.dump(2) + "\n");
}

TEST_F(InputStore, IdsAreSortedAndPerProject) {
  input_store store{file_};
  for (auto id : {"zeta", "Alpha", "beta", "_x", "1"})
    store.set("/proj", id, "v");
  store.set("/elsewhere", "only-here", "v");
  EXPECT_THAT(store.ids("/proj"), ElementsAre("1", "Alpha", "_x", "beta", "zeta"));
  EXPECT_THAT(store.ids("/elsewhere"), ElementsAre("only-here"));
  EXPECT_THAT(store.ids("/none"), IsEmpty());
  EXPECT_EQ(store.get("/elsewhere", "zeta"), std::nullopt);
}

TEST_F(InputStore, NormalizesTheProjectRoot) {
  input_store store{file_};
  store.set("/proj/sub/../", "k", "v");
  EXPECT_EQ(store.get("/proj", "k"), "v");
  EXPECT_EQ(store.get("/proj/./", "k"), "v");
  EXPECT_THAT(store.ids("/proj/"), ElementsAre("k"));
  EXPECT_TRUE(json::parse(read_bytes(file_)).contains("/proj"));
}

TEST_F(InputStore, UnsetRemovesOneIdAndThenTheEmptyProject) {
  input_store store{file_};
  store.set("/proj", "a", "1");
  store.set("/proj", "b", "2");
  store.set("/other", "a", "x");
  EXPECT_TRUE(store.unset("/proj", "a"));
  EXPECT_FALSE(store.unset("/proj", "a"));
  EXPECT_EQ(store.get("/proj", "a"), std::nullopt);
  EXPECT_EQ(store.get("/proj", "b"), "2");
  EXPECT_EQ(store.get("/other", "a"), "x");
  EXPECT_TRUE(store.unset("/proj/", "b"));
  EXPECT_EQ(json::parse(read_bytes(file_)), (json{{"/other", {{"a", "x"}}}}));
  EXPECT_FALSE(store.unset("/nowhere", "a"));
}

TEST_F(InputStore, UnsetWithNothingStoredCreatesNoFile) {
  input_store store{file_};
  EXPECT_FALSE(store.unset("/proj", "a"));
  EXPECT_FALSE(fs::exists(file_));
}

TEST_F(InputStore, SeesValuesAnotherInstanceStores) {
  input_store reader{file_};
  EXPECT_EQ(reader.get("/proj", "k"), std::nullopt);
  input_store writer{file_};
  writer.set("/proj", "k", "first");
  EXPECT_EQ(reader.get("/proj", "k"), "first");
  writer.set("/proj", "k", "second");
  EXPECT_EQ(reader.get("/proj", "k"), "second");
  EXPECT_THAT(reader.ids("/proj"), ElementsAre("k"));
  writer.unset("/proj", "k");
  EXPECT_EQ(reader.get("/proj", "k"), std::nullopt);
  EXPECT_THAT(reader.warnings(), IsEmpty());
}

TEST_F(InputStore, AWriteKeepsWhatOthersStoredSinceItLastRead) {
  input_store a{file_};
  input_store b{file_};
  EXPECT_EQ(a.get("/proj", "x"), std::nullopt);
  b.set("/proj", "from-b", "1");
  a.set("/proj", "from-a", "2");
  EXPECT_THAT(input_store{file_}.ids("/proj"), ElementsAre("from-a", "from-b"));
}

TEST_F(InputStore, TwoProcessesWritingConcurrentlyNeverLoseAValue) {
  constexpr int per_child = 40;
  ASSERT_TRUE(test::run_forked_writers(2, [&](int child) {
    input_store store{file_};
    for (int i = 0; i < per_child; ++i)
      store.set("/proj", "k-" + std::to_string(child) + "-" + std::to_string(i), std::to_string(i));
  }));
  input_store store{file_};
  EXPECT_THAT(store.ids("/proj"), SizeIs(2 * per_child));
  EXPECT_EQ(store.get("/proj", "k-1-39"), "39");
}

TEST_F(InputStore, WritesTheFileWithMode0600UnderAPermissiveUmask) {
  auto old = ::umask(0);
  input_store store{file_};
  try {
    store.set("/proj", "k", "v");
  } catch (...) {
    ::umask(old);
    throw;
  }
  ::umask(old);
  EXPECT_EQ(mode_of(file_), 0600);
  EXPECT_EQ(mode_of(fs::path{file_.string() + ".lock"}), 0600);
  EXPECT_EQ(mode_of(file_.parent_path()), 0700);
}

TEST_F(InputStore, SetRefusesABadIdOrValueAndChangesNothing) {
  input_store store{file_};
  for (auto id : {"", "a b", "a/b"})
    EXPECT_THROW(store.set("/proj", id, "v"), std::invalid_argument) << id;
  EXPECT_THROW(store.set("/proj", std::string(65, 'x'), "v"), std::invalid_argument);
  EXPECT_FALSE(fs::exists(file_));
  store.set("/proj", "k", "kept");
  auto before = read_bytes(file_);
  const std::string secret = "SECRET-VALUE";
  for (auto bad : {secret + std::string(1, '\0'), secret + "\xff\xfe",
                   secret + std::string(input_store::max_value_bytes, 'x')}) {
    try {
      store.set("/proj", "k", bad);
      ADD_FAILURE() << "expected a refusal";
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), Not(HasSubstr(secret))) << e.what();
      EXPECT_THAT(e.what(), HasSubstr("\"k\""));
    }
  }
  EXPECT_EQ(read_bytes(file_), before);
  EXPECT_EQ(store.get("/proj", "k"), "kept");
}

TEST_F(InputStore, AValueOfExactly64KiBIsStoredAndAnEmptyOneToo) {
  input_store store{file_};
  const std::string big(input_store::max_value_bytes, 'v');
  store.set("/proj", "big", big);
  store.set("/proj", "empty", "");
  input_store fresh{file_};
  EXPECT_EQ(fresh.get("/proj", "big"), big);
  EXPECT_EQ(fresh.get("/proj", "empty"), "");
  EXPECT_THAT(fresh.warnings(), IsEmpty());
}

TEST_F(InputStore, SetRefusesTheIdAfterTheLimitButReplacesAnExistingOne) {
  // Written directly: a thousand locked, fsynced writes would be slow.
  json project = json::object();
  for (std::size_t i = 0; i < input_store::max_ids_per_project; ++i)
    project["id-" + std::to_string(1000 + i)] = "v";
  fs::create_directories(file_.parent_path());
  write_bytes(file_, json{{"/proj", project}}.dump());
  input_store store{file_};
  EXPECT_THAT(store.ids("/proj"), SizeIs(input_store::max_ids_per_project));
  EXPECT_THAT(store.warnings(), IsEmpty());
  try {
    store.set("/proj", "one-more", "SECRET-VALUE");
    ADD_FAILURE() << "expected the limit to be enforced";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("1000"));
    EXPECT_THAT(e.what(), Not(HasSubstr("SECRET-VALUE")));
  }
  EXPECT_EQ(store.get("/proj", "one-more"), std::nullopt);
  store.set("/proj", "id-1000", "replaced");
  EXPECT_EQ(store.get("/proj", "id-1000"), "replaced");
  store.set("/other", "one-more", "fine");
  EXPECT_EQ(store.get("/other", "one-more"), "fine");
}

TEST_F(InputStore, AFileBeyondTheLimitsKeepsWhatFitsAndWarns) {
  json project = json::object();
  for (std::size_t i = 0; i < input_store::max_ids_per_project + 5; ++i)
    project["id-" + std::to_string(1000 + i)] = "v";
  project["huge"] = "SECRET-" + std::string(input_store::max_value_bytes, 'x');
  fs::create_directories(file_.parent_path());
  write_bytes(file_, json{{"/proj", project}}.dump());
  input_store store{file_};
  auto ids = store.ids("/proj");
  ASSERT_THAT(ids, SizeIs(input_store::max_ids_per_project));
  EXPECT_EQ(ids.front(), "id-1000");
  EXPECT_EQ(ids.back(), "id-1999");
  EXPECT_EQ(store.get("/proj", "huge"), std::nullopt);
  auto text = joined(store.warnings());
  ASSERT_THAT(store.warnings(), SizeIs(2)) << text;
  EXPECT_THAT(text, HasSubstr("\"huge\""));
  EXPECT_THAT(text, HasSubstr("5 more inputs than the 1000 kept"));
  EXPECT_THAT(text, Not(HasSubstr("SECRET")));
  // The next write keeps a copy of what it drops.
  store.take_warnings();
  store.set("/other", "k", "v");
  EXPECT_THAT(input_backups_in(file_.parent_path()), SizeIs(1));
}

// The secrets rule: whatever is wrong with the file, no warning quotes a
// value (nor an invalid id, which may be a value in the wrong place).
TEST_F(InputStore, AMalformedFileWarnsWithoutQuotingAValue) {
  fs::create_directories(file_.parent_path());
  write_bytes(file_, json{{"/proj",
                           {{"good", "SECRET-0"},
                            {"num", 5},
                            {"arr", {"SECRET-1"}},
                            {"obj", {{"v", "SECRET-2"}}},
                            {"SECRET-3 pasted as an id", "SECRET-4"},
                            {"nul", std::string("SECRET-5\0", 9)}}},
                          {"/bad-project", "SECRET-6"}}
                       .dump());
  input_store store{file_};
  EXPECT_EQ(store.get("/proj", "good"), "SECRET-0");
  for (auto id : {"num", "arr", "obj", "nul"})
    EXPECT_EQ(store.get("/proj", id), std::nullopt) << id;
  EXPECT_THAT(store.ids("/proj"), ElementsAre("good"));
  auto text = joined(store.warnings());
  EXPECT_THAT(store.warnings(), SizeIs(6)) << text;
  EXPECT_THAT(text, Not(HasSubstr("SECRET"))) << text;
  EXPECT_THAT(text, HasSubstr(file_.string()));
  EXPECT_THAT(text, HasSubstr("inputs file"));
  EXPECT_THAT(text, HasSubstr("\"num\""));
  EXPECT_THAT(text, HasSubstr("/bad-project"));
  for (auto& w : store.warnings())
    for (unsigned char c : w)
      EXPECT_GE(c, 0x20) << w;

  // Invalid JSON around a value.
  write_bytes(file_, R"({"/proj": {"good": "SECRET-7" "bad": "SECRET-8"}})");
  store.take_warnings();
  EXPECT_EQ(store.get("/proj", "good"), std::nullopt);
  EXPECT_EQ(store.get("/proj", "good"), std::nullopt);
  ASSERT_THAT(store.warnings(), SizeIs(1)) << "warned once per file version";
  EXPECT_THAT(store.warnings()[0], HasSubstr("not valid JSON"));
  EXPECT_THAT(store.warnings()[0], Not(HasSubstr("SECRET")));
}

TEST_F(InputStore, AMalformedFileIsBackedUpBeforeTheNextWrite) {
  fs::create_directories(file_.parent_path());
  const std::string garbage = "{\"/proj\": {\"k\": \"SECRET\", ";
  write_bytes(file_, garbage);
  input_store store{file_};
  EXPECT_EQ(store.get("/proj", "k"), std::nullopt);
  EXPECT_THAT(input_backups_in(file_.parent_path()), IsEmpty()) << "reading never moves files";
  store.take_warnings();
  store.set("/proj", "k", "new");
  auto backups = input_backups_in(file_.parent_path());
  ASSERT_THAT(backups, SizeIs(1));
  EXPECT_EQ(read_bytes(backups[0]), garbage);
  EXPECT_EQ(mode_of(backups[0]), 0600);
  EXPECT_TRUE(std::regex_match(backups[0].filename().string(),
                               std::regex{R"(mcp-inputs\.json\.corrupt-\d{8}T\d{6}Z)"}))
    << backups[0];
  ASSERT_THAT(store.warnings(), SizeIs(1)) << joined(store.warnings());
  EXPECT_THAT(store.warnings()[0], HasSubstr(backups[0].string()));
  input_store fresh{file_};
  EXPECT_EQ(fresh.get("/proj", "k"), "new");
  EXPECT_THAT(fresh.warnings(), IsEmpty());
}

TEST_F(InputStore, IgnoresCommentsWhenReading) {
  fs::create_directories(file_.parent_path());
  write_bytes(file_, "// my inputs\n{\"/proj\": {/* key */ \"k\": \"v\"}}\n");
  input_store store{file_};
  EXPECT_EQ(store.get("/proj", "k"), "v");
  EXPECT_THAT(store.warnings(), IsEmpty());
}

// -- hostile files: json_file_store's rules hold for this store too -----------

TEST_F(InputStore, AWriteNeverGoesThroughASymlinkAtThePath) {
  fs::create_directories(file_.parent_path());
  auto victim = dir_ / "victim.json";
  write_bytes(victim, "{}");
  fs::create_symlink(victim, file_);
  input_store store{file_};
  EXPECT_EQ(store.get("/proj", "k"), std::nullopt);
  store.set("/proj", "k", "v");
  EXPECT_EQ(read_bytes(victim), "{}");
  EXPECT_FALSE(fs::is_symlink(file_));
  EXPECT_EQ(mode_of(file_), 0600);
  EXPECT_EQ(input_store{file_}.get("/proj", "k"), "v");
}

TEST_F(InputStore, SymlinkedLockFileIsRefused) {
  fs::create_directories(file_.parent_path());
  auto victim = dir_ / "victim";
  fs::create_symlink(victim, file_.string() + ".lock");
  input_store store{file_};
  try {
    store.set("/proj", "k", "v");
    ADD_FAILURE() << "expected the symlinked lock file to be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("symbolic link"));
  }
  EXPECT_FALSE(fs::exists(victim));
  EXPECT_FALSE(fs::exists(file_));
}

TEST_F(InputStore, SymlinkToADeviceIsRefusedWithoutHanging) {
  fs::create_directories(file_.parent_path());
  fs::create_symlink("/dev/zero", file_);
  input_store store{file_};
  auto r = std::async(std::launch::async, [&] { return store.get("/proj", "k"); });
  ASSERT_EQ(r.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_EQ(r.get(), std::nullopt);
  ASSERT_THAT(store.warnings(), SizeIs(1));
  EXPECT_THAT(store.warnings()[0], HasSubstr("not a regular file"));
  EXPECT_THROW(store.set("/proj", "k", "v"), std::runtime_error);
  EXPECT_TRUE(fs::is_symlink(file_));
}

TEST_F(InputStore, WriteErrorNamesThePathWhenTheParentIsAFile) {
  write_bytes(dir_ / "blocker", "a file");
  input_store store{dir_ / "blocker" / "mcp-inputs.json"};
  try {
    store.set("/proj", "k", "SECRET-NEW");
    ADD_FAILURE() << "expected a write error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir_ / "blocker").string()));
    EXPECT_THAT(e.what(), Not(HasSubstr("SECRET")));
  }
}

TEST_F(InputStore, WriteErrorNamesThePathAndLeavesTheFileIntact) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  input_store store{file_};
  store.set("/proj", "k", "v");
  auto before = read_bytes(file_);
  fs::permissions(file_.parent_path(), fs::perms::owner_read | fs::perms::owner_exec);
  try {
    store.set("/proj", "k", "SECRET-NEW");
    ADD_FAILURE() << "expected a write error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(file_.parent_path().string()));
    EXPECT_THAT(e.what(), Not(HasSubstr("SECRET")));
  }
  fs::permissions(file_.parent_path(), fs::perms::owner_all);
  EXPECT_EQ(read_bytes(file_), before);
  EXPECT_EQ(store.get("/proj", "k"), "v");
}

} // namespace
} // namespace mcprt
