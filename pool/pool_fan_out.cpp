#include "pool/pool_fan_out.hpp"

#include <algorithm>
#include <iterator>
#include <memory>
#include <utility>

#include <caf/all.hpp>

#include "messages/pool.hpp"

namespace mcprt {

namespace {

/// Asks every shard the same request, merges the answers with `merge` and
/// answers the original requester once; then quits.
template <class T, class Merge, class... Ts>
caf::result<T> ask_every_shard(caf::event_based_actor* self, const std::vector<pool_actor>& shards, Merge merge,
                               const Ts&... xs) {
  struct progress {
    T value;
    std::size_t pending = 0;
    caf::error first_error;
    caf::typed_response_promise<T> rp;
  };
  auto p = std::make_shared<progress>();
  p->pending = shards.size();
  p->rp = self->make_response_promise<T>();
  auto done = [self, p] {
    if (--p->pending != 0) return;
    if (p->first_error)
      p->rp.deliver(std::move(p->first_error));
    else
      p->rp.deliver(std::move(p->value));
    self->quit();
  };
  for (auto& shard : shards)
    self->request(shard, caf::infinite, xs...)
      .then([p, merge, done](T& part) { merge(p->value, part), done(); },
            [p, done](caf::error& e) {
              if (!p->first_error) p->first_error = std::move(e);
              done();
            });
  return p->rp;
}

/// A one-shot actor that answers one request concerning every shard.
caf::behavior every_shard(caf::event_based_actor* self, std::vector<pool_actor> shards) {
  return {
    [self, shards](atom::snapshot) {
      return ask_every_shard<pool_snapshot>(
        self, shards,
        [](pool_snapshot& all, pool_snapshot& part) {
          // Each shard answers sorted by id: merging keeps the whole sorted.
          auto& xs = all.entries;
          auto mid = static_cast<std::ptrdiff_t>(xs.size());
          xs.insert(xs.end(), std::make_move_iterator(part.entries.begin()), std::make_move_iterator(part.entries.end()));
          std::inplace_merge(xs.begin(), xs.begin() + mid, xs.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
          all.subprocess_count += part.subprocess_count;
          all.draining = all.draining || part.draining;
        },
        atom::snapshot_v);
    },
    [self, shards](atom::release_session, session_id session) {
      return ask_every_shard<uint64_t>(
        self, shards, [](uint64_t& all, uint64_t part) { all += part; }, atom::release_session_v, session);
    },
    [self, shards](atom::drain, bool force, caf::timespan timeout) {
      return ask_every_shard<drain_result>(
        self, shards,
        [](drain_result& all, drain_result& part) {
          all.drained += part.drained;
          all.forced += part.forced;
          all.errors.insert(all.errors.end(), part.errors.begin(), part.errors.end());
        },
        atom::drain_v, force, timeout);
    },
  };
}

} // namespace

caf::actor pool_fan_out(caf::actor_system& sys, const std::vector<caf::actor>& workers) {
  std::vector<pool_actor> shards;
  for (auto& w : workers)
    shards.push_back(caf::actor_cast<pool_actor>(w));
  return sys.spawn(every_shard, std::move(shards));
}

} // namespace mcprt
