#!/usr/bin/env bash
# Builds cpp-httplib 0.11.4 (Debian's libcpp-httplib, compiled) with
# -fsanitize=thread into a prefix of its own, once per machine, and prints
# the prefix on stdout (progress goes to stderr). The daemon's HTTP server,
# the HTTP transport's client and mcprt-test-server run their threads
# through it; uninstrumented, it hides their hand-overs from TSan (see
# tests/tsan.supp for the report that made this necessary). The TSan build
# of mcprt finds it through pkg-config (scripts/test.sh --tsan).
#
#   scripts/build-httplib-tsan.sh     build if needed, print the prefix
#
# MCPRT_HTTPLIB_TSAN_PREFIX overrides the prefix (default
# ${XDG_CACHE_HOME:-~/.cache}/mcprt/cpp-httplib-0.11.4-tsan). A stamp file
# in the prefix records the recipe; while it matches, a second run does
# nothing. The source is the Debian source package of the installed
# libcpp-httplib-dev with Debian's patches (scripts/lib/debian-source.sh),
# split and compiled the way Debian does (meson's cpp-httplib_compile).
set -euo pipefail

httplib_version=0.11.4
# The upstream tarball of Debian's cpp-httplib 0.11.4+ds source package (its
# .dsc lists the same hash; apt checks it against the signed index too).
orig_sha256=8b1a5df569003b6a4f24c68489bbda5c64aec94697bdc9ebba5d79408b2ae7eb
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mcprt
prefix=${MCPRT_HTTPLIB_TSAN_PREFIX:-$cache/cpp-httplib-$httplib_version-tsan}
cxx=${CXX:-g++}
system_pc=/usr/lib/x86_64-linux-gnu/pkgconfig/cpp-httplib.pc

say() { echo "build-httplib-tsan: $*" >&2; }
die() { say "$*"; exit 1; }

# Debian's build: the split header and one source file, with the features of
# its pkg-config file (OpenSSL, zlib, brotli: they change the ABI) and
# CPPHTTPLIB_USE_POLL from debian/rules. C++17 like mcprt and like the CAF
# of build-caf-tsan.sh; frame pointers and -g for TSan's stacks.
features="-DCPPHTTPLIB_OPENSSL_SUPPORT -DCPPHTTPLIB_ZLIB_SUPPORT -DCPPHTTPLIB_BROTLI_SUPPORT"
cxx_flags="-std=c++17 -O2 -g -fno-omit-frame-pointer -fsanitize=thread -fPIC -pthread -DCPPHTTPLIB_USE_POLL $features"
link_libs="-lssl -lcrypto -lz -lbrotlidec -lbrotlienc"

command -v "$cxx" >/dev/null || die "no C++ compiler '$cxx' (run scripts/setup.sh)"
[[ -f $system_pc && -f /usr/include/httplib.h ]] || die "libcpp-httplib-dev is not installed (run scripts/setup.sh)"
grep -q "^Cflags:.*$features" "$system_pc" ||
  die "$system_pc no longer names the features this script builds with ($features)"
recipe="cpp-httplib $(dpkg-query -W -f='${Version}' libcpp-httplib-dev)
compiler $("$cxx" --version | head -n1)
flags $cxx_flags $link_libs"

stamp=$prefix/.mcprt-httplib-tsan-stamp
if [[ -f $stamp && $(cat "$stamp") == "$recipe" ]]; then
  echo "$prefix"
  exit 0
fi

mkdir -p "$cache"
# Several checkouts may ask at once; the second waits and then finds the stamp.
exec 9>"$cache/cpp-httplib-$httplib_version-tsan.lock"
flock 9
if [[ -f $stamp && $(cat "$stamp") == "$recipe" ]]; then
  echo "$prefix"
  exit 0
fi

work=$cache/cpp-httplib-$httplib_version-tsan.work
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

source "$(dirname "$0")/lib/debian-source.sh"
ensure_commands patch=patch python3=python3 || die "cannot install patch and python3"
debian_source libcpp-httplib-dev "$work" || die "cannot fetch cpp-httplib's source package"
echo "$orig_sha256  $debian_orig_tarball" | sha256sum -c --quiet - >&2 ||
  die "$(basename "$debian_orig_tarball") does not have the expected SHA-256"
tree=$debian_tree
[[ -f $tree/split.py && -f $tree/httplib.h ]] ||
  die "unexpected layout of $(basename "$debian_orig_tarball")"
[[ $debian_patched == yes ]] ||
  die "Debian's patches to cpp-httplib (security fixes) are not on this mirror"

log=$cache/cpp-httplib-$httplib_version-tsan.log
say "building cpp-httplib $httplib_version with TSan into $prefix (once per machine, a few minutes; log: $log)"
rm -rf "$prefix"
mkdir -p "$prefix/include" "$prefix/lib/pkgconfig"
lib=libcpp-httplib.so.$httplib_version
soname=libcpp-httplib.so.${httplib_version%.*}
# split.py finds httplib.h next to itself through argv[0].
if ! { (cd "$tree" && python3 ./split.py --out "$work/split") &&
       $cxx $cxx_flags -I"$work/split" -c "$work/split/httplib.cc" -o "$work/httplib.o" &&
       $cxx -shared -fsanitize=thread -pthread -Wl,-soname,"$soname" -o "$prefix/lib/$lib" \
         "$work/httplib.o" $link_libs; } >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  die "building cpp-httplib failed; see $log"
fi
ln -s "$lib" "$prefix/lib/$soname"
ln -s "$soname" "$prefix/lib/libcpp-httplib.so"
cp "$work/split/httplib.h" "$prefix/include/httplib.h"
# Debian's pkg-config file with this prefix: the same Cflags (ABI defines).
sed -e "s|^prefix=.*|prefix=$prefix|" -e 's|^libdir=.*|libdir=${prefix}/lib|' \
  "$system_pc" >"$prefix/lib/pkgconfig/cpp-httplib.pc"

# Byte for byte the header mcprt compiles against elsewhere.
cmp -s "$prefix/include/httplib.h" /usr/include/httplib.h ||
  die "the split httplib.h differs from Debian's /usr/include/httplib.h"

echo "$recipe" >"$stamp"
say "done: $prefix"
echo "$prefix"
