#!/usr/bin/env bash
# Filters `go test -v` output of the e2e suite: keeps test results, failures,
# harness lines and the lines a test marks "figures: " (what it measured);
# drops the kubectl transcripts of passing tests. On failure it prints, in
# full, the output of every failing top-level test and whatever a failing
# package printed outside its tests (a panic, a timeout, a TestMain error),
# so a CI log holds the details a tail of the whole output would cut off.
# Exits with go test's status.
set -uo pipefail
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
tee "$log" | grep -E '^(=== RUN|--- |\s+--- |PASS|FAIL|ok |e2e:|panic|built |started |dsguard is ready|webhook configuration)|^\s+\S+_test\.go:[0-9]+: figures: ' || true
# go test's exit status is not visible through the pipe; judge by its summary.
if grep -qE '^(FAIL|panic:)|^--- FAIL' "$log"; then
  echo "---- full output of the failing tests ----"
  # With -p 1 and no t.Parallel in the suites, a top-level test's lines run
  # from its "=== RUN   TestX" to its "--- FAIL: TestX"; subtests are
  # "TestX/..." and their results, indented, follow TestX's. Lines outside
  # any test, and a test cut short by a panic or timeout, end at the
  # package's "FAIL\t" line.
  awk '
    /^=== RUN   [^\/ ]+$/ { name = $3; block = $0 "\n"; inblock = 1; results = ""; next }
    inblock && /^--- (FAIL|PASS|SKIP): / && $3 == name {
      # Indented "--- " lines after it are the results of its subtests.
      results = ($2 == "FAIL:") ? "print" : "drop"
      if (results == "print") printf "%s%s\n", block, $0
      inblock = 0; block = ""; next
    }
    results != "" && /^[ \t]+--- / { if (results == "print") print; next }
    { results = "" }
    /^(FAIL|ok)[ \t]/ {
      if ($1 == "FAIL") printf "%s%s%s\n", block, tail, $0
      inblock = 0; block = ""; tail = ""; next
    }
    { if (inblock) block = block $0 "\n"; else tail = tail $0 "\n" }
  ' "$log"
  exit 1
fi
grep -qE '^ok ' "$log"
