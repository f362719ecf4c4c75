// parse_bounded_json is the door for every JSON text from outside: it must
// answer a value or an error for any bytes, and whatever it answers must
// dump and display without throwing.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/untrusted_text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool replace : {false, true}) {
    mcprt::json_limits lim;
    lim.max_depth = 16;
    lim.allow_comments = replace;
    lim.replace_invalid_utf8 = replace;
    auto r = mcprt::parse_bounded_json(text, lim);
    if (r.ok()) {
      (void)mcprt::dump_json(r.value);
      if (replace && mcprt::first_invalid_utf8(r.value.dump())) __builtin_trap();
    } else {
      if (r.error->offset > text.size()) __builtin_trap();
      if (mcprt::first_invalid_utf8(r.error->message)) __builtin_trap();
    }
  }
  auto shown = mcprt::escape_for_display(text);
  for (unsigned char c : shown)
    if (c < 0x20 || c == 0x7f) __builtin_trap();
  if (mcprt::first_invalid_utf8(mcprt::replace_invalid_utf8(text))) __builtin_trap();
  return 0;
}
