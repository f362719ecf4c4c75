// The inotify adapter against real temporary directories. Every wait is a
// condition with a deadline (no fixed sleeps): inotify reports in order, so
// "X was seen" is also a fence for everything that happened before X.

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "io/inotify_watch.hpp"

using namespace mcprt::io;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

constexpr auto deadline = 5s;

class temp_dir {
public:
  temp_dir() {
    std::string tmpl = (fs::temp_directory_path() / "mcprt-inotify-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = fs::path(tmpl);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

private:
  fs::path path_;
};

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

/// What an editor does: write a temp file next to the target, rename it over.
void rename_save(const fs::path& p, const std::string& text) {
  auto tmp = p;
  tmp += ".tmp~";
  write_file(tmp, text);
  fs::rename(tmp, p);
}

/// Records callback paths; waits for one with a deadline.
class path_recorder {
public:
  inotify_watch::callback callback() {
    return [this](const std::string& path) {
      std::lock_guard<std::mutex> lk(m_);
      seen_.push_back(path);
      cv_.notify_all();
    };
  }

  std::size_t count() const {
    std::lock_guard<std::mutex> lk(m_);
    return seen_.size();
  }

  /// True once `path` was reported at index `from` or later.
  bool wait_for(const fs::path& path, std::size_t from = 0) {
    std::unique_lock<std::mutex> lk(m_);
    return cv_.wait_for(lk, deadline, [&] {
      return std::find(seen_.begin() + std::min(from, seen_.size()), seen_.end(), path.string()) !=
             seen_.end();
    });
  }

  std::vector<std::string> seen() const {
    std::lock_guard<std::mutex> lk(m_);
    return seen_;
  }

private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::string> seen_;
};

} // namespace

TEST(InotifyWatch, RenameOverTheFileIsDetected) {
  temp_dir d;
  auto file = d.path() / "settings.json";
  write_file(file, "{}");
  path_recorder rec;
  inotify_watch w({file}, rec.callback());
  EXPECT_EQ(w.watched_directories(), std::vector<std::string>{d.path().string()});
  rename_save(file, R"({"a":1})");
  EXPECT_TRUE(rec.wait_for(file));
  // A second rename save is seen too: the directory watch survives the
  // inode of the file being replaced.
  auto before = rec.count();
  rename_save(file, R"({"a":2})");
  EXPECT_TRUE(rec.wait_for(file, before));
  EXPECT_TRUE(w.last_error().empty());
}

TEST(InotifyWatch, InPlaceWriteIsDetected) {
  temp_dir d;
  auto file = d.path() / "settings.json";
  write_file(file, "{}");
  path_recorder rec;
  inotify_watch w({file}, rec.callback());
  write_file(file, R"({"a":1})");
  EXPECT_TRUE(rec.wait_for(file));
}

TEST(InotifyWatch, FileInDirectoriesCreatedAfterStartIsDetected) {
  temp_dir d;
  auto file = d.path() / "a" / "b" / "settings.json";
  path_recorder rec;
  inotify_watch w({file}, rec.callback());
  // Two levels are missing: the nearest existing ancestor is watched.
  EXPECT_EQ(w.watched_directories(), std::vector<std::string>{d.path().string()});
  fs::create_directory(d.path() / "a");
  ASSERT_TRUE(rec.wait_for(d.path() / "a"));
  EXPECT_EQ(w.watched_directories(), std::vector<std::string>{(d.path() / "a").string()});
  auto before = rec.count();
  fs::create_directory(d.path() / "a" / "b");
  write_file(file, "{}");
  EXPECT_TRUE(rec.wait_for(file, before));
  // The watch went down to the file's own directory ...
  EXPECT_EQ(w.watched_directories(), std::vector<std::string>{(d.path() / "a" / "b").string()});
  // ... so the next save is seen through it.
  before = rec.count();
  rename_save(file, R"({"x":1})");
  EXPECT_TRUE(rec.wait_for(file, before));
}

TEST(InotifyWatch, MkdirDashPThenWriteIsDetected) {
  // The directories and the file appear faster than the watch can follow:
  // re-arming reports the file because it may already be there.
  temp_dir d;
  auto file = d.path() / "a" / "b" / "c" / "settings.json";
  path_recorder rec;
  inotify_watch w({file}, rec.callback());
  fs::create_directories(file.parent_path());
  write_file(file, "{}");
  EXPECT_TRUE(rec.wait_for(file));
}

TEST(InotifyWatch, DeletionIsDetected) {
  temp_dir d;
  auto file = d.path() / "settings.json";
  write_file(file, "{}");
  path_recorder rec;
  inotify_watch w({file}, rec.callback());
  fs::remove(file);
  EXPECT_TRUE(rec.wait_for(file));
}

TEST(InotifyWatch, DirectoryDeletedAndRecreatedThenFileWrittenIsDetected) {
  temp_dir d;
  auto sub = d.path() / "sub";
  auto file = sub / "settings.json";
  fs::create_directory(sub);
  write_file(file, "{}");
  path_recorder rec;
  inotify_watch w({file}, rec.callback());
  EXPECT_EQ(w.watched_directories(), std::vector<std::string>{sub.string()});
  fs::remove_all(sub);
  // The directory's own deletion is reported after the fall back.
  ASSERT_TRUE(rec.wait_for(sub));
  EXPECT_EQ(w.watched_directories(), std::vector<std::string>{d.path().string()});
  auto before = rec.count();
  fs::create_directory(sub);
  write_file(file, R"({"back":true})");
  EXPECT_TRUE(rec.wait_for(file, before));
  // And the watch is back on the file's own directory.
  before = rec.count();
  write_file(file, R"({"back":2})");
  EXPECT_TRUE(rec.wait_for(file, before));
  EXPECT_EQ(w.watched_directories(), std::vector<std::string>{sub.string()});
}

TEST(InotifyWatch, DirectoryMovedAwayFallsBackToItsParent) {
  temp_dir d;
  auto sub = d.path() / "sub";
  auto file = sub / "settings.json";
  fs::create_directory(sub);
  write_file(file, "{}");
  path_recorder rec;
  inotify_watch w({file}, rec.callback());
  fs::rename(sub, d.path() / "elsewhere");
  ASSERT_TRUE(rec.wait_for(sub));
  EXPECT_EQ(w.watched_directories(), std::vector<std::string>{d.path().string()});
  // A write in the moved directory is not about the watched file any more.
  auto before = rec.count();
  write_file(d.path() / "elsewhere" / "settings.json", "{}");
  fs::create_directory(sub);
  write_file(file, "{}");
  ASSERT_TRUE(rec.wait_for(file, before));
  for (auto& p : rec.seen()) EXPECT_EQ(p.find("elsewhere"), std::string::npos) << p;
}

TEST(InotifyWatch, UnrelatedFilesInTheSameDirectoryNeverCallBack) {
  // Documented behaviour: events about other entries of a watched directory
  // are filtered out (so is an editor's temp file before the rename).
  temp_dir d;
  auto file = d.path() / "settings.json";
  write_file(file, "{}");
  path_recorder rec;
  inotify_watch w({file}, rec.callback());
  write_file(d.path() / "other.json", "{}");
  fs::remove(d.path() / "other.json");
  rename_save(file, R"({"a":1})");
  // inotify reports in order: once the settings file is seen, the events of
  // the unrelated file have been handled.
  ASSERT_TRUE(rec.wait_for(file));
  for (auto& p : rec.seen()) EXPECT_EQ(p, file.string());
}

TEST(InotifyWatch, SeveralFilesInSeveralDirectories) {
  temp_dir d;
  auto user = d.path() / "home" / ".mcprt" / "settings.json";
  auto project = d.path() / "ws" / ".mcp.json";
  auto workspace = d.path() / "ws" / ".mcprt" / "settings.json";
  fs::create_directories(d.path() / "ws");
  path_recorder rec;
  inotify_watch w({user, project, workspace}, rec.callback());
  EXPECT_EQ(w.watched_directories(), (std::vector<std::string>{d.path().string(), (d.path() / "ws").string()}));
  write_file(project, "{}");
  EXPECT_TRUE(rec.wait_for(project));
  fs::create_directories(workspace.parent_path());
  write_file(workspace, "{}");
  EXPECT_TRUE(rec.wait_for(workspace));
  fs::create_directories(user.parent_path());
  rename_save(user, "{}");
  EXPECT_TRUE(rec.wait_for(user));
}

TEST(InotifyWatch, RelativePathsAreMadeAbsolute) {
  temp_dir d;
  auto old = fs::current_path();
  fs::current_path(d.path());
  path_recorder rec;
  {
    inotify_watch w({fs::path("settings.json")}, rec.callback());
    write_file(d.path() / "settings.json", "{}");
    EXPECT_TRUE(rec.wait_for(d.path() / "settings.json"));
  }
  fs::current_path(old);
}

TEST(InotifyWatch, DestructorStopsTheThreadAndNoCallbackFollows) {
  temp_dir d;
  auto file = d.path() / "settings.json";
  path_recorder rec;
  {
    inotify_watch w({file}, rec.callback());
  }
  auto before = rec.count();
  write_file(file, "{}");
  // The thread was joined by the destructor: nothing can call back any more.
  EXPECT_EQ(rec.count(), before);
}

TEST(InotifyWatch, AnUnreadableDirectoryThrowsAtStart) {
  temp_dir d;
  auto sub = d.path() / "sub";
  fs::create_directory(sub);
  ::chmod(sub.c_str(), 0);
  if (::access(sub.c_str(), R_OK) == 0) GTEST_SKIP() << "permissions do not apply (root)";
  try {
    inotify_watch w({sub / "settings.json"}, [](const std::string&) {});
    ADD_FAILURE() << "expected inotify_error";
  } catch (const inotify_error& e) {
    EXPECT_NE(std::string(e.what()).find("inotify_add_watch(" + sub.string() + ")"), std::string::npos)
      << e.what();
  }
  ::chmod(sub.c_str(), 0700);
}

TEST(InotifyWatch, AnUnwatchableNewDirectoryIsReportedAndItsParentStaysWatched) {
  temp_dir d;
  auto sub = d.path() / "sub";
  // Made unreadable elsewhere, then moved into place: the watch cannot follow.
  auto staging = d.path() / "staging";
  fs::create_directory(staging);
  ::chmod(staging.c_str(), 0);
  if (::access(staging.c_str(), R_OK) == 0) GTEST_SKIP() << "permissions do not apply (root)";
  std::mutex m;
  std::condition_variable cv;
  std::string error;
  path_recorder rec;
  inotify_watch w({sub / "settings.json"}, rec.callback(), [&](const std::string& msg) {
    std::lock_guard<std::mutex> lk(m);
    error = msg;
    cv.notify_all();
  });
  fs::rename(staging, sub);
  {
    std::unique_lock<std::mutex> lk(m);
    ASSERT_TRUE(cv.wait_for(lk, deadline, [&] { return !error.empty(); }));
    EXPECT_NE(error.find(sub.string()), std::string::npos) << error;
  }
  EXPECT_EQ(w.last_error(), error);
  EXPECT_EQ(w.watched_directories(), std::vector<std::string>{d.path().string()});
  ::chmod(sub.c_str(), 0700);
}
