#pragma once

#include <chrono>
#include <filesystem>

#include <caf/fwd.hpp>

#include "core/workspace_view.hpp"
#include "messages/hot_reload.hpp"

namespace mcprt {

struct gating_options {
  workspace_options workspace;
  /// Where approval decisions live (approvals_store::default_path).
  std::filesystem::path approvals_file;
  /// Where the values of `${input:ID}` live (input_store::default_path);
  /// empty: no input has a value. Watched with the approvals file.
  std::filesystem::path inputs_file;
  /// Where the definitions pinned at approval live; empty:
  /// `mcp-definitions.json` beside the approvals file. Watched with it.
  std::filesystem::path pins_file;
  /// Watch the store's directory with inotify, so that decisions written by
  /// another process (`mcprt approve --home`, another daemon) take effect
  /// (the runtime turns it on with `runtime_options::watch`). Off by
  /// default: deterministic tests inject `fs_event` themselves, and a
  /// callback from the inotify thread would race their test coordinator.
  bool watch_approvals = false;
  /// Trailing debounce of store events.
  std::chrono::milliseconds debounce{300};
};

/// Spawns the gating actor, which decides which configured servers may run.
/// It owns the launch bound, the
/// trust flag, the approvals store and the current gating (the model is
/// core/workspace_gating). On each settings update it assembles the scopes,
/// recomputes gating and applies the change gate: when neither the merged
/// servers nor the gating lists changed (and the update is not a forced
/// reload), nothing happens. Otherwise every attached session gets its new
/// `desired_state` (the lists travel in it, so they are in place before the
/// reconcile that follows) and then a `reconcile` request. A session's
/// first state is whole; after it, a session with no servers of its own
/// gets deltas (only the servers whose version moved, and the names no
/// longer admitted; see desired_state).
///
/// `approve` / `reject` persist the decision for the server's current config
/// hash and reconcile every session. Decisions written to the store by
/// others arrive as `fs_event`s (the actor watches the store's directory):
/// after the debounce it re-reads the store and, only when the decision of
/// some configured server changed, pushes every session its new state and a
/// reconcile. Its own writes therefore cost one re-read and nothing more. Sessions are monitored and forgotten
/// when they die. A session attached before `start` gets its state but no
/// pass runs until `start`.
///
/// Definitions pinned at approval (core/definition_pins): every session
/// gets each server's `definition_pin_state` (whether it is pinned, and
/// its pins) when it attaches and whenever it changes. A session reports
/// the listings it sees (`definitions_offered`): the first after an
/// approval is stored as the pins; one that differs is stored as held back
/// and published once as `definitions_changed`. A decision forgets the
/// server's pins, so that its next listing is pinned.
gating_actor spawn_gating(caf::actor_system& sys, gating_options opts, event_bus_actor bus);

} // namespace mcprt
