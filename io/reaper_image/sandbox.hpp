#pragma once

// The sandbox's two entry points in the reaper's image (sandbox.cpp).
namespace mcprt::sandbox_image {

/// `mcprt-sandbox sandbox [options] -- PATH ARGV0 ARGS...`: never returns
/// on success (it becomes the sandbox's outer process); returns an exit
/// code on bad arguments.
int run_sandbox(int argc, char** argv, char** envp);

/// `mcprt-sandbox sandbox-probe`: prints what this machine allows.
int run_probe();

} // namespace mcprt::sandbox_image
