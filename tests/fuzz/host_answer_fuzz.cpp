// core/host_answer takes an HTTP client's answer to a server's request
// and a server's params for an event: for any bytes, parsed as
// the daemon parses a body, each check gives exactly one verdict, what it
// passes on dumps without throwing, refusals stay bounded, and the event's
// params stay within their bound.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/host_answer.hpp"
#include "core/untrusted_text.hpp"

namespace {

void check_one(const mcprt::host_answer& a) {
  int set = (a.result ? 1 : 0) + (a.refusal ? 1 : 0) + (a.error.empty() ? 0 : 1);
  if (set != 1) __builtin_trap();
  if (a.result) {
    if (!a.result->is_object()) __builtin_trap();
    (void)mcprt::dump_json(*a.result);
  }
  if (a.refusal && a.refusal->size() > mcprt::max_host_text_bytes) __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  mcprt::json_limits lim;
  lim.max_depth = 64;
  auto parsed = mcprt::parse_bounded_json(text, lim);
  if (!parsed.ok()) return 0;
  check_one(mcprt::check_elicitation_answer(parsed.value));
  check_one(mcprt::check_sampling_answer(parsed.value));
  auto shown = mcprt::bounded_host_params(parsed.value, 256);
  if (!shown.is_object()) __builtin_trap();
  auto dumped = mcprt::dump_json(shown);
  if (shown.contains("truncated")) {
    if (dumped.size() > 256 + mcprt::max_host_text_bytes * 6 + 64) __builtin_trap();
  } else if (dumped.size() > 256) {
    __builtin_trap();
  }
  return 0;
}
