#include "cli/host_requests.hpp"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "cli/daemon_file.hpp"
#include "core/host_answer.hpp"
#include "core/untrusted_text.hpp"

namespace mcprt::cli {

using nlohmann::json;
using clock_type = std::chrono::steady_clock;

namespace {

const char* name_of(host_request_kind k) {
  return k == host_request_kind::elicitation ? "elicitation" : "sampling";
}

/// The code of every refusal the daemon sends for the host (the spec's
/// example for a user who rejects a sampling request).
constexpr int refusal_code = -1;

/// What a request that gets no answer over HTTP gets.
void answer_unasked(host_request_kind kind, const host_responder& r, const std::string& why) {
  if (kind == host_request_kind::elicitation) r.answer(json{{"action", "decline"}});
  else r.fail(refusal_code, why);
}

} // namespace

struct host_requests::impl {
  struct parked {
    host_request_kind kind;
    std::string runtime_id; // the runtime's id: withdrawals name it
    host_responder responder;
    clock_type::time_point deadline;
    event_payload announce;
  };

  host_requests_options opts;
  mutable std::mutex mtx;
  std::condition_variable cv;
  std::map<std::string, parked> waiting;                 // by our id
  std::unordered_map<std::string, std::string> by_runtime_id; // runtime id -> our id
  std::deque<std::string> ended_order;
  std::unordered_map<std::string, std::pair<host_request_kind, std::string>> ended; // id -> kind, outcome
  std::function<void(event_payload)> publish;
  bool stopped = false;
  std::thread timer;

  explicit impl(host_requests_options o) : opts(std::move(o)) {}

  /// Under mtx.
  void remember(const std::string& id, host_request_kind kind, std::string outcome) {
    ended[id] = {kind, std::move(outcome)};
    ended_order.push_back(id);
    while (ended_order.size() > opts.remembered) {
      ended.erase(ended_order.front());
      ended_order.pop_front();
    }
  }

  /// Under mtx: takes request `id` out and remembers how it ended.
  std::optional<parked> take(const std::string& id, const std::string& outcome) {
    auto it = waiting.find(id);
    if (it == waiting.end()) return std::nullopt;
    auto p = std::move(it->second);
    waiting.erase(it);
    by_runtime_id.erase(p.runtime_id);
    remember(id, p.kind, outcome);
    return p;
  }

  /// Not under mtx.
  void announce(event_payload p) {
    std::function<void(event_payload)> f;
    {
      std::lock_guard<std::mutex> guard{mtx};
      f = publish;
    }
    if (f) f(std::move(p));
  }

  void announce_end(const std::string& id, host_request_kind kind, const std::string& outcome) {
    announce(events::host_request_ended{id, name_of(kind), outcome});
  }

  void park(host_request_kind kind, server_request req, host_responder r) {
    auto id = new_instance_id();
    std::optional<events::host_call> call;
    if (req.call) call = events::host_call{req.call->session, req.call->tool, req.call->call_id};
    json_value params{bounded_host_params(req.params)};
    event_payload ev = kind == host_request_kind::elicitation
                         ? event_payload{events::elicitation_requested{id, req.server, std::move(params), call}}
                         : event_payload{events::sampling_requested{id, req.server, std::move(params), call}};
    std::function<void(event_payload)> f;
    {
      std::unique_lock<std::mutex> lock{mtx};
      if (stopped || waiting.size() >= opts.max_pending) {
        bool full = !stopped;
        lock.unlock();
        if (full)
          spdlog::warn("host: {} request of {} answered at once: {} requests wait already", name_of(kind),
                       escape_for_display(req.server), opts.max_pending);
        answer_unasked(kind, r, stopped ? "the daemon is stopping" : "too many requests wait for the host");
        return;
      }
      by_runtime_id[req.id] = id;
      waiting.emplace(id, parked{kind, req.id, std::move(r), clock_type::now() + opts.timeout, ev});
      f = publish;
      cv.notify_all();
    }
    spdlog::info("host: {} request {} of {} waits for an answer over HTTP", name_of(kind), id,
                 escape_for_display(req.server));
    if (f) f(std::move(ev));
  }

  void withdraw(const std::string& runtime_id) {
    std::optional<parked> p;
    std::string id;
    {
      std::lock_guard<std::mutex> guard{mtx};
      auto it = by_runtime_id.find(runtime_id);
      if (it == by_runtime_id.end()) return;
      id = it->second;
      p = take(id, "withdrawn");
    }
    if (p) announce_end(id, p->kind, "withdrawn");
  }

  void run_timer() {
    std::unique_lock<std::mutex> lock{mtx};
    while (!stopped) {
      auto next = clock_type::time_point::max();
      for (auto& [id, p] : waiting)
        next = std::min(next, p.deadline);
      if (next == clock_type::time_point::max()) cv.wait(lock);
      else cv.wait_until(lock, next);
      if (stopped) return;
      auto now = clock_type::now();
      std::vector<std::pair<std::string, parked>> due;
      for (auto it = waiting.begin(); it != waiting.end();)
        if (it->second.deadline <= now) {
          by_runtime_id.erase(it->second.runtime_id);
          remember(it->first, it->second.kind, "timed_out");
          due.emplace_back(it->first, std::move(it->second));
          it = waiting.erase(it);
        } else {
          ++it;
        }
      if (due.empty()) continue;
      auto f = publish;
      lock.unlock();
      for (auto& [id, p] : due) {
        spdlog::info("host: {} request {} got no answer within {} ms", name_of(p.kind), id, opts.timeout.count());
        answer_unasked(p.kind, p.responder, "the host did not answer within " + std::to_string(opts.timeout.count()) + " ms");
        if (f) f(events::host_request_ended{id, name_of(p.kind), "timed_out"});
      }
      due.clear(); // responders go before the lock is taken again
      lock.lock();
    }
  }
};

host_requests::host_requests(host_requests_options opts) : impl_(std::make_shared<impl>(std::move(opts))) {
  impl_->timer = std::thread([p = impl_.get()] { p->run_timer(); });
}

host_requests::~host_requests() {
  stop();
}

host_handlers host_requests::handlers(bool elicitation, bool sampling) {
  host_handlers h;
  auto p = impl_;
  if (elicitation)
    h.elicitation = [p](server_request req, host_responder r) {
      p->park(host_request_kind::elicitation, std::move(req), std::move(r));
    };
  if (sampling)
    h.sampling = [p](server_request req, host_responder r) {
      p->park(host_request_kind::sampling, std::move(req), std::move(r));
    };
  h.withdrawn = [p](const std::string& id) { p->withdraw(id); };
  return h;
}

void host_requests::publish_through(std::function<void(event_payload)> publish) {
  std::vector<event_payload> parked_before;
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    impl_->publish = publish;
    for (auto& [id, p] : impl_->waiting)
      parked_before.push_back(p.announce);
  }
  if (publish)
    for (auto& ev : parked_before)
      publish(std::move(ev));
}

host_requests::answer_outcome host_requests::answer(host_request_kind kind, const std::string& id, const json& body) {
  answer_outcome out;
  std::optional<impl::parked> p;
  host_answer checked;
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    auto it = impl_->waiting.find(id);
    if (it == impl_->waiting.end() || it->second.kind != kind) {
      auto e = impl_->ended.find(id);
      if (e != impl_->ended.end() && e->second.first == kind) {
        out.status = answer_status::already_ended;
        out.message = std::string("this ") + name_of(kind) + " request has ended already (" + e->second.second + ")";
      } else {
        out.status = answer_status::unknown;
        out.message = std::string("no ") + name_of(kind) + " request waits under this id";
      }
      return out;
    }
    checked = kind == host_request_kind::elicitation ? check_elicitation_answer(body) : check_sampling_answer(body);
    if (!checked.error.empty()) {
      out.status = answer_status::bad_body;
      out.message = checked.error;
      return out;
    }
    p = impl_->take(id, "answered");
  }
  if (checked.result) p->responder.answer(std::move(*checked.result));
  else p->responder.fail(refusal_code, *checked.refusal);
  spdlog::info("host: {} request {} answered over HTTP", name_of(kind), id);
  impl_->announce_end(id, kind, "answered");
  out.status = answer_status::answered;
  return out;
}

std::size_t host_requests::pending() const {
  std::lock_guard<std::mutex> guard{impl_->mtx};
  return impl_->waiting.size();
}

void host_requests::stop() {
  std::vector<std::pair<std::string, impl::parked>> left;
  std::function<void(event_payload)> f;
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    impl_->stopped = true;
    for (auto& [id, p] : impl_->waiting) {
      impl_->remember(id, p.kind, "stopped");
      left.emplace_back(id, std::move(p));
    }
    impl_->waiting.clear();
    impl_->by_runtime_id.clear();
    f = impl_->publish;
    impl_->cv.notify_all();
  }
  if (impl_->timer.joinable() && impl_->timer.get_id() != std::this_thread::get_id()) impl_->timer.join();
  for (auto& [id, p] : left) {
    spdlog::info("host: {} request {} {}: the daemon stops", name_of(p.kind), id,
                 p.kind == host_request_kind::elicitation ? "declined" : "refused");
    answer_unasked(p.kind, p.responder, "the daemon stopped");
    if (f) f(events::host_request_ended{id, name_of(p.kind), "stopped"});
  }
}

} // namespace mcprt::cli
