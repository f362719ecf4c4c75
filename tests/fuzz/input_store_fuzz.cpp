// The inputs store's file (`${input:ID}` values), written by anyone who can
// write there: the input is the file's content, then load → lookups → a set
// of the harness's own value → unset → a fresh store reads it back, in a
// private temp directory.
//
// Whatever the file holds: nothing crashes or throws outside the documented
// errors, warnings are single printable lines of valid UTF-8, every id the
// store lists is a valid id whose value get() returns within the bounds, a
// set that returns is what a fresh store reads back, and no text the store
// produces quotes a value (or an invalid id) from the file. That last one is
// checked with '$', which no message template or path holds and no valid id
// can: while no project root in the file contains one, no warning may either
// (the seeds put it in values and invalid ids).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <unistd.h>

#include "core/input_store.hpp"
#include "core/untrusted_text.hpp"

namespace {

namespace fs = std::filesystem;
using namespace mcprt;
using nlohmann::json;

// tmpfs when there is one: the store fsyncs every write.
const fs::path& work_dir() {
  static const fs::path dir = [] {
    fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string templ = (base / "mcprt-fuzz-inputs-XXXXXX").string();
    if (!::mkdtemp(templ.data())) std::abort();
    return fs::path(templ);
  }();
  return dir;
}

void check_text(const std::string& w, bool dollar_allowed) {
  if (first_invalid_utf8(w)) __builtin_trap();
  for (unsigned char c : w)
    if (c < 0x20 || c == 0x7f) __builtin_trap();
  if (!dollar_allowed && w.find('$') != std::string::npos) __builtin_trap();
}

void check_warnings(input_store& store, bool dollar_allowed) {
  for (auto& w : store.take_warnings())
    check_text(w, dollar_allowed);
}

struct names {
  std::string root = "/proj";
  std::string id = "k";
  bool dollar = false; // some project root holds a '$'
};

// The first project root and id the file holds, if it is a JSON object of
// objects, and whether a root could put a '$' in a warning.
names names_in(std::string_view text) {
  names out;
  auto j = json::parse(text.begin(), text.end(), nullptr, false, true);
  if (!j.is_object()) return out;
  bool first = true;
  for (auto& [root, inputs] : j.items()) {
    out.dollar = out.dollar || root.find('$') != std::string::npos;
    if (first) out.root = root;
    if (first && inputs.is_object() && !inputs.empty()) out.id = inputs.begin().key();
    first = false;
  }
  return out;
}

void check_view(input_store& store, const std::string& root) {
  auto ids = store.ids(root);
  if (ids.size() > input_store::max_ids_per_project) __builtin_trap();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (input_id_problem(ids[i])) __builtin_trap();
    if (i > 0 && !(ids[i - 1] < ids[i])) __builtin_trap();
    auto v = store.get(root, ids[i]);
    if (!v || v->size() > input_store::max_value_bytes || v->find('\0') != std::string::npos) __builtin_trap();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto dir = work_dir() / "home";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  auto file = dir / "mcp-inputs.json";
  {
    std::ofstream out(file, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  auto n = names_in(text);

  input_store store{file};
  (void)store.get(n.root, n.id);
  (void)store.get("/proj", "k");
  check_view(store, n.root);
  check_warnings(store, n.dollar);

  const std::string mine = "value-of-the-harness";
  bool stored = false;
  try {
    store.set(n.root, n.id, mine);
    stored = true;
  } catch (const std::invalid_argument& e) {
    // An invalid id, or a root that is not valid UTF-8, or a project already
    // at the limit: documented. The message never quotes the value.
    if (std::string_view(e.what()).find(mine) != std::string_view::npos) __builtin_trap();
  } catch (const std::runtime_error&) {
    std::abort(); // no I/O error is expected in a private directory
  }
  check_warnings(store, n.dollar);
  if (stored) {
    input_store fresh{file};
    if (fresh.get(n.root, n.id) != mine) __builtin_trap();
    if (!fresh.warnings().empty()) __builtin_trap(); // we wrote it: it is well-formed
    check_view(fresh, n.root);
    if (!store.unset(n.root, n.id)) __builtin_trap();
    if (fresh.get(n.root, n.id)) __builtin_trap();
    if (store.unset(n.root, n.id)) __builtin_trap();
  }
  check_warnings(store, n.dollar);
  return 0;
}
