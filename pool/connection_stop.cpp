#include "pool/connection_stop.hpp"

#include <chrono>
#include <memory>

#include <caf/all.hpp>

namespace mcprt {

void stop_connection(pool_actor::pointer self, connection_actor conn, caf::timespan timeout) {
  if (!conn) return;
  self->request(conn, timeout, atom::stop_v).then([](bool) {}, [self, conn](caf::error&) {
    self->send_exit(conn, caf::exit_reason::kill);
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
stop_connections(pool_actor::pointer self, std::vector<std::pair<std::string, connection_actor>> conns,
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
    self->request(conn, timeout, atom::stop_v)
      .then([progress](bool) { ++progress->result.drained, progress->done(); },
            [self, progress, conn = conn, id = std::move(id), force](caf::error& err) {
              if (err == caf::sec::request_receiver_down) {
                ++progress->result.drained; // already gone
              } else if (err == caf::sec::request_timeout && force) {
                self->send_exit(conn, caf::exit_reason::kill);
                ++progress->result.forced;
              } else {
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
