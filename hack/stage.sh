#!/usr/bin/env bash
# Runs one stage of `make test` and prints how long it took, so a slow stage
# is visible in CI logs.
# Usage: hack/stage.sh NAME COMMAND...
set -uo pipefail
name="$1"; shift
start=$(date +%s%N)
printf '==> %s\n' "$name"
"$@"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
printf '==> %s: %s in %d.%ds\n' "$name" "$([[ $rc == 0 ]] && echo ok || echo FAILED)" $((ms / 1000)) $((ms % 1000 / 100))
exit $rc
