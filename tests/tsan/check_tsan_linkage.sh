#!/bin/sh
# Usage: check_tsan_linkage.sh CAF_ROOT HTTPLIB_ROOT BINARY...
# Passes when every BINARY that loads libcaf_core, libcaf_io, libcaf_openssl or
# libcpp-httplib loads it from CAF_ROOT or HTTPLIB_ROOT, each of
# libcaf_core and libcpp-httplib is loaded by some BINARY, and those two are
# built with TSan (link libtsan).
set -u
caf_root=$1 httplib_root=$2
shift 2
status=0
seen=""
check() { # BINARY LIB ROOT
  where=$(ldd "$1" | awk -v lib="$2" 'index($1, lib ".so") == 1 { print $3 }')
  case $where in
    "$3"/lib/"$2".so*) echo "ok: $1 loads $where"; seen="$seen $2" ;;
    "") ;;
    *) echo "FAIL: $1 loads $where, not the one in $3/lib"; status=1 ;;
  esac
}
for bin in "$@"; do
  check "$bin" libcaf_core "$caf_root"
  check "$bin" libcaf_io "$caf_root"
  check "$bin" libcaf_openssl "$caf_root"
  check "$bin" libcpp-httplib "$httplib_root"
done
for lib in libcaf_core libcpp-httplib; do
  case "$seen " in
    *" $lib "*) ;;
    *) echo "FAIL: no binary loads $lib"; status=1 ;;
  esac
done
for lib in "$caf_root/lib/libcaf_core.so" "$httplib_root/lib/libcpp-httplib.so"; do
  if readelf -d "$lib" | grep -q 'NEEDED.*libtsan'; then
    echo "ok: $lib links libtsan"
  else
    echo "FAIL: $lib is not built with -fsanitize=thread"; status=1
  fi
done
exit $status
