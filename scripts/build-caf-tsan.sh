#!/usr/bin/env bash
# Builds CAF 0.17.6 (core, io and openssl) with -fsanitize=thread into a prefix of its
# own, once per machine, and prints the prefix on stdout (progress goes to
# stderr). Debian's libcaf is not instrumented, so TSan cannot see the
# happens-before edges of CAF's mailboxes and scheduler; the TSan build of
# mcprt compiles and links against this prefix instead (scripts/test.sh --tsan).
#
#   scripts/build-caf-tsan.sh     build if needed, print the prefix
#
# MCPRT_CAF_TSAN_PREFIX overrides the prefix (default
# ${XDG_CACHE_HOME:-~/.cache}/mcprt/caf-0.17.6-tsan). A stamp file in the
# prefix records the recipe (source hash, compiler, flags); while it matches,
# a second run does nothing. The source is the Debian source package of the
# installed libcaf-dev (scripts/lib/debian-source.sh).
set -euo pipefail

caf_version=0.17.6
# The upstream tarball inside Debian's actor-framework 0.17.6 source package
# (its .dsc lists the same hash; apt checks it against the signed index too).
orig_sha256=e2bf5bd243f08bb7d8adde197cfe3e6d71314ed3378fe0692f8932f4c3b3928c
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mcprt
prefix=${MCPRT_CAF_TSAN_PREFIX:-$cache/caf-$caf_version-tsan}
cxx=${CXX:-g++}

say() { echo "build-caf-tsan: $*" >&2; }
die() { say "$*"; exit 1; }

# Debian's build of libcaf-dev (/usr/include/caf/detail/build_config.hpp):
# log level QUIET, exceptions on, runtime checks off, shared libraries. It is
# built as C++17 like mcprt, so that no inline code of CAF's headers is
# compiled under two standards in one program. -O1 and line tables, as the
# sanitizer builds of mcprt: frame pointers and line numbers for TSan's
# stacks, in about half the time of -O2 -g. The RPATH makes libcaf_io and
# libcaf_openssl find this prefix's libcaf_core, never Debian's. CMake's
# unity build compiles CAF's 184 files eight at a time: the whole build
# took 104 s of wall time here where it took about four minutes, and the
# code is the same (CAF's files compile together without an error).
cxx_flags="-std=c++17 -fsanitize=thread -fno-omit-frame-pointer"
cmake_args=(
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
  "-DCMAKE_CXX_FLAGS=$cxx_flags"
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
  -DCMAKE_INSTALL_LIBDIR=lib
  "-DCMAKE_INSTALL_RPATH=$prefix/lib"
  -DCAF_LOG_LEVEL=QUIET
  -DCAF_NO_EXAMPLES=yes -DCAF_NO_UNIT_TESTS=yes -DCAF_NO_TOOLS=yes
  -DCAF_NO_OPENCL=yes -DCAF_NO_PYTHON=yes
  -DCAF_NO_SUMMARY=yes
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8
)

command -v "$cxx" >/dev/null || die "no C++ compiler '$cxx' (run scripts/setup.sh)"
command -v cmake >/dev/null || die "no cmake (run scripts/setup.sh)"
recipe="caf $caf_version $orig_sha256
compiler $("$cxx" --version | head -n1)
cmake ${cmake_args[*]}"

stamp=$prefix/.mcprt-caf-tsan-stamp
if [[ -f $stamp && $(cat "$stamp") == "$recipe" ]]; then
  echo "$prefix"
  exit 0
fi

mkdir -p "$cache"
# Several checkouts may ask at once; the second waits and then finds the stamp.
exec 9>"$cache/caf-$caf_version-tsan.lock"
flock 9
if [[ -f $stamp && $(cat "$stamp") == "$recipe" ]]; then
  echo "$prefix"
  exit 0
fi

# A fixed path (the lock makes it ours), so that ccache can reuse objects of
# an interrupted build.
work=$cache/caf-$caf_version-tsan.work
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

# -- source: Debian's source package of the installed libcaf-dev ------------
source "$(dirname "$0")/lib/debian-source.sh"
ensure_commands patch=patch || die "cannot install patch"
debian_source libcaf-dev "$work" || die "cannot fetch CAF's source package"
echo "$orig_sha256  $debian_orig_tarball" | sha256sum -c --quiet - >&2 ||
  die "$(basename "$debian_orig_tarball") does not have the expected SHA-256"
tree=$debian_tree
[[ -f $tree/CMakeLists.txt && -d $tree/libcaf_core ]] ||
  die "unexpected layout of $(basename "$debian_orig_tarball")"
[[ $debian_patched == yes ]] ||
  say "Debian's patches are not on this mirror; applying the one they make to the headers"
# Upstream 0.17.6 misses this include, which GCC 11+ needs; Debian adds the
# same line (compare /usr/include/caf/io/network/receive_buffer.hpp).
receive_buffer=$tree/libcaf_io/caf/io/network/receive_buffer.hpp
grep -q '^#include <limits>' "$receive_buffer" ||
  sed -i 's|^#include <cstring>$|&\n#include <limits>|' "$receive_buffer"

# -- build and install -------------------------------------------------------
log=$cache/caf-$caf_version-tsan.log
say "building CAF $caf_version with TSan into $prefix (once per machine, about 2 minutes on 2 cores; log: $log)"
rm -rf "$prefix"
cmake_extra=()
if command -v ccache >/dev/null; then cmake_extra=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
if command -v ninja >/dev/null; then cmake_extra+=(-G Ninja); fi
if ! { CXX=$cxx cmake -S "$tree" -B "$work/build" "-DCMAKE_INSTALL_PREFIX=$prefix" \
         "${cmake_args[@]}" "${cmake_extra[@]}" &&
       cmake --build "$work/build" -j"${MCPRT_JOBS:-2}" &&
       cmake --install "$work/build"; } >"$log" 2>&1; then
  grep -E 'error|Error' "$log" | tail -n 20 >&2
  die "building CAF failed; see $log"
fi

# The installed configuration must be Debian's, else the TSan suite would test
# a different CAF than the one mcprt ships against.
for line in '#define CAF_LOG_LEVEL CAF_LOG_LEVEL_QUIET' \
            '/* #undef CAF_ENABLE_RUNTIME_CHECKS */' '/* #undef CAF_NO_EXCEPTIONS */'; do
  grep -qxF "$line" "$prefix/include/caf/detail/build_config.hpp" ||
    die "the built caf/detail/build_config.hpp lacks '$line'"
done
for lib in core io openssl; do
  [[ -f $prefix/lib/libcaf_$lib.so ]] || die "libcaf_$lib.so missing in $prefix/lib"
done
# Byte for byte the headers mcprt compiles against elsewhere: the same
# declarations, so the TSan suite tests the CAF that mcprt ships with.
if [[ -d /usr/include/caf ]]; then
  differing=$(diff -rq "$prefix/include/caf" /usr/include/caf | grep -v '^Only in /usr/include/caf' || true)
  [[ -z $differing ]] || die "the built headers differ from Debian's:
$differing"
fi

echo "$recipe" >"$stamp"
say "done: $prefix"
echo "$prefix"
