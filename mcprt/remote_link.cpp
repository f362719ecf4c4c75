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

caf::error only_on_the_node(const char* what) {
  return make_error(errc::bad_request, std::string{what} + " is the workspace node's own, not a remote host's");
}

reconciler_actor::behavior_type remote_session(reconciler_actor::pointer self, workspace_node_actor node,
                                               std::string session) {
  return {
    [](desired_state&) {},
    [](atom::reconcile) {},
    [](atom::start) {},
    // A remote runtime's broker hands its calls to the node whole.
    [](atom::lookup, std::string&, std::string&) -> caf::result<connection_actor> {
      return only_on_the_node("a session's connection");
    },
    [self, node, session](atom::tools, std::string& server) {
      return self->delegate(node, atom::tools_v, session, std::move(server));
    },
    [self, node, session](atom::info, std::string& server) {
      return self->delegate(node, atom::info_v, session, std::move(server));
    },
    [self, node, session](atom::snapshot) { return self->delegate(node, atom::snapshot_v, session); },
    // The runtime closes the session at the node; this view just ends.
    [self](atom::stop) {
      self->quit();
      return true;
    },
    [](pool_entry_changed&) {},
    [](budget_slot_freed&) {},
    // The node's own sessions filter by its pins.
    [](definition_pin_state&) {},
    [](atom::requeue) {},
  };
}

gating_actor::behavior_type remote_gating(gating_actor::pointer self, workspace_node_actor node) {
  return {
    [](settings_update&) {},
    [self, node](atom::approve, std::string& name) { return self->delegate(node, atom::approve_v, std::move(name)); },
    [self, node](atom::reject, std::string& name) { return self->delegate(node, atom::reject_v, std::move(name)); },
    [self, node](atom::reason, std::string& name) { return self->delegate(node, atom::reason_v, std::move(name)); },
    [](atom::config, std::string&) -> caf::result<server_config> {
      return only_on_the_node("a server's admitted config");
    },
    [](atom::attach, reconciler_actor&, std::vector<server_config>&) {},
    [](atom::detach, reconciler_actor&) {},
    [](atom::start) {},
    [](atom::fs_event, std::string&) {},
    [](atom::debounce, uint64_t) {},
    [self, node](atom::snapshot) { return self->delegate(node, atom::gating_v); },
    [](definitions_offered&) {},
  };
}

watcher_actor::behavior_type remote_watcher(watcher_actor::pointer self, workspace_node_actor node) {
  return {
    [](atom::fs_event, std::string&) {},
    [self, node](atom::reload) { return self->delegate(node, atom::reload_v); },
    [](atom::snapshot) -> caf::result<std::vector<settings_file>> {
      return only_on_the_node("the settings files' content");
    },
    [](atom::debounce, uint64_t) {},
  };
}

event_bus_actor::behavior_type remote_bus(event_bus_actor::pointer self, workspace_node_actor node) {
  return {
    // A host's events are not the node's to show its other clients.
    [](atom::publish, event_payload&) {},
    [self, node](atom::subscribe, event_subscriber_actor& sink, std::vector<event_kind>& kinds) {
      return self->delegate(node, atom::subscribe_v, std::move(sink), std::move(kinds));
    },
    [self, node](atom::unsubscribe, event_subscriber_actor& sink) { self->send(node, atom::unsubscribe_v, std::move(sink)); },
    [self, node](atom::replay, uint64_t after) { return self->delegate(node, atom::replay_v, after); },
  };
}

} // namespace

reconciler_actor spawn_remote_session(caf::actor_system& sys, workspace_node_actor node, std::string session) {
  return sys.spawn(remote_session, std::move(node), std::move(session));
}

gating_actor spawn_remote_gating(caf::actor_system& sys, workspace_node_actor node) {
  return sys.spawn(remote_gating, std::move(node));
}

watcher_actor spawn_remote_watcher(caf::actor_system& sys, workspace_node_actor node) {
  return sys.spawn(remote_watcher, std::move(node));
}

event_bus_actor spawn_remote_bus(caf::actor_system& sys, workspace_node_actor node) {
  return sys.spawn(remote_bus, std::move(node));
}

remote_host_actor spawn_remote_link(caf::actor_system& sys, workspace_node_actor node,
                                    std::function<void(const std::string& reason)> on_gone) {
  return sys.spawn(remote_link, std::move(node), std::move(on_gone));
}

} // namespace mcprt
