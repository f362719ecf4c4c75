#!/usr/bin/env bash
# Installs everything mcprt needs to build and test on Debian 12: the Debian
# packages (idempotent, silent when all are present) and the npm MCP servers
# the tests talk to. Safe to run again and again.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

packages=(
  g++ cmake ninja-build make pkg-config ccache lld
  libcaf-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev
  libcli11-dev libcpp-httplib-dev libmicrohttpd-dev libssl-dev libjemalloc-dev
  libcurl4-openssl-dev nghttp2-proxy libseccomp-dev
  procps curl openssl python3 patch
  clang clang-format libclang-rt-14-dev llvm
)

# One dpkg-query for all packages: one per package made a second run of
# this script take seconds.
missing=()
# dpkg-query exits 1 when a package was never installed; with pipefail that
# would end this script silently on exactly the machine that needs it.
installed=$({ dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2>/dev/null || true; } | awk '/install ok installed$/ { print $1 }')
for p in "${packages[@]}"; do
  grep -qx -- "$p" <<<"$installed" || missing+=("$p")
done
if ! command -v node >/dev/null 2>&1; then missing+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Real MCP servers for the integration tests, pinned by the committed lock file.
peers="$here/tests/peers"
# The stamp holds the lock file's hash, not a time: a git worktree checks the
# lock file out later than the stamp was written, and must not reinstall.
stamp="$peers/node_modules/.mcprt-installed"
lock_hash=$(sha256sum "$peers/package-lock.json" | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$lock_hash" ]]; then
  if [[ -L $peers/node_modules ]]; then
    # npm ci empties the directory a symlink points to (another checkout's).
    echo "setup: tests/peers/node_modules is a symlink whose peers do not match package-lock.json;" \
         "run 'npm ci' where it points" >&2
  else
    echo "setup: installing npm test peers into tests/peers/node_modules"
    (cd "$peers" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$lock_hash" > "$stamp"
  fi
fi

# The official MCP conformance suite (tests/conformance/): 0.1.16, and the
# 0.2.0-alpha.12 prerelease for MCP 2026-07-28 under the npm alias
# conformance-next; with the Node 22 they need (Debian's Node 20 lacks
# fs.globSync). All pinned by the committed lock file and installed with one
# npm ci; stamped like the peers above, so a changed lock installs again.
conformance="$here/tests/conformance"
stamp="$conformance/node_modules/.mcprt-installed"
lock_hash=$(sha256sum "$conformance/package-lock.json" | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$lock_hash" ]]; then
  if [[ -L $conformance/node_modules ]]; then
    echo "setup: tests/conformance/node_modules is a symlink whose packages do not match package-lock.json;" \
         "run 'npm ci' where it points" >&2
  else
    echo "setup: installing the MCP conformance suite into tests/conformance/node_modules"
    (cd "$conformance" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$lock_hash" > "$stamp"
  fi
fi
