#pragma once

// The daemon as host: what a server's sampling / elicitation
// request shows on the event stream, and what an HTTP client's answer to
// it must look like before it goes back to the server. Pure logic: the
// daemon's request table (cli/host_requests) calls it.

#include <cstddef>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace mcprt {

/// The largest `params` an event carries (its JSON text); a larger one is
/// cut (see bounded_host_params).
inline constexpr std::size_t max_host_params_bytes = 64 * 1024;
/// The longest text kept of a cut request's `message` and of a refusal.
inline constexpr std::size_t max_host_text_bytes = 4096;

/// A server's params as an event shows them: unchanged when their JSON
/// text is at most `max_bytes`; otherwise {"truncated": true, "bytes": N}
/// with the request's `message` (when a string) cut to
/// max_host_text_bytes, so a UI can still say what was asked. A params
/// value that is not an object is shown as an empty object.
nlohmann::json bounded_host_params(const nlohmann::json& params, std::size_t max_bytes = max_host_params_bytes);

/// What an HTTP client's answer comes to. Exactly one is set: `result`
/// (answer the server with it), `refusal` (fail the server's request with
/// this message) or `error` (the body is bad: nothing is answered).
struct host_answer {
  std::optional<nlohmann::json> result;
  std::optional<std::string> refusal;
  std::string error;
};

/// An ElicitResult: {"action": "accept"|"decline"|"cancel", "content": {...}}.
/// `content` must be an object of at most 256 fields, each a string, a
/// number, a boolean or an array of at most 256 strings (the spec's flat
/// form); it is passed on with `accept` only.
host_answer check_elicitation_answer(const nlohmann::json& body);

/// A CreateMessageResult ({"role", "content", "model"[, "stopReason"]}:
/// role "assistant" or "user", content an object or an array of objects,
/// model a string), or {"error": {"message": TEXT}} to refuse the request.
host_answer check_sampling_answer(const nlohmann::json& body);

} // namespace mcprt
