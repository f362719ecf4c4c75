#!/usr/bin/env bash
# Sets up, builds, and runs mcprt's main job on the bundled example workspace.
# Until the daemon lands, the main job is `mcprt explain`: what would run, and why.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup.sh"
"$here/scripts/build.sh" "$here/build"
ws="$here/examples/workspace"
export PATH="$here/build/bin:$PATH"
exec mcprt explain --workspace "$ws" --home "$here/examples/home" "$@"
