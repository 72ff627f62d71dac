#!/usr/bin/env bash
# Runs one stage of `make test` and prints how long it took, so a slow stage
# is visible in CI logs.
# Usage: hack/stage.sh [--start-by SECONDS] NAME COMMAND...
#   --start-by  skip the stage, saying so, when `make test` (which exports
#               MAKE_TEST_START) has already run longer than SECONDS: CI stops
#               a run at 90 minutes, and a stage that cannot finish in time
#               would take every other stage's result with it.
set -uo pipefail
start_by=""
if [[ "${1:-}" == --start-by ]]; then
  start_by="$2"; shift 2
fi
name="$1"; shift
if [[ -n "$start_by" && -n "${MAKE_TEST_START:-}" ]]; then
  elapsed=$(($(date +%s) - MAKE_TEST_START))
  if ((elapsed > start_by)); then
    printf '==> %s: SKIPPED: make test has run %ds, past the %ds by which this stage must start to end within CI'"'"'s limit; run it on its own\n' \
      "$name" "$elapsed" "$start_by"
    exit 0
  fi
fi
start=$(date +%s%N)
printf '==> %s\n' "$name"
"$@"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
printf '==> %s: %s in %d.%ds\n' "$name" "$([[ $rc == 0 ]] && echo ok || echo FAILED)" $((ms / 1000)) $((ms % 1000 / 100))
exit $rc
