// The reaper's own image: a small static program that the runtime executes
// from a memfd (io/reaper.cpp), so that the reaper maps nothing of the
// runtime. Built by CMakeLists.txt outside mcprt_io's glob, without
// sanitizers, and embedded into mcprt_io (io/reaper_image.cpp).
#include "core/reaper_protocol.hpp"
#include "io/reaper_process.hpp"

int main() {
  mcprt::io::detail::run_reaper(3, static_cast<int>(mcprt::reaper_protocol::reaper_mode::exec_image));
}
