# Sourced by run.sh and run-server.sh: runs the scenarios of an outcome list
# and compares each outcome with the list.
#   run_scenarios EXPECTED_FILE "ALONE..." COMMAND...
# runs `COMMAND... --scenario S -o DIR` for every scenario S of
# EXPECTED_FILE; sets $differ to 1 when any outcome is not the listed one
# (a new failure, or a new pass whose line still says fail), printing that
# scenario's log. With $revision set (suite.sh: the next suite), a line's
# third column is the scenario's place in that revision's requirement set,
# and every scenario the set names (required or not scored) runs at the
# revision's wire, `--spec-version $revision --force`, as `--requirements`
# runs them; a `none` one runs as `--scenario` alone runs it (the suite's
# default wire for it). A scenario the suite skips as not applicable (exit
# 0, no checks) counts as `skipped`, which no line expects.
# The scenarios named in ALONE run first, one at a time: their own waits
# (a reconnect delay to -50/+200 ms, notifications within 200 ms) are tight
# on a busy 2-core machine. The rest run
# $MCPRT_CONFORMANCE_JOBS at a time (default 2), each starting Node and its
# own servers, which is most of a scenario's second.
run_scenarios() {
  local expected=$1 alone=" $2 " jobs=${MCPRT_CONFORMANCE_JOBS:-2}
  shift 2
  local work
  work=$(mktemp -d)
  local -a names=() wants=() wires=()
  local s w p i
  while read -r s w p; do
    names+=("$s")
    wants+=("$w")
    if [[ -n ${revision:-} && -n $p && $p != none ]]; then
      wires+=("--spec-version $revision --force")
    else
      wires+=("")
    fi
  done < <(sed -e 's/#.*//' "$expected" | awk 'NF { print $1, $2, $3 }')

  _run_one() {
    local dir="$work/$1"
    mkdir -p "$dir"
    # ${wires[$1]} unquoted: no flags, or the words of the wire's flags.
    # shellcheck disable=SC2086
    if "${@:2}" --scenario "${names[$1]}" ${wires[$1]} -o "$dir/results" > "$dir/log" 2>&1; then
      if grep -q "^SKIPPED: scenario '" "$dir/log"; then
        echo skipped > "$dir/got"
      else
        echo pass > "$dir/got"
      fi
    else
      echo fail > "$dir/got"
    fi
  }
  for i in "${!names[@]}"; do
    [[ $alone == *" ${names[$i]} "* ]] && _run_one "$i" "$@"
  done
  local running=0
  for i in "${!names[@]}"; do
    [[ $alone == *" ${names[$i]} "* ]] && continue
    if ((running >= jobs)); then
      wait -n || true
      running=$((running - 1))
    fi
    _run_one "$i" "$@" &
    running=$((running + 1))
  done
  wait || true

  differ=0
  local got
  for i in "${!names[@]}"; do
    got=$(cat "$work/$i/got" 2> /dev/null || echo fail)
    if [[ $got == "${wants[$i]}" ]]; then
      echo "  $got  ${names[$i]}"
    else
      differ=1
      echo "  $got  ${names[$i]}  ($(basename "$expected") says ${wants[$i]})"
      cat "$work/$i/log"
    fi
  done
  # MCPRT_CONFORMANCE_RESULTS=DIR keeps each scenario's log and results
  # (checks.json) in DIR/SCENARIO (a / in the name becomes _).
  if [[ -n ${MCPRT_CONFORMANCE_RESULTS:-} ]]; then
    for i in "${!names[@]}"; do
      mkdir -p "$MCPRT_CONFORMANCE_RESULTS/${names[$i]//\//_}"
      cp -r "$work/$i/." "$MCPRT_CONFORMANCE_RESULTS/${names[$i]//\//_}/"
    done
  fi
  rm -rf "$work"
}
