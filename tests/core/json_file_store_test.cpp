// The file discipline shared by the approvals and OAuth stores. The stores'
// own tests cover corrupt files, hostile paths and modes through their
// APIs; these cover what only the generic layer promises.
#include "core/json_file_store.hpp"

#include <cstdlib>
#include <fstream>
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

ino_t inode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_ino;
}

std::vector<fs::path> backups_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".corrupt-") != std::string::npos) out.push_back(e.path());
  return out;
}

class JsonFileStore : public testing::Test {
protected:
  void SetUp() override {
    auto templ = (fs::temp_directory_path() / "mcprt-jsonstore-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    file_ = dir_ / "sub" / "store.json";
  }

  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  fs::path dir_;
  fs::path file_;
};

TEST_F(JsonFileStore, AMissingFileReadsAsAnEmptyObjectAndIsNotCreated) {
  json_file_store store{file_, "test file"};
  EXPECT_EQ(store.read(), json::object());
  EXPECT_FALSE(fs::exists(file_.parent_path()));
  EXPECT_THAT(store.warnings(), IsEmpty());
}

TEST_F(JsonFileStore, UpdateWritesTheDocumentIndentedAndReadsItBack) {
  json_file_store store{file_, "test file"};
  store.update([](json& doc) { doc["a"]["b"] = 1; });
  EXPECT_EQ(store.read(), (json{{"a", {{"b", 1}}}}));
  EXPECT_EQ(read_bytes(file_), (json{{"a", {{"b", 1}}}}.dump(2) + "\n"));
  EXPECT_EQ(json_file_store(file_, "test file").read(), (json{{"a", {{"b", 1}}}}));
}

TEST_F(JsonFileStore, AnUnchangedDocumentIsNotRewritten) {
  json_file_store store{file_, "test file"};
  store.update([](json& doc) { doc["a"] = 1; });
  auto before = inode_of(file_);
  store.update([](json& doc) { doc["a"] = 1; });
  EXPECT_EQ(inode_of(file_), before);
}

TEST_F(JsonFileStore, AnEmptyDocumentDoesNotCreateAMissingFile) {
  json_file_store store{file_, "test file"};
  store.update([](json& doc) { doc.erase("nothing"); });
  EXPECT_FALSE(fs::exists(file_));
}

TEST_F(JsonFileStore, AThrowingMutationLeavesFileAndViewUnchanged) {
  json_file_store store{file_, "test file"};
  store.update([](json& doc) { doc["a"] = 1; });
  auto before = read_bytes(file_);
  EXPECT_THROW(store.update([](json& doc) {
    doc["a"] = 2;
    throw std::logic_error("changed my mind");
  }),
               std::logic_error);
  EXPECT_EQ(read_bytes(file_), before);
  EXPECT_EQ(store.read(), (json{{"a", 1}}));
}

TEST_F(JsonFileStore, InvalidUtf8IsRefusedWithoutQuotingIt) {
  json_file_store store{file_, "test file"};
  store.update([](json& doc) { doc["a"] = 1; });
  auto before = read_bytes(file_);
  try {
    store.update([](json& doc) { doc["secret"] = "hunter2\xff"; });
    FAIL() << "expected invalid UTF-8 to be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr(file_.string()));
    EXPECT_THAT(e.what(), testing::Not(HasSubstr("hunter2")));
  }
  EXPECT_EQ(read_bytes(file_), before);
  EXPECT_EQ(store.read(), (json{{"a", 1}}));
}

TEST_F(JsonFileStore, ReadsTheFileAgainOnlyWhenItChanged) {
  int validations = 0;
  json_file_store store{file_, "test file", [&](json&, std::vector<std::string>&) { ++validations; }};
  json_file_store other{file_, "test file"};
  other.update([](json& doc) { doc["a"] = 1; });
  EXPECT_EQ(store.read(), (json{{"a", 1}}));
  EXPECT_EQ(store.read(), (json{{"a", 1}}));
  EXPECT_EQ(validations, 1);
  other.update([](json& doc) { doc["a"] = 22; });
  EXPECT_EQ(store.read(), (json{{"a", 22}}));
  EXPECT_EQ(validations, 2);
  store.reload();
  store.read();
  EXPECT_EQ(validations, 3);
}

TEST_F(JsonFileStore, ValidatorProblemsWarnOnceAndBackTheFileUpBeforeTheNextWrite) {
  fs::create_directories(file_.parent_path());
  const std::string original = R"({"good": 1, "bad": "x"})";
  write_bytes(file_, original);
  auto drop_strings = [](json& doc, std::vector<std::string>& problems) {
    for (auto it = doc.begin(); it != doc.end();) {
      if (it->is_string()) {
        problems.push_back("test file: \"" + it.key() + "\" is a string");
        it = doc.erase(it);
      } else {
        ++it;
      }
    }
  };
  json_file_store store{file_, "test file", drop_strings};
  EXPECT_EQ(store.read(), (json{{"good", 1}}));
  EXPECT_EQ(store.read(), (json{{"good", 1}}));
  ASSERT_THAT(store.warnings(), SizeIs(1));
  EXPECT_THAT(store.warnings()[0], HasSubstr("\"bad\" is a string"));
  store.take_warnings();
  store.update([](json& doc) { doc["more"] = 2; });
  ASSERT_THAT(store.take_warnings(), SizeIs(1)) << "the backup, not the same problem again";
  auto backups = backups_in(file_.parent_path());
  ASSERT_THAT(backups, SizeIs(1));
  EXPECT_EQ(read_bytes(backups[0]), original);
  EXPECT_EQ(json::parse(read_bytes(file_)), (json{{"good", 1}, {"more", 2}}));
}

TEST_F(JsonFileStore, TheLabelStartsEveryMessageAboutTheFile) {
  fs::create_directories(file_.parent_path());
  write_bytes(file_, "not json");
  json_file_store store{file_, "widget file"};
  store.read();
  store.update([](json& doc) { doc["a"] = 1; });
  ASSERT_THAT(store.warnings(), SizeIs(2));
  for (auto& w : store.warnings())
    EXPECT_EQ(w.rfind("widget file '" + file_.string() + "'", 0), 0u) << w;
}

TEST_F(JsonFileStore, ConcurrentReadModifyWritesAcrossProcessesAllLand) {
  constexpr int per_child = 40;
  // Both writers start at once, so their writes overlap.
  ASSERT_TRUE(mcprt::test::run_forked_writers(2, [&](int) {
    json_file_store store{file_, "test file"};
    for (int i = 0; i < per_child; ++i)
      store.update([](json& doc) { doc["n"] = doc.value("n", 0) + 1; });
  }));
  EXPECT_EQ(json_file_store(file_, "test file").read(), (json{{"n", 2 * per_child}}));
}

} // namespace
} // namespace mcprt
