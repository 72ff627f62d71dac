#!/usr/bin/env bash
# Runs one stage of `make test` and prints how long it took, so a slow stage
# is visible in CI logs. With DSGUARD_STAGES set (make test sets it) it also
# appends the stage to that file, which make test prints as a table at the
# end (hack/stage.sh --table FILE).
# Usage: hack/stage.sh NAME COMMAND...   or   hack/stage.sh --table FILE
set -uo pipefail
if [[ "${1:-}" == --table ]]; then
  [[ -s "$2" ]] || exit 0
  printf '==> stages (seconds; those run in the background overlap the others)\n'
  awk -F'\t' '{printf "%8s  %-6s %s\n", $2, $3, $1}' "$2"
  exit 0
fi
name="$1"; shift
start=$(date +%s%N)
printf '==> %s\n' "$name"
"$@"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
status="$([[ $rc == 0 ]] && echo ok || echo FAILED)"
printf '==> %s: %s in %d.%ds\n' "$name" "$status" $((ms / 1000)) $((ms % 1000 / 100))
if [[ -n "${DSGUARD_STAGES:-}" ]]; then
  printf '%s\t%d.%d\t%s\n' "$name" $((ms / 1000)) $((ms % 1000 / 100)) "$status" >>"$DSGUARD_STAGES"
fi
exit $rc
