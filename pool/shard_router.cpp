#include "pool/shard_router.hpp"

#include <utility>

#include <caf/all.hpp>

namespace mcprt {
namespace {

/// What caf::anon_send_exit does, for any error as the reason.
void send_exit(caf::abstract_actor& to, const caf::actor_addr& source, const caf::error& reason) {
  to.enqueue(nullptr, caf::make_message_id(caf::message_priority::high),
             caf::make_message(caf::exit_msg{source, reason}), nullptr);
}

class shard_router final : public caf::monitorable_actor {
public:
  shard_router(caf::actor_config& cfg, std::vector<caf::actor> shards, shard_route route, shard_fan_out fan_out)
    : caf::monitorable_actor(cfg), shards_(std::move(shards)), route_(route), fan_out_(fan_out) {
    // Counted as running, so that the system's shutdown waits for it.
    register_at_system();
  }

  const char* name() const override {
    return "mcprt.shard_router";
  }

  // Runs on the sender's thread, concurrently with other senders: reads only
  // what the constructor wrote. After the router stopped, messages still go
  // to the shards, whose closed mailboxes bounce requests with an error.
  void enqueue(caf::mailbox_element_ptr what, caf::execution_unit* eu) override {
    auto& content = what->content();
    if (content.size() == 1) {
      // By CAF's type numbers: a custom type's check compares type names,
      // which the hot path's one-struct messages would pay twice.
      auto nr = content.type(0).first;
      if (nr == caf::type_nr<caf::exit_msg>::value) {
        stop(content.get_as<caf::exit_msg>(0).reason, eu);
        return;
      }
      // Never monitors anyone, so a down message is a stray.
      if (nr == caf::type_nr<caf::down_msg>::value) return;
    }
    if (auto target = route_(content, shards_.size())) {
      shards_[*target]->enqueue(std::move(what), eu);
      return;
    }
    auto asker = fan_out_(home_system(), shards_);
    caf::actor_cast<caf::abstract_actor*>(asker)->enqueue(std::move(what), eu);
  }

  void stop(const caf::error& reason, caf::execution_unit* eu) {
    // True only the first time: the shards hear of it once.
    if (!cleanup(caf::error{reason}, eu)) return;
    for (auto& shard : shards_)
      send_exit(*caf::actor_cast<caf::abstract_actor*>(shard), address(), reason);
    unregister_from_system();
  }

  void on_destroy() override {
    // The last handle went away without an exit message.
    if (!getf(is_cleaned_up_flag)) {
      cleanup(caf::exit_reason::unreachable, nullptr);
      caf::monitorable_actor::on_destroy();
      unregister_from_system();
    }
  }

private:
  const std::vector<caf::actor> shards_;
  const shard_route route_;
  const shard_fan_out fan_out_;
};

} // namespace

caf::actor spawn_shard_router(caf::actor_system& sys, std::vector<caf::actor> shards, shard_route route,
                              shard_fan_out fan_out) {
  caf::actor_config cfg{sys.dummy_execution_unit()};
  auto router = caf::make_actor<shard_router, caf::actor>(sys.next_actor_id(), sys.node(), &sys, cfg, shards,
                                                          route, fan_out);
  // A dead shard stops the router, which stops the other shards. Weak: the
  // shards must not keep their router alive.
  caf::weak_actor_ptr weak{caf::actor_cast<caf::strong_actor_ptr>(router).get()};
  for (auto& shard : shards)
    shard->attach_functor([weak](const caf::error& reason) {
      if (!reason || reason == caf::exit_reason::normal) return;
      if (auto r = weak.lock()) send_exit(*r->get(), caf::actor_addr{}, reason);
    });
  return router;
}

} // namespace mcprt
