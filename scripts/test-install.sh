#!/usr/bin/env bash
# Checks the installed package the way a C++ host uses it. Usage:
#   scripts/test-install.sh BUILD_DIR [EXPECTED_VERSION]
# BUILD_DIR is a complete build (scripts/build.sh). Everything happens in
# BUILD_DIR/test-install/, removed at the end:
#   1. cmake --install BUILD_DIR --prefix .../prefix, and no path of the build
#      or the source tree in the installed CMake package or mcprt.pc; the
#      headers are the facade's (mcprt/runtime.hpp and the value types it
#      includes, each of them included), and none of them declares an actor
#      interface but the two a host implements (host_actor,
#      event_subscriber_actor);
#   2. examples/embed configured as a project of its own (find_package(mcprt
#      0.2), mcprt::runtime) against that prefix, built, and run on a copy of
#      the bundled example workspace: exit 0, the servers connected, a tool
#      called, the snapshot's version, and the reaper running from the image
#      embedded in the installed libmcprt_io.a (its exe is a memfd);
#   3. examples/embed/main.cpp compiled and linked with nothing but
#      `pkg-config --cflags --libs mcprt`, and run.
# ctest runs it as install.embed (plain builds only; CMakeLists.txt says why).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: test-install.sh BUILD_DIR [EXPECTED_VERSION]}" && pwd)
expected_version=${2:-}
work="$build/test-install"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

fail() {
  echo "test-install: FAIL: $*" >&2
  exit 1
}

cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
[[ -n $cxx ]] || fail "no CMAKE_CXX_COMPILER in $build/CMakeCache.txt"
launcher=()
command -v ccache >/dev/null && launcher=(ccache)
# As the main build's launcher does: paths relative to the checkout, so that
# a clone elsewhere reuses these two compiles from the cache.
export CCACHE_BASEDIR=$here CCACHE_NOHASHDIR=1

echo "== cmake --install"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
libdir=$(dirname "$(find "$prefix" -name libmcprt_runtime.a -print -quit)")
[[ -f $libdir/libmcprt_runtime.a ]] || fail "no libmcprt_runtime.a under $prefix"
for f in mcprt/runtime.hpp mcprt/version.hpp; do
  [[ -f $prefix/include/$f ]] || fail "$f is not installed"
done
# The installed API is the facade: every installed header is reached from
# mcprt/runtime.hpp (or is mcprt/owner_tls.hpp, which a host of a remote node
# includes itself), every header they include is installed, and the only
# actor interfaces in them are those a host implements.
(cd "$prefix/include" && find . -type f -name '*.hpp' | sed 's|^\./||' | sort) >"$work/installed"
reached=$(mktemp -p "$work")
queue=(mcprt/runtime.hpp mcprt/owner_tls.hpp mcprt/version.hpp)
while ((${#queue[@]})); do
  h=${queue[0]}
  queue=("${queue[@]:1}")
  grep -qxF "$h" "$reached" && continue
  echo "$h" >>"$reached"
  [[ -f $prefix/include/$h ]] || fail "$h is included by an installed header but not installed"
  while read -r inc; do queue+=("$inc"); done < <(sed -n 's/^#include "\(.*\)"$/\1/p' "$prefix/include/$h")
done
sort -o "$reached" "$reached"
unreached=$(comm -23 "$work/installed" "$reached")
[[ -z $unreached ]] || fail "installed but not part of the facade: $unreached"
actors=$(grep -rhoE 'using [a-z_]+ = caf::typed_actor' "$prefix/include" | awk '{print $2}' | sort -u | tr '\n' ' ')
[[ $actors == "event_subscriber_actor host_actor " ]] ||
  fail "the installed headers declare actor interfaces a host never implements: $actors"
echo "installed headers: $(wc -l <"$work/installed") (the facade and its values)"

# The package must be relocatable: no path of this checkout or its build.
if grep -rnF -e "$build" -e "$here" "$libdir/cmake" "$libdir/pkgconfig" "$prefix/include"; then
  fail "the installed package names the build or the source tree (above)"
fi
# (grep reads all of nm's output: with -q, nm's SIGPIPE would fail the pipe.)
has_image=0
if nm -g --defined-only "$libdir/libmcprt_io.a" | grep ' mcprt_reaper_image_begin$' >/dev/null; then
  has_image=1
else
  echo "note: libmcprt_io.a has no embedded reaper image (MCPRT_REAPER_IMAGE=OFF)"
fi

# Runs a host binary on a fresh copy of the example workspace and checks what
# it printed. $1: a name for its files, then the binary.
run_host() {
  local name=$1 bin=$2
  rm -rf "$work/examples"
  cp -r "$here/examples" "$work/examples"
  local out="$work/$name.out"
  PATH="$build/bin:$PATH" "$bin" --workspace "$work/examples/workspace" --home "$work/examples/home" \
    --wait-connected 2 --call echo echo '{"text":"from the installed package"}' --run-ms 500 >"$out" 2>&1 &
  local pid=$! reaper_exe=""
  # The reaper is a child of the host; with the embedded image its exe is
  # the memfd it was executed from, not the host's own binary.
  while kill -0 "$pid" 2>/dev/null; do
    for child in $(pgrep -P "$pid" 2>/dev/null); do
      if [[ $(cat "/proc/$child/comm" 2>/dev/null) == mcprt-reaper ]]; then
        reaper_exe=$(readlink "/proc/$child/exe" 2>/dev/null || true)
        [[ -n $reaper_exe ]] && break
      fi
    done
    [[ -n $reaper_exe ]] && break
    sleep 0.1
  done
  local rc=0
  wait "$pid" || rc=$?
  [[ $rc == 0 ]] || { cat "$out"; fail "$name exited with $rc"; }
  grep -q '"status":"connected"' "$out" || { cat "$out"; fail "$name: no server connected"; }
  grep -q '^result .*from the installed package' "$out" || { cat "$out"; fail "$name: no tool result"; }
  if [[ -n $expected_version ]]; then
    grep -q "^snapshot .*\"version\":\"$expected_version\"" "$out" \
      || { cat "$out"; fail "$name: the snapshot does not carry version $expected_version"; }
  fi
  # (Unless the system refuses to execute a memfd: then the reaper is a
  # forked child of the host, docs/connections.md.)
  if [[ $has_image == 1 && $(cat /proc/sys/vm/memfd_noexec 2>/dev/null || echo 0) != 2 ]]; then
    [[ $reaper_exe == /memfd:mcprt-reaper* ]] \
      || { cat "$out"; fail "$name: the reaper did not run from the embedded image (exe '${reaper_exe}')"; }
  fi
  echo "$name: ok (reaper exe: ${reaper_exe:-not seen})"
}

echo "== examples/embed as an outside CMake project"
cmake -S "$here/examples/embed" -B "$work/embed" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER=ccache} >"$work/configure.log" 2>&1 \
  || { cat "$work/configure.log"; fail "configuring examples/embed against the install"; }
cmake --build "$work/embed" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building examples/embed"; }
run_host cmake-host "$work/embed/mcprt-embed-example"

echo "== examples/embed/main.cpp with pkg-config"
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs mcprt) || fail "pkg-config mcprt"
echo "pkg-config --cflags --libs mcprt: $flags"
# Compiled and linked apart: ccache caches the compile only.
# shellcheck disable=SC2086 # the flags split into words on purpose
"${launcher[@]}" "$cxx" -std=c++17 -c "$here/examples/embed/main.cpp" -o "$work/pc-host.o" $flags \
  || fail "compiling with pkg-config's flags"
# shellcheck disable=SC2086
"$cxx" "$work/pc-host.o" -o "$work/pc-host" $flags || fail "linking with pkg-config's flags"
run_host pkg-config-host "$work/pc-host"
echo "test-install: ok"
