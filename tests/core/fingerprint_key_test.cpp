#include "core/fingerprint_key.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fingerprint.hpp"

using namespace mcprt;
namespace fs = std::filesystem;

namespace {

fingerprint_key counting_key() {
  fingerprint_key k;
  for (std::size_t i = 0; i < k.bytes.size(); ++i)
    k.bytes[i] = static_cast<unsigned char>(i + 1);
  return k;
}

class FingerprintKeyFile : public ::testing::Test {
protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "mcprt-key-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string bytes_of(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  fs::path dir_;
};

} // namespace

// Pinned against Python's hmac module:
//   hmac.new(bytes(range(1,33)), b"fs::8b3e79662bd0fa53", hashlib.sha256).hexdigest()[:16]
TEST(KeyedConnectionId, IsTheNameAndSixteenHexOfTheHmac) {
  auto k = counting_key();
  EXPECT_EQ(keyed_connection_id("fs::8b3e79662bd0fa53", k), "fs::14fd23dccc92b77c");
  // The name is everything before the last "::", as in connection ids.
  EXPECT_EQ(keyed_connection_id("a::b::0123456789abcdef", k), "a::b::6653fe6ea4ef53a3");
}

TEST(KeyedConnectionId, DiffersFromTheInternalIdAndWithTheKey) {
  server_config c;
  c.name = "fs";
  c.spec = {{"command", "npx"}, {"env", {{"PIN", "1234"}}}};
  auto internal = connection_id(c);
  auto a = random_fingerprint_key(), b = random_fingerprint_key();
  auto shown = keyed_connection_id(internal, a);
  EXPECT_NE(shown, internal);
  EXPECT_EQ(shown.rfind("fs::", 0), 0u);
  EXPECT_EQ(shown.size(), internal.size());
  EXPECT_EQ(keyed_connection_id(internal, a), shown); // stable for one key
  EXPECT_NE(keyed_connection_id(internal, b), shown);
  // Another PIN, another digest: the shown value still tells configs apart.
  c.spec["env"]["PIN"] = "1235";
  EXPECT_NE(keyed_connection_id(connection_id(c), a), shown);
}

TEST_F(FingerprintKeyFile, CreatedOnFirstUseWithModeSixHundredThenReadBack) {
  auto path = dir_ / "home" / ".mcprt" / "fingerprint.key";
  auto first = load_or_create_fingerprint_key(path);
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_EQ(first.outcome, fingerprint_key_result::status::created);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_size, 32);
  ASSERT_EQ(::stat(path.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  auto second = load_or_create_fingerprint_key(path);
  ASSERT_TRUE(second.ok()) << second.error;
  EXPECT_EQ(second.outcome, fingerprint_key_result::status::loaded);
  EXPECT_EQ(second.key->bytes, first.key->bytes);
  // No temporary file is left behind.
  std::size_t entries = 0;
  for (auto& e : fs::directory_iterator(path.parent_path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
}

TEST_F(FingerprintKeyFile, SymlinkIsRefusedAndItsTargetUntouched) {
  auto target = dir_ / "elsewhere";
  {
    std::ofstream(target) << "precious";
  }
  auto path = dir_ / "fingerprint.key";
  fs::create_symlink(target, path);
  auto r = load_or_create_fingerprint_key(path);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.outcome, fingerprint_key_result::status::refused);
  EXPECT_NE(r.error.find("symbolic link"), std::string::npos) << r.error;
  EXPECT_EQ(bytes_of(target), "precious");
  // A dangling symlink is refused too, not written through.
  fs::remove(target);
  r = load_or_create_fingerprint_key(path);
  EXPECT_EQ(r.outcome, fingerprint_key_result::status::refused) << r.error;
  EXPECT_FALSE(fs::exists(target));
}

TEST_F(FingerprintKeyFile, ReadableByOthersIsRefusedWithTheFix) {
  auto path = dir_ / "fingerprint.key";
  ASSERT_TRUE(load_or_create_fingerprint_key(path).ok());
  ::chmod(path.c_str(), 0644);
  auto r = load_or_create_fingerprint_key(path);
  EXPECT_EQ(r.outcome, fingerprint_key_result::status::refused);
  EXPECT_NE(r.error.find("mode 0644"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("chmod 600"), std::string::npos) << r.error;
  ::chmod(path.c_str(), 0640);
  EXPECT_EQ(load_or_create_fingerprint_key(path).outcome, fingerprint_key_result::status::refused);
  ::chmod(path.c_str(), 0600);
  EXPECT_TRUE(load_or_create_fingerprint_key(path).ok());
}

TEST_F(FingerprintKeyFile, WrongSizeIsRefusedAndNotReplaced) {
  auto path = dir_ / "fingerprint.key";
  {
    std::ofstream(path) << "short";
  }
  ::chmod(path.c_str(), 0600);
  auto r = load_or_create_fingerprint_key(path);
  EXPECT_EQ(r.outcome, fingerprint_key_result::status::refused);
  EXPECT_NE(r.error.find("holds 5 bytes"), std::string::npos) << r.error;
  EXPECT_EQ(bytes_of(path), "short");
}

TEST_F(FingerprintKeyFile, FifoIsRefusedWithoutBlocking) {
  auto path = dir_ / "fingerprint.key";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto r = std::async(std::launch::async, [&] { return load_or_create_fingerprint_key(path); });
  ASSERT_EQ(r.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "blocked on a FIFO";
  auto got = r.get();
  EXPECT_EQ(got.outcome, fingerprint_key_result::status::refused);
  EXPECT_NE(got.error.find("not a regular file"), std::string::npos) << got.error;
}

TEST_F(FingerprintKeyFile, ConcurrentCreatorsAgreeOnOneKey) {
  auto path = dir_ / "sub" / "fingerprint.key";
  std::vector<std::future<fingerprint_key_result>> runs;
  for (int i = 0; i < 8; ++i)
    runs.push_back(std::async(std::launch::async, [&] { return load_or_create_fingerprint_key(path); }));
  std::set<std::array<unsigned char, 32>> keys;
  for (auto& f : runs) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.error;
    keys.insert(r.key->bytes);
  }
  EXPECT_EQ(keys.size(), 1u);
  EXPECT_EQ(load_or_create_fingerprint_key(path).key->bytes, *keys.begin());
}

TEST_F(FingerprintKeyFile, UncreatableIsUnavailableNotRefused) {
  auto blocker = dir_ / "file";
  {
    std::ofstream(blocker) << "x";
  }
  auto r = load_or_create_fingerprint_key(blocker / "fingerprint.key");
  EXPECT_EQ(r.outcome, fingerprint_key_result::status::unavailable);
  EXPECT_FALSE(r.error.empty());
}
