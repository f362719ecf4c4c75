#include "mcprt/remote_link.hpp"

#include <caf/all.hpp>

namespace mcprt {

namespace {

remote_host_actor::behavior_type remote_link(remote_host_actor::pointer self, workspace_node_actor node,
                                             std::function<void(const std::string&)> on_gone) {
  self->monitor(node);
  self->set_down_handler([self, on_gone](caf::down_msg& dm) {
    if (on_gone) on_gone(self->system().render(dm.reason));
    self->quit();
  });
  return {
    [](atom::ping) {},
  };
}

} // namespace

remote_host_actor spawn_remote_link(caf::actor_system& sys, workspace_node_actor node,
                                    std::function<void(const std::string& reason)> on_gone) {
  return sys.spawn(remote_link, std::move(node), std::move(on_gone));
}

} // namespace mcprt
