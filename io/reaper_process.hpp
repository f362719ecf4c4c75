#pragma once

// The reaper process itself (the runtime's side is io/reaper.hpp). It is
// compiled twice: into mcprt_io, where it runs in a child forked from the
// runtime, and into its own small static image (io/reaper_image/), which
// the runtime executes from a memfd. Either way it runs system calls and
// static buffers only: no allocation, no locks, no exceptions.

namespace mcprt::io::detail {

/// Becomes the reaper: a child subreaper that makes every server on
/// request, reports their exits, signals their process groups, and kills
/// every descendant when the runtime goes away (its socket closes, its
/// spawning thread dies, or it asks) before exiting. `control` is the
/// reaper's end of the SOCK_SEQPACKET socket; `mode` is a
/// reaper_protocol::reaper_mode, reported in the hello message.
[[noreturn]] void run_reaper(int control, int mode);

/// Set before a reaper is forked (reaper_start::fork), that reaper finds its
/// children by scanning /proc, as on a kernel without
/// /proc/<pid>/task/<tid>/children. For tests of that path only.
extern bool force_proc_scan_for_tests;

} // namespace mcprt::io::detail
