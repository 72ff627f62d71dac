#!/usr/bin/env bash
# Filters `go test -v` output of the e2e suite: keeps test results, failures,
# harness lines and the lines a test marks "figures: " (what it measured);
# drops the kubectl transcripts of passing tests (they are in the log of a
# failing one). Exits with go test's status.
set -uo pipefail
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
tee "$log" | grep -E '^(=== RUN|--- |\s+--- |PASS|FAIL|ok |e2e:|panic|built |started |dsguard is ready|webhook configuration)|^\s+\S+_test\.go:[0-9]+: figures: ' || true
# go test's exit status is not visible through the pipe; judge by its summary.
if grep -qE '^(FAIL|panic:)|^--- FAIL' "$log"; then
  echo "---- full e2e output of the failed run ----"
  grep -vE '^=== (RUN|PAUSE|CONT)' "$log" | tail -400
  exit 1
fi
grep -qE '^ok ' "$log"
