# Sourced by run.sh and run-server.sh: runs the scenarios of an outcome list
# and compares each outcome with the list.
#   run_scenarios EXPECTED_FILE "ALONE..." COMMAND...
# runs `COMMAND... --scenario S -o DIR` for every scenario S of
# EXPECTED_FILE; sets $differ to 1 when any outcome is not the listed one
# (a new failure, or a new pass whose line still says fail), printing that
# scenario's log. The scenarios named in ALONE run first, one at a time:
# their own waits (a reconnect delay to -50/+200 ms, notifications within
# 200 ms) are tight on a busy 2-core machine. The rest run
# $MCPRT_CONFORMANCE_JOBS at a time (default 2), each starting Node and its
# own servers, which is most of a scenario's second.
run_scenarios() {
  local expected=$1 alone=" $2 " jobs=${MCPRT_CONFORMANCE_JOBS:-2}
  shift 2
  local work
  work=$(mktemp -d)
  local -a names=() wants=()
  local s w i
  while read -r s w; do
    names+=("$s")
    wants+=("$w")
  done < <(sed -e 's/#.*//' "$expected" | awk 'NF { print $1, $2 }')

  _run_one() {
    local dir="$work/$1"
    mkdir -p "$dir"
    if "${@:2}" --scenario "${names[$1]}" -o "$dir/results" > "$dir/log" 2>&1; then
      echo pass > "$dir/got"
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
  rm -rf "$work"
}
