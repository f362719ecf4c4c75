// A tools/call result is a server's JSON, printed to a terminal by `mcprt
// call`. Whatever shape it has, printing must not throw, must not let a
// control character other than a line break or tab reach the terminal in
// text mode, and the exit code must be 0 or 1. The one-line error must stay
// one line without control characters.

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string_view>

#include "cli/terminal_output.hpp"
#include "core/untrusted_text.hpp"

namespace {

bool clean_text(const std::string& s, bool allow_breaks) {
  for (unsigned char c : s) {
    if (allow_breaks && (c == '\n' || c == '\t')) continue;
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  mcprt::json_limits lim;
  lim.max_depth = 64;
  auto r = mcprt::parse_bounded_json(text, lim);
  if (r.ok()) {
    for (bool as_json : {false, true}) {
      std::ostringstream out;
      int rc = mcprt::cli::print_tool_result(r.value, as_json, out);
      if (rc != 0 && rc != 1) __builtin_trap();
      if (!clean_text(out.str(), true)) __builtin_trap();
      // --json output is still the same JSON.
      if (as_json && nlohmann::json::parse(out.str(), nullptr, false) != nlohmann::json::parse(mcprt::dump_json(r.value)))
        __builtin_trap();
    }
  }
  auto line = mcprt::cli::terminal_line(std::string(text));
  if (!clean_text(line, false)) __builtin_trap();
  if (mcprt::first_invalid_utf8(line)) __builtin_trap();
  return 0;
}
