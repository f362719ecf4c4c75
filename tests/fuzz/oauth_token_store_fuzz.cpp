// The OAuth token store's file, written by anyone who can write there: the
// input is the file's content, then load → lookups → a put of the harness's
// own credentials → a fresh store reads them back, in a private temp
// directory.
//
// Whatever the file holds: nothing crashes or throws outside the documented
// errors, warnings are single printable lines of valid UTF-8, a put that
// returns is what a fresh store reads back, and no text the store produces
// quotes a value from the file. That last one is checked with '$', which no
// message template or path holds: while no server URL or client key in the
// file contains one, no warning or exception may either (the seeds put it
// in tokens and secrets).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <unistd.h>

#include "core/oauth_token_store.hpp"
#include "core/untrusted_text.hpp"

namespace {

namespace fs = std::filesystem;
using namespace mcprt;
using nlohmann::json;

// tmpfs when there is one: the store fsyncs every write.
const fs::path& work_dir() {
  static const fs::path dir = [] {
    fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string templ = (base / "mcprt-fuzz-oauth-XXXXXX").string();
    if (!::mkdtemp(templ.data())) std::abort();
    return fs::path(templ);
  }();
  return dir;
}

void check_text(const std::string& text, bool dollar_allowed) {
  if (first_invalid_utf8(text)) __builtin_trap();
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7f) __builtin_trap();
  if (!dollar_allowed && text.find('$') != std::string::npos) __builtin_trap();
}

void check_warnings(oauth_token_store& store, bool dollar_allowed) {
  for (auto& w : store.take_warnings())
    check_text(w, dollar_allowed);
}

struct names {
  std::string url = "https://mcp.example.com/mcp";
  std::string key = "dynamic";
  bool dollar = false; // some URL or client key holds a '$'
};

// The first server URL and client key the file holds, if it is a JSON
// object of objects, and whether any URL or key could put a '$' in a
// warning.
names names_in(std::string_view text) {
  names out;
  auto j = json::parse(text.begin(), text.end(), nullptr, false, true);
  if (!j.is_object()) return out;
  bool first = true;
  for (auto& [url, clients] : j.items()) {
    out.dollar = out.dollar || url.find('$') != std::string::npos;
    if (first && !url.empty()) out.url = url;
    if (!clients.is_object()) {
      first = false;
      continue;
    }
    for (auto& [key, rec] : clients.items()) {
      (void)rec;
      out.dollar = out.dollar || key.find('$') != std::string::npos;
      if (first && !key.empty()) {
        out.key = key;
        first = false;
      }
    }
    first = false;
  }
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto dir = work_dir() / "home";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  auto file = dir / "mcp-oauth.json";
  {
    std::ofstream out(file, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  auto n = names_in(text);

  oauth_token_store store{file};
  (void)store.get(n.url, n.key);
  (void)store.get("https://mcp.example.com/mcp", "dynamic");
  check_warnings(store, n.dollar);

  oauth_credentials mine;
  mine.issuer = "https://auth.example.com";
  mine.client_id = "fuzz-client";
  mine.client_secret = "cs-$-fuzz";
  mine.access_token = "at-$-fuzz";
  mine.refresh_token = "rt-$-fuzz";
  mine.token_type = "Bearer";
  mine.expires_at = 1767225600;
  bool stored = false;
  try {
    store.put(n.url, n.key, mine);
    stored = true;
  } catch (const std::invalid_argument& e) {
    // A URL or key that is not valid UTF-8 cannot be stored: documented.
    check_text(e.what(), n.dollar);
  } catch (const std::runtime_error&) {
    // An I/O error: documented (none is expected in a private directory).
    std::abort();
  }
  check_warnings(store, n.dollar);
  if (stored) {
    oauth_token_store fresh{file};
    if (fresh.get(n.url, n.key) != mine) __builtin_trap();
    if (!fresh.warnings().empty()) __builtin_trap(); // we wrote it: it is well-formed
    if (store.get(n.url, n.key) != mine) __builtin_trap();
    (void)store.forget_tokens(n.url, n.key);
    auto left = fresh.get(n.url, n.key);
    if (!left || !left->access_token.empty() || left->client_secret != mine.client_secret) __builtin_trap();
    if (!store.forget(n.url) || fresh.get(n.url, n.key)) __builtin_trap();
    check_warnings(fresh, n.dollar);
  }
  check_warnings(store, n.dollar);
  return 0;
}
