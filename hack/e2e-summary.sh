#!/usr/bin/env bash
# Filters `go test -v` output of the e2e suite: keeps test results, failures,
# harness lines and the lines a test marks "figures: " (what it measured);
# drops the kubectl transcripts of passing tests. With -shuffle, each
# package's result line carries the seed its tests ran in the order of, and
# a failing package's is printed as a command that replays that order. On
# failure it prints, in full, the output of every failing top-level test and
# whatever a failing package printed outside its tests (a panic, a timeout,
# a TestMain error), so a CI log holds the details a tail of the whole output
# would cut off. Exits with go test's status.
set -uo pipefail
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# A test binary run with -shuffle prints "-test.shuffle <seed>" first; the
# package's "ok" or "FAIL" line then says which seed it ran with.
tee "$log" | awk '
  /^-test\.shuffle / { seed = $2; next }
  /^(ok|FAIL)[ \t]+[^ \t]+[ \t]/ && seed != "" { print $0 "  (-shuffle=" seed ")"; fflush(); seed = ""; next }
  /^(=== RUN|--- |[ \t]+--- |PASS|FAIL|ok |e2e:|panic|built |started |dsguard is ready|webhook configuration)/ ||
  /^[ \t]+[^ \t]+_test\.go:[0-9]+: figures: / { print; fflush() }
'

# go test's exit status is not visible through the pipe; judge by its summary.
if grep -qE '^(FAIL|panic:)|^--- FAIL' "$log"; then
  echo "---- full output of the failing tests ----"
  # With -p 1 and no t.Parallel in the suites, a top-level test's lines run
  # from its "=== RUN   TestX" to its "--- FAIL: TestX"; subtests are
  # "TestX/..." and their results, indented, follow TestX's. Lines outside
  # any test, and a test cut short by a panic or timeout, end at the
  # package's "FAIL\t" line.
  awk '
    /^-test\.shuffle / { seed = $2 }
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
      if ($1 == "FAIL" && NF > 1 && seed != "")
        printf "replay this order: hack/run-isolated.sh go test -count=1 -p 1 -v -shuffle=%s %s\n", seed, $2
      if (NF > 1) seed = ""
      inblock = 0; block = ""; tail = ""; next
    }
    { if (inblock) block = block $0 "\n"; else tail = tail $0 "\n" }
  ' "$log"
  exit 1
fi
grep -qE '^ok ' "$log"
