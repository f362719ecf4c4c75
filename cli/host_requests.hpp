#pragma once

// The daemon as host: servers' sampling and `ask` elicitation
// requests wait here for an answer over HTTP. Each request is parked under
// a fresh unguessable id and announced on the event bus
// (`elicitation_requested` / `sampling_requested`); `POST
// /workspace/mcp/elicitations/{id}` or `/sampling/{id}` answers it
// (cli/http_api). A request not answered within the timeout is declined
// (elicitation) or refused (sampling); when the daemon stops, every
// parked request is answered the same way. Each end is announced as
// `host_request_ended`, so a UI can drop its prompt.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "messages/events.hpp"
#include "mcprt/runtime.hpp"

namespace mcprt::cli {

enum class host_request_kind { elicitation, sampling };

struct host_requests_options {
  /// How long a request waits for its HTTP answer.
  std::chrono::milliseconds timeout{120000};
  /// Requests waiting at once; one more is declined / refused at once.
  std::size_t max_pending = 256;
  /// Ids of ended requests remembered, so a second answer gets 409.
  std::size_t remembered = 1024;
};

class host_requests {
public:
  explicit host_requests(host_requests_options opts);
  /// stop()s.
  ~host_requests();
  host_requests(const host_requests&) = delete;
  host_requests& operator=(const host_requests&) = delete;

  /// The handlers for runtime_options::host: elicitations when `elicitation`
  /// (the `ask` policy), sampling when `sampling`. They hold the table's
  /// state, not this object.
  host_handlers handlers(bool elicitation, bool sampling);

  /// Announces go out through `publish` from now on; requests parked before
  /// (the runtime started before the bus was known) are announced now.
  void publish_through(std::function<void(event_payload)> publish);

  enum class answer_status { answered, unknown, already_ended, bad_body };
  struct answer_outcome {
    answer_status status = answer_status::unknown;
    /// Why, for every status but `answered`.
    std::string message;
  };
  /// Answers request `id` of `kind` with an HTTP client's `body` (checked
  /// by core/host_answer). An id of the other kind is unknown.
  answer_outcome answer(host_request_kind kind, const std::string& id, const nlohmann::json& body);

  /// Requests waiting for an answer now.
  std::size_t pending() const;

  /// Declines / refuses every parked request and every later one, and ends
  /// the timer thread. Idempotent.
  void stop();

  struct impl;

private:
  std::shared_ptr<impl> impl_;
};

} // namespace mcprt::cli
