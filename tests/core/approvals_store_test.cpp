#include "core/approvals_store.hpp"

#include <chrono>
#include <cstdlib>
#include <future>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
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

const std::string hash_a(64, 'a');
const std::string hash_b(64, 'b');

std::vector<fs::path> approvals_backups_in(const fs::path& dir) {
  return test::files_starting_with(dir, "mcp-approvals.json.corrupt-");
}

class ApprovalsStore : public testing::Test {
protected:
  void SetUp() override {
    auto templ = (fs::temp_directory_path() / "mcprt-approvals-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    file_ = approvals_store::default_path(dir_);
  }

  void TearDown() override {
    // A test may have made a directory read-only; make it removable again.
    std::error_code ec;
    for (auto& e : fs::recursive_directory_iterator(dir_, ec))
      if (e.is_directory(ec))
        fs::permissions(e.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }

  fs::path dir_;
  fs::path file_;
};

// -- reference mcpApprovals.test.ts -------------------------------------------

TEST_F(ApprovalsStore, IsPendingWithNoStoredDecision) {
  approvals_store store{file_};
  EXPECT_EQ(store.state("/proj", "fs", hash_a), approval_state::pending);
  EXPECT_FALSE(fs::exists(file_)) << "reading must not create the file";
  EXPECT_THAT(store.warnings(), IsEmpty());
}

TEST_F(ApprovalsStore, ReturnsApprovedAfterApproval) {
  approvals_store store{file_};
  store.set("/proj", "fs", hash_a, approval_state::approved);
  EXPECT_EQ(store.state("/proj", "fs", hash_a), approval_state::approved);
}

TEST_F(ApprovalsStore, ReturnsRejectedAfterRejection) {
  approvals_store store{file_};
  store.set("/proj", "fs", hash_a, approval_state::rejected);
  EXPECT_EQ(store.state("/proj", "fs", hash_a), approval_state::rejected);
}

TEST_F(ApprovalsStore, PersistsDecisionsAcrossReload) {
  {
    approvals_store store{file_};
    store.set("/proj", "fs", hash_a, approval_state::approved);
    store.set("/proj", "git", hash_b, approval_state::rejected);
  }
  approvals_store store{file_};
  EXPECT_EQ(store.state("/proj", "fs", hash_a), approval_state::approved);
  EXPECT_EQ(store.state("/proj", "git", hash_b), approval_state::rejected);
  EXPECT_THAT(store.warnings(), IsEmpty());
}

TEST_F(ApprovalsStore, WritesTheFileWithTheDocumentedShape) {
  approvals_store store{file_};
  store.set("/proj", "fs", hash_a, approval_state::approved);
  store.set("/proj", "git", hash_b, approval_state::rejected);
  store.set("/other", "fs", hash_b, approval_state::approved);
  auto expected = json{
    {"/proj",
     {{"fs", {{"hash", hash_a}, {"status", "approved"}}},
      {"git", {{"hash", hash_b}, {"status", "rejected"}}}}},
    {"/other", {{"fs", {{"hash", hash_b}, {"status", "approved"}}}}},
  };
  auto bytes = read_bytes(file_);
  EXPECT_EQ(json::parse(bytes), expected);
  EXPECT_EQ(bytes, expected.dump(2) + "\n") << "indented by 2";
}

TEST_F(ApprovalsStore, PersistsDecisionsForServerNamesThatMatchObjectPrototypeKeys) {
  const std::vector<std::string> names = {"__proto__", "constructor", "toString",
                                          "hasOwnProperty", "a::b", "x.y", ""};
  {
    approvals_store store{file_};
    for (size_t i = 0; i < names.size(); ++i)
      store.set("/proj", names[i], hash_a,
                i % 2 == 0 ? approval_state::approved : approval_state::rejected);
  }
  approvals_store store{file_};
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_EQ(store.state("/proj", names[i], hash_a),
              i % 2 == 0 ? approval_state::approved : approval_state::rejected)
      << names[i];
  EXPECT_EQ(store.state("/proj", "prototype", hash_a), approval_state::pending);
  EXPECT_THAT(json::parse(read_bytes(file_))["/proj"], SizeIs(names.size()));
}

TEST_F(ApprovalsStore, RecoversWhenAPerProjectRecordIsCorrupted) {
  fs::create_directories(file_.parent_path());
  auto good = json{{"hash", hash_a}, {"status", "approved"}};
  auto original = json{
    {"/broken", "not an object"},
    {"/proj",
     {{"fs", good},
      {"num", 5},
      {"nohash", {{"status", "approved"}}},
      {"badhash", {{"hash", 7}, {"status", "approved"}}},
      {"badstatus", {{"hash", hash_a}, {"status", "maybe"}}},
      {"pendingstatus", {{"hash", hash_a}, {"status", "pending"}}}}},
  }.dump(2);
  write_bytes(file_, original);
  approvals_store store{file_};
  EXPECT_EQ(store.state("/proj", "fs", hash_a), approval_state::approved);
  for (auto name : {"num", "nohash", "badhash", "badstatus", "pendingstatus"})
    EXPECT_EQ(store.state("/proj", name, hash_a), approval_state::pending) << name;
  EXPECT_EQ(store.state("/broken", "fs", hash_a), approval_state::pending);
  auto text = joined(store.warnings());
  EXPECT_THAT(store.warnings(), SizeIs(6)) << text;
  EXPECT_THAT(text, HasSubstr(file_.string()));
  EXPECT_THAT(text, HasSubstr("\"/broken\""));
  EXPECT_THAT(text, HasSubstr("\"badstatus\""));
  // The next write keeps the good records, drops the bad ones, and saves
  // the bytes it replaced.
  store.set("/proj", "git", hash_b, approval_state::approved);
  auto backups = approvals_backups_in(file_.parent_path());
  ASSERT_THAT(backups, SizeIs(1));
  EXPECT_EQ(read_bytes(backups[0]), original);
  auto now = json::parse(read_bytes(file_));
  EXPECT_EQ(now, (json{{"/proj", {{"fs", good}, {"git", {{"hash", hash_b}, {"status", "approved"}}}}}}));
}

TEST_F(ApprovalsStore, RecoversWhenTheFileIsNotAJsonObject) {
  fs::create_directories(file_.parent_path());
  write_bytes(file_, "[1, 2, 3]\n");
  approvals_store store{file_};
  EXPECT_EQ(store.state("/proj", "fs", hash_a), approval_state::pending);
  ASSERT_THAT(store.warnings(), SizeIs(1));
  EXPECT_THAT(store.warnings()[0], HasSubstr(file_.string()));
  EXPECT_THAT(store.warnings()[0], HasSubstr("not an object"));
  store.set("/proj", "fs", hash_a, approval_state::approved);
  EXPECT_EQ(store.state("/proj", "fs", hash_a), approval_state::approved);
  auto backups = approvals_backups_in(file_.parent_path());
  ASSERT_THAT(backups, SizeIs(1));
  EXPECT_EQ(read_bytes(backups[0]), "[1, 2, 3]\n");
}

TEST_F(ApprovalsStore, RecoversFromMalformedJsonAndBacksItUpOnTheNextWrite) {
  fs::create_directories(file_.parent_path());
  const std::string garbage = "{\"/proj\": {\"fs\": {\"hash\": \"aa\", ";
  write_bytes(file_, garbage);
  approvals_store store{file_};
  EXPECT_EQ(store.state("/proj", "fs", "aa"), approval_state::pending);
  // Repeated lookups of the same bytes warn once.
  EXPECT_EQ(store.state("/proj", "fs", "aa"), approval_state::pending);
  ASSERT_THAT(store.warnings(), SizeIs(1));
  EXPECT_THAT(store.warnings()[0], HasSubstr(file_.string()));
  EXPECT_THAT(store.warnings()[0], HasSubstr("not valid JSON"));
  EXPECT_THAT(approvals_backups_in(file_.parent_path()), IsEmpty()) << "reading never moves files";
  EXPECT_EQ(read_bytes(file_), garbage);

  store.take_warnings();
  store.set("/proj", "fs", hash_a, approval_state::approved);
  auto backups = approvals_backups_in(file_.parent_path());
  ASSERT_THAT(backups, SizeIs(1));
  EXPECT_EQ(read_bytes(backups[0]), garbage);
  EXPECT_TRUE(std::regex_match(backups[0].filename().string(),
                               std::regex{R"(mcp-approvals\.json\.corrupt-\d{8}T\d{6}Z)"}))
    << backups[0];
  EXPECT_EQ(mode_of(backups[0]), 0600);
  ASSERT_THAT(store.warnings(), SizeIs(1)) << joined(store.warnings());
  EXPECT_THAT(store.warnings()[0], HasSubstr(backups[0].string()));
  approvals_store fresh{file_};
  EXPECT_EQ(fresh.state("/proj", "fs", hash_a), approval_state::approved);
  EXPECT_THAT(fresh.warnings(), IsEmpty());
}

TEST_F(ApprovalsStore, SecondRecoveryInOneSecondKeepsBothBackups) {
  fs::create_directories(file_.parent_path());
  approvals_store store{file_};
  write_bytes(file_, "first garbage");
  store.set("/proj", "fs", hash_a, approval_state::approved);
  write_bytes(file_, "second garbage");
  store.set("/proj", "fs", hash_a, approval_state::approved);
  auto backups = approvals_backups_in(file_.parent_path());
  ASSERT_THAT(backups, SizeIs(2));
  std::vector<std::string> contents{read_bytes(backups[0]), read_bytes(backups[1])};
  EXPECT_THAT(contents, testing::UnorderedElementsAre("first garbage", "second garbage"));
}

TEST_F(ApprovalsStore, KeepsDecisionsIndependentPerProjectRoot) {
  approvals_store store{file_};
  store.set("/one", "fs", hash_a, approval_state::approved);
  store.set("/two", "fs", hash_a, approval_state::rejected);
  EXPECT_EQ(store.state("/one", "fs", hash_a), approval_state::approved);
  EXPECT_EQ(store.state("/two", "fs", hash_a), approval_state::rejected);
  EXPECT_EQ(store.state("/three", "fs", hash_a), approval_state::pending);
}

// -- hash binding (the issue #4615 requirement) --------------------------------

TEST_F(ApprovalsStore, RevertsToPendingWhenTheConfigChangesAfterApproval) {
  approvals_store store{file_};
  store.set("/proj", "fs", hash_a, approval_state::approved);
  EXPECT_EQ(store.state("/proj", "fs", hash_b), approval_state::pending);
}

TEST_F(ApprovalsStore, ARejectedServerAlsoRevertsToPendingWhenEdited) {
  approvals_store store{file_};
  store.set("/proj", "fs", hash_a, approval_state::rejected);
  EXPECT_EQ(store.state("/proj", "fs", hash_b), approval_state::pending);
}

TEST_F(ApprovalsStore, DecisionSurvivesServerRemovalAndIdenticalReAdd) {
  // The store has no delete: a server that leaves the config and comes back
  // unchanged still finds its decision, and other writes keep it too.
  approvals_store store{file_};
  store.set("/proj", "fs", hash_a, approval_state::approved);
  store.set("/proj", "git", hash_a, approval_state::rejected);
  EXPECT_EQ(store.state("/proj", "fs", hash_b), approval_state::pending);
  EXPECT_EQ(store.state("/proj", "fs", hash_a), approval_state::approved);
  EXPECT_EQ(store.state("/proj", "git", hash_a), approval_state::rejected);
}

// -- beyond the reference --------------------------------------------------------

TEST_F(ApprovalsStore, NormalizesTheProjectRoot) {
  approvals_store store{file_};
  store.set("/p/x/../y/", "fs", hash_a, approval_state::approved);
  EXPECT_EQ(store.state("/p/y", "fs", hash_a), approval_state::approved);
  EXPECT_EQ(store.state("/p/./y", "fs", hash_a), approval_state::approved);
  EXPECT_TRUE(json::parse(read_bytes(file_)).contains("/p/y"));
  EXPECT_EQ(approvals_store::normalize_project_root("/"), "/");
  EXPECT_EQ(approvals_store::normalize_project_root("rel"), (fs::current_path() / "rel").string());
}

TEST_F(ApprovalsStore, SeesDecisionsWrittenByAnotherInstance) {
  approvals_store reader{file_};
  EXPECT_EQ(reader.state("/proj", "fs", hash_a), approval_state::pending);
  approvals_store writer{file_};
  writer.set("/proj", "fs", hash_a, approval_state::approved);
  EXPECT_EQ(reader.state("/proj", "fs", hash_a), approval_state::approved);
  writer.set("/proj", "fs", hash_a, approval_state::rejected);
  EXPECT_EQ(reader.state("/proj", "fs", hash_a), approval_state::rejected);
}

TEST_F(ApprovalsStore, WriteKeepsDecisionsMadeElsewhereSinceLastRead) {
  approvals_store a{file_};
  approvals_store b{file_};
  a.set("/proj", "one", hash_a, approval_state::approved);
  b.set("/proj", "two", hash_a, approval_state::approved); // b never read "one"
  a.set("/proj", "three", hash_a, approval_state::approved);
  approvals_store check{file_};
  for (auto name : {"one", "two", "three"})
    EXPECT_EQ(check.state("/proj", name, hash_a), approval_state::approved) << name;
}

TEST_F(ApprovalsStore, IgnoresCommentsWhenReading) {
  fs::create_directories(file_.parent_path());
  write_bytes(file_, "// decisions\n{\"/proj\": {/* hand edit */ \"fs\": {\"hash\": \"" + hash_a
                       + "\", \"status\": \"approved\"}}}\n");
  approvals_store store{file_};
  EXPECT_EQ(store.state("/proj", "fs", hash_a), approval_state::approved);
  EXPECT_THAT(store.warnings(), IsEmpty());
}

TEST_F(ApprovalsStore, WritesTheFileWithMode0600EvenUnderAPermissiveUmask) {
  auto old = ::umask(0);
  approvals_store store{file_};
  try {
    store.set("/proj", "fs", hash_a, approval_state::approved);
  } catch (...) {
    ::umask(old);
    throw;
  }
  ::umask(old);
  EXPECT_EQ(mode_of(file_), 0600);
  EXPECT_EQ(mode_of(fs::path{file_.string() + ".lock"}), 0600);
  EXPECT_EQ(mode_of(file_.parent_path()), 0700);
}

TEST_F(ApprovalsStore, CreatesMissingParentDirectoriesPrivately) {
  auto deep = dir_ / "a" / "b" / "mcp-approvals.json";
  approvals_store store{deep};
  store.set("/proj", "fs", hash_a, approval_state::approved);
  EXPECT_EQ(mode_of(dir_ / "a") & 0077, 0u);
  EXPECT_EQ(mode_of(dir_ / "a" / "b") & 0077, 0u);
  EXPECT_EQ(approvals_store{deep}.state("/proj", "fs", hash_a), approval_state::approved);
  // No temporary files are left behind.
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(dir_ / "a" / "b"))
    names.push_back(e.path().filename().string());
  EXPECT_THAT(names, testing::UnorderedElementsAre("mcp-approvals.json",
                                                   "mcp-approvals.json.lock"));
}

TEST_F(ApprovalsStore, WriteErrorNamesThePathAndReasonWhenParentIsAFile) {
  // A regular file where the directory should be forces ENOTDIR, which
  // (unlike a read-only directory) also fails for root.
  write_bytes(dir_ / "blocker", "x");
  auto bad = dir_ / "blocker" / "sub" / "mcp-approvals.json";
  approvals_store store{bad};
  try {
    store.set("/proj", "fs", hash_a, approval_state::approved);
    FAIL() << "expected a write error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir_ / "blocker" / "sub").string()));
    EXPECT_THAT(e.what(), HasSubstr("Not a directory"));
  }
  EXPECT_EQ(store.state("/proj", "fs", hash_a), approval_state::pending);
  EXPECT_EQ(read_bytes(dir_ / "blocker"), "x");
}

TEST_F(ApprovalsStore, WriteErrorInReadOnlyDirectoryLeavesThePreviousFileIntact) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root ignores directory permissions; "
                    "WriteErrorNamesThePathAndReasonWhenParentIsAFile covers the error path";
  approvals_store store{file_};
  store.set("/proj", "fs", hash_a, approval_state::approved);
  auto before = read_bytes(file_);
  fs::permissions(file_.parent_path(), fs::perms::owner_read | fs::perms::owner_exec);
  try {
    store.set("/proj", "fs", hash_b, approval_state::rejected);
    FAIL() << "expected a write error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(file_.parent_path().string()));
    EXPECT_THAT(e.what(), HasSubstr("Permission denied"));
  }
  EXPECT_EQ(read_bytes(file_), before);
  EXPECT_EQ(store.state("/proj", "fs", hash_a), approval_state::approved);
  EXPECT_EQ(store.state("/proj", "fs", hash_b), approval_state::pending);
}

TEST_F(ApprovalsStore, UnreadableFileWarnsOnReadAndIsNeverOverwritten) {
  // A directory in the file's place cannot be read (EISDIR), even by root.
  fs::create_directories(file_);
  approvals_store store{file_};
  EXPECT_EQ(store.state("/proj", "fs", hash_a), approval_state::pending);
  EXPECT_EQ(store.state("/proj", "git", hash_a), approval_state::pending);
  ASSERT_THAT(store.warnings(), SizeIs(1)) << "one warning per file version";
  EXPECT_THAT(store.warnings()[0], HasSubstr(file_.string()));
  EXPECT_THAT(store.warnings()[0], HasSubstr("not a regular file"));
  try {
    store.set("/proj", "fs", hash_a, approval_state::approved);
    FAIL() << "expected a read error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(file_.string()));
    EXPECT_THAT(e.what(), HasSubstr("not a regular file"));
  }
  EXPECT_TRUE(fs::is_directory(file_));
}

TEST_F(ApprovalsStore, RejectsPendingAsADecision) {
  approvals_store store{file_};
  EXPECT_THROW(store.set("/proj", "fs", hash_a, approval_state::pending), std::invalid_argument);
  EXPECT_THROW(store.set("/proj", "fs", "", approval_state::approved), std::invalid_argument);
  EXPECT_THROW(store.set("/proj", "\xff\xfe", hash_a, approval_state::approved),
               std::invalid_argument);
  EXPECT_FALSE(fs::exists(file_));
}

TEST_F(ApprovalsStore, TwoProcessesWritingConcurrentlyNeverLoseADecision) {
  constexpr int per_child = 50;
  // Both writers start at once, so their writes overlap.
  ASSERT_TRUE(mcprt::test::run_forked_writers(2, [&](int child) {
    approvals_store store{file_};
    for (int i = 0; i < per_child; ++i) {
      auto name = "srv-" + std::to_string(child) + "-" + std::to_string(i);
      store.set("/proj", name, hash_a,
                i % 2 == 0 ? approval_state::approved : approval_state::rejected);
    }
  }));
  approvals_store store{file_};
  for (int child = 0; child < 2; ++child)
    for (int i = 0; i < per_child; ++i) {
      auto name = "srv-" + std::to_string(child) + "-" + std::to_string(i);
      EXPECT_EQ(store.state("/proj", name, hash_a),
                i % 2 == 0 ? approval_state::approved : approval_state::rejected)
        << name;
    }
  EXPECT_THAT(json::parse(read_bytes(file_))["/proj"], SizeIs(2 * per_child));
  EXPECT_THAT(store.warnings(), IsEmpty());
}

// -- hostile files ---------------------------------------------------------------
// The store's directory may be reachable by others (a home directory that a
// repository ships, as the bundled example's is): what lies there is
// refused, never followed, never waited on.

TEST_F(ApprovalsStore, LockFileSymlinkIsRefusedAndNothingIsCreatedThroughIt) {
  fs::create_directories(file_.parent_path());
  auto victim = dir_ / "victim";
  fs::create_symlink(victim, file_.string() + ".lock");
  approvals_store store{file_};
  try {
    store.set("/proj", "fs", hash_a, approval_state::approved);
    FAIL() << "expected the symlinked lock file to be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("symbolic link"));
    EXPECT_THAT(e.what(), HasSubstr(file_.string() + ".lock"));
  }
  EXPECT_FALSE(fs::exists(victim)) << "created a file through the symlink";
  EXPECT_FALSE(fs::exists(file_));
  // A target that exists is not opened either.
  write_bytes(victim, "precious");
  EXPECT_THROW(store.set("/proj", "fs", hash_a, approval_state::approved), std::runtime_error);
  EXPECT_EQ(read_bytes(victim), "precious");
}

TEST_F(ApprovalsStore, LockFileThatIsAFifoIsRefused) {
  fs::create_directories(file_.parent_path());
  ASSERT_EQ(::mkfifo((file_.string() + ".lock").c_str(), 0600), 0);
  approvals_store store{file_};
  auto r = std::async(std::launch::async, [&] {
    try {
      store.set("/proj", "fs", hash_a, approval_state::approved);
      return std::string("no error");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  });
  ASSERT_EQ(r.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "blocked on a FIFO";
  EXPECT_THAT(r.get(), HasSubstr("not a regular file"));
}

TEST_F(ApprovalsStore, StoreFileThatIsAFifoIsReadWithoutBlockingAndNeverReplaced) {
  fs::create_directories(file_.parent_path());
  ASSERT_EQ(::mkfifo(file_.c_str(), 0600), 0);
  approvals_store store{file_};
  auto r = std::async(std::launch::async, [&] { return store.state("/proj", "fs", hash_a); });
  ASSERT_EQ(r.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "blocked on a FIFO";
  EXPECT_EQ(r.get(), approval_state::pending);
  ASSERT_THAT(store.warnings(), SizeIs(1));
  EXPECT_THAT(store.warnings()[0], HasSubstr("not a regular file"));
  EXPECT_THROW(store.set("/proj", "fs", hash_a, approval_state::approved), std::runtime_error);
  struct stat st {};
  ASSERT_EQ(::lstat(file_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST_F(ApprovalsStore, StoreFileLinkedToADeviceIsNotReadWithoutEnd) {
  fs::create_directories(file_.parent_path());
  fs::create_symlink("/dev/zero", file_);
  approvals_store store{file_};
  auto r = std::async(std::launch::async, [&] { return store.state("/proj", "fs", hash_a); });
  ASSERT_EQ(r.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "read /dev/zero without end";
  EXPECT_EQ(r.get(), approval_state::pending);
  ASSERT_THAT(store.warnings(), SizeIs(1));
  EXPECT_THAT(store.warnings()[0], HasSubstr("not a regular file"));
}

TEST_F(ApprovalsStore, OversizedStoreFileIsRefused) {
  fs::create_directories(file_.parent_path());
  write_bytes(file_, "{\"/proj\": {}, \"pad\": \"" + std::string(16u << 20, 'x') + "\"}");
  approvals_store store{file_};
  EXPECT_EQ(store.state("/proj", "fs", hash_a), approval_state::pending);
  ASSERT_THAT(store.warnings(), SizeIs(1));
  EXPECT_THAT(store.warnings()[0], HasSubstr("larger than"));
}

TEST_F(ApprovalsStore, DeeplyNestedStoreIsMalformedNotAStackOverflow) {
  fs::create_directories(file_.parent_path());
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  write_bytes(file_, deep);
  approvals_store store{file_};
  EXPECT_EQ(store.state("/proj", "fs", hash_a), approval_state::pending);
  ASSERT_THAT(store.warnings(), SizeIs(1));
  EXPECT_THAT(store.warnings()[0], HasSubstr("nested deeper"));
  EXPECT_LT(store.warnings()[0].size(), 400u) << "the warning quotes the file";
  store.set("/proj", "fs", hash_a, approval_state::approved);
  ASSERT_THAT(approvals_backups_in(file_.parent_path()), SizeIs(1));
  EXPECT_EQ(approvals_store{file_}.state("/proj", "fs", hash_a), approval_state::approved);
}

TEST_F(ApprovalsStore, InvalidUtf8IsMalformedAndWarningsNeverCarryControlCharacters) {
  fs::create_directories(file_.parent_path());
  write_bytes(file_, "{\"/proj\": {\"fs\": {\"hash\": \"caf\xe9\", \"status\": \"approved\"}}}");
  approvals_store store{file_};
  EXPECT_EQ(store.state("/proj", "fs", "caf\xe9"), approval_state::pending);
  ASSERT_THAT(store.warnings(), SizeIs(1));
  EXPECT_THAT(store.warnings()[0], HasSubstr("invalid UTF-8"));
  store.take_warnings();
  // Valid JSON whose names would forge a log line or clear a terminal.
  write_bytes(file_, R"({"/p\u001b[2J": {"x\nINFO approved everything": 5},)"
                     R"( "/q": {"y": {"hash": "h", "status": "maybe\r\n"}}})");
  store.reload();
  store.state("/proj", "fs", hash_a);
  ASSERT_THAT(store.warnings(), SizeIs(2)) << joined(store.warnings());
  for (auto& w : store.warnings()) {
    for (char c : w)
      EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << w;
  }
  EXPECT_THAT(joined(store.warnings()), HasSubstr("x\\nINFO"));
}

TEST(ApprovalsStorePath, DefaultPathIsUnderTheConfigDirectory) {
  EXPECT_EQ(approvals_store::default_path("/home/u"),
            fs::path{"/home/u/.mcprt/mcp-approvals.json"});
  EXPECT_EQ(approvals_store::default_path("/home/u", ".qwen"),
            fs::path{"/home/u/.qwen/mcp-approvals.json"});
}

TEST(ApprovalState, RoundTripsThroughStrings) {
  for (auto s : {approval_state::pending, approval_state::approved, approval_state::rejected})
    EXPECT_EQ(parse_approval_state(to_string(s)), s);
  EXPECT_EQ(to_string(approval_state::approved), "approved");
  EXPECT_EQ(parse_approval_state("Approved"), std::nullopt);
  EXPECT_EQ(parse_approval_state(""), std::nullopt);
}

} // namespace
} // namespace mcprt
