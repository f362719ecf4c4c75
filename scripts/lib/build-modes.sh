# The three builds of the suite, in one place for scripts/test.sh and
# scripts/fuzz.sh. Source it, then `build_mode_args plain|asan|tsan` sets
# $build (the build directory) and $mode_args (the CMake arguments) and
# exports the sanitizer's run-time options. Needs $here (the checkout).

build_mode_args() {
  case $1 in
    plain)
      build="$here/build"
      mode_args=() ;;
    asan)
      # clang, so that the same build also gives the libFuzzer targets
      # (MCPRT_FUZZ): one instrumented build serves the ASan+UBSan suite and
      # scripts/fuzz.sh, where there were two.
      build="$here/build-asan"
      mode_args=(-DCMAKE_CXX_COMPILER=clang++ -DMCPRT_SANITIZE=address,undefined -DMCPRT_FUZZ=ON)
      export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
      export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ;;
    tsan)
      build="$here/build-tsan"
      # CAF and cpp-httplib built with TSan, once per machine, so that TSan
      # sees the hand-overs between actors and threads.
      local caf_root httplib_root
      caf_root=$("$here/scripts/build-caf-tsan.sh")
      httplib_root=$("$here/scripts/build-httplib-tsan.sh")
      mode_args=(-DCMAKE_CXX_COMPILER=g++ -DMCPRT_SANITIZE=thread "-DCAF_ROOT=$caf_root" "-DHTTPLIB_ROOT=$httplib_root")
      # history_size=7: the longest history, so that the other stack of a
      # report is restored, not "failed to restore".
      export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=7 suppressions=$here/tests/tsan.supp" ;;
    *)
      echo "build-modes: unknown mode '$1'" >&2
      return 2 ;;
  esac
}
