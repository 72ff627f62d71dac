#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 10s), one
# after the other. New inputs that make a target fail are written by Go into
# the package's testdata/fuzz/<Target>/, where they stay as regression seeds
# beside the committed corpus. `make test` runs it short; `make fuzz` longer.
# Usage: FUZZTIME=1m hack/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-10s}"
mapfile -t pkgs < <(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)
total=0
for pkg in "${pkgs[@]}"; do
  # A package whose test list fails would otherwise drop out of the run unseen.
  list=$(go test -list '^Fuzz' "$pkg") || { echo "--- $pkg: cannot list its fuzz targets" >&2; exit 1; }
  for target in $(grep '^Fuzz' <<<"$list"); do
    start=$(date +%s)
    echo "--- $pkg $target ($fuzztime)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
    total=$((total + 1))
    echo "--- $pkg $target: $(( $(date +%s) - start ))s"
  done
done
# Finding none means the search above broke, not that there is nothing to fuzz.
[ "$total" -gt 0 ] || { echo "--- no fuzz target found" >&2; exit 1; }
echo "--- $total fuzz targets, no failure"
