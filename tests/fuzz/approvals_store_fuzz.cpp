// The approvals store's file, written by anyone who can write there: the
// input is the file's content, then load → lookups → a decision → save →
// a fresh store reads it back, in a private temp directory.
//
// Whatever the file holds: nothing crashes or throws outside the documented
// errors, warnings are single printable lines of valid UTF-8, a malformed
// file is backed up before it is replaced, and a decision that set()
// reports as stored is what a fresh store reads back.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <unistd.h>

#include "core/approvals_store.hpp"
#include "core/untrusted_text.hpp"

namespace {

namespace fs = std::filesystem;
using namespace mcprt;
using nlohmann::json;

// tmpfs when there is one: the store fsyncs every write.
const fs::path& work_dir() {
  static const fs::path dir = [] {
    fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string templ = (base / "mcprt-fuzz-approvals-XXXXXX").string();
    if (!::mkdtemp(templ.data())) std::abort();
    return fs::path(templ);
  }();
  return dir;
}

void check_warnings(approvals_store& store) {
  for (auto& w : store.take_warnings()) {
    if (first_invalid_utf8(w)) __builtin_trap();
    for (unsigned char c : w)
      if (c < 0x20 || c == 0x7f) __builtin_trap();
  }
}

// Names worth looking up: the first project and server the file holds, if
// it is a JSON object of objects.
std::pair<std::string, std::string> first_names(std::string_view text) {
  auto j = json::parse(text.begin(), text.end(), nullptr, false, true);
  if (!j.is_object() || j.empty()) return {"/proj", "fs"};
  auto p = j.begin();
  if (!p->is_object() || p->empty()) return {p.key(), "fs"};
  return {p.key(), p->begin().key()};
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto dir = work_dir() / "home";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  auto file = dir / "mcp-approvals.json";
  {
    std::ofstream out(file, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  auto [root, server] = first_names(text);
  // A very deep file is refused before nlohmann builds it; the names above
  // come from nlohmann's own (bounded-depth-safe, iterative) parser.
  const std::string hash(64, 'c');

  approvals_store store{file};
  (void)store.state(root, server, hash);
  (void)store.state("/proj", "fs", hash);
  check_warnings(store);

  bool stored = false;
  try {
    store.set(root, server, hash, approval_state::approved);
    stored = true;
  } catch (const std::invalid_argument&) {
    // A name that is not valid UTF-8 cannot be stored: documented.
  } catch (const std::runtime_error&) {
    // An I/O error: documented (none is expected in a private directory).
    std::abort();
  }
  check_warnings(store);
  if (stored) {
    approvals_store fresh{file};
    if (fresh.state(root, server, hash) != approval_state::approved) __builtin_trap();
    if (!fresh.warnings().empty()) __builtin_trap(); // we wrote it: it is well-formed
    if (store.state(root, server, hash) != approval_state::approved) __builtin_trap();
  }
  return 0;
}
