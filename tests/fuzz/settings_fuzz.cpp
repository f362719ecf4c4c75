// Settings files come from whoever wrote the repository: any bytes must
// give a document or a settings_error, and whatever is reported must be
// printable as JSON (the daemon sends it in events and `explain --json`).

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/settings.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (auto scope : {mcprt::config_scope::user, mcprt::config_scope::project}) {
    auto doc = mcprt::parse_settings_text("fuzz.json", scope, text);
    nlohmann::json shown{{"content", doc.content}};
    if (doc.error) shown["error"] = {{"line", doc.error->line}, {"column", doc.error->column}, {"message", doc.error->message}};
    (void)shown.dump();
  }
  return 0;
}
