#!/usr/bin/env bash
# Sets up, builds (only the daemon and the test server), and runs mcprt's
# main job on the bundled example workspace: the daemon (`mcprt serve`),
# until Ctrl-C. In another terminal, with
# build/bin on PATH: `mcprt status --workspace examples/workspace`, `mcprt
# events ...`, `mcprt approve project-tools ...`, `mcprt call echo echo ...`.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup.sh"
# Only what the demo runs, not the test suite: minutes less on a first build.
MCPRT_TARGET="mcprt mcprt-test-server" "$here/scripts/build.sh" "$here/build"
ws="$here/examples/workspace"
# The example servers run `mcprt-test-server` and the npm peers'
# `mcp-server-everything` (installed by setup.sh), both found through PATH.
export PATH="$here/build/bin:$here/tests/peers/node_modules/.bin:$PATH"
exec mcprt serve --workspace "$ws" --home "$here/examples/home" "$@"
