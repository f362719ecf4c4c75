#include "pool/connection_stop.hpp"

#include <chrono>
#include <memory>

#include <caf/all.hpp>

namespace mcprt {

connection_stopper::~connection_stopper() {
  for (auto& [id, conn] : stopping_)
    caf::anon_send_exit(conn, caf::exit_reason::user_shutdown);
}

void connection_stopper::hold(const connection_actor& conn) {
  if (conn) stopping_.emplace(conn.id(), conn);
}

void connection_stopper::forget(const connection_actor& conn) {
  stopping_.erase(conn.id());
}

// The callbacks below capture `this`: they run only while the pool lives,
// and the stopper lives as long as the pool's state.

void connection_stopper::stop(pool_actor::pointer self, connection_actor conn, caf::timespan timeout) {
  if (!conn) return;
  hold(conn);
  self->request(conn, timeout, atom::stop_v)
    .then([this, conn](bool) { forget(conn); },
          [this, self, conn](caf::error&) {
            self->send_exit(conn, caf::exit_reason::kill);
            forget(conn);
          });
}

namespace {

struct stop_progress {
  caf::typed_response_promise<drain_result> rp;
  drain_result result;
  std::size_t pending = 1; // released after every stop was sent

  void done() {
    if (--pending == 0) rp.deliver(std::move(result));
  }
};

} // namespace

caf::typed_response_promise<drain_result>
connection_stopper::stop_all(pool_actor::pointer self, std::vector<std::pair<std::string, connection_actor>> conns,
                             uint64_t already_stopped, bool force, caf::timespan timeout) {
  if (timeout <= caf::timespan::zero()) timeout = std::chrono::hours(24);
  auto progress = std::make_shared<stop_progress>();
  progress->rp = self->make_response_promise<drain_result>();
  progress->result.drained = already_stopped;
  for (auto& [id, conn] : conns) {
    if (!conn) {
      ++progress->result.drained;
      continue;
    }
    ++progress->pending;
    hold(conn);
    self->request(conn, timeout, atom::stop_v)
      .then(
        [this, progress, conn = conn](bool) {
          forget(conn);
          ++progress->result.drained, progress->done();
        },
        [this, self, progress, conn = conn, id = std::move(id), force](caf::error& err) {
          if (err == caf::sec::request_receiver_down) {
            ++progress->result.drained; // already gone
            forget(conn);
          } else if (err == caf::sec::request_timeout && force) {
            self->send_exit(conn, caf::exit_reason::kill);
            ++progress->result.forced;
            forget(conn);
          } else {
            // Left in care: if the pool ends, the connection goes with it.
            progress->result.errors.push_back(id + ": " + to_string(err));
          }
          progress->done();
        });
  }
  auto rp = progress->rp;
  progress->done();
  return rp;
}

} // namespace mcprt
