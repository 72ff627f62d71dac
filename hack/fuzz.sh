#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 10s; a
# count such as 20000x bounds it by inputs tried instead), one after the
# other. New inputs that make a target fail are written by Go into
# the package's testdata/fuzz/<Target>/, where they stay as regression seeds
# beside the committed corpus. `make test` runs it short; `make fuzz` longer.
# Usage: FUZZTIME=1m hack/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-10s}"
mapfile -t pkgs < <(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# fuzz runs one target. Go's fuzzing coordinator before Go 1.27 can fail a
# run at its -fuzztime deadline with a bare "context deadline exceeded" and
# no failing input (go.dev/issue/75804), most on a loaded machine. Such a
# run found nothing: it is run again, up to three times in all. A real
# finding prints "Failing input written to" and writes the input into
# testdata/fuzz/<target>/, and fails at once.
fuzz() {
  local pkg=$1 target=$2 attempt
  for attempt in 1 2 3; do
    if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log"; then
      return 0
    fi
    if ! grep -qx '    context deadline exceeded' "$log" || grep -q 'Failing input written to' "$log"; then
      return 1
    fi
    echo "--- $pkg $target: the fuzzing coordinator's deadline race (go.dev/issue/75804), no failing input; attempt $attempt of 3"
  done
  return 1
}

total=0
for pkg in "${pkgs[@]}"; do
  # A package whose test list fails would otherwise drop out of the run unseen.
  list=$(go test -list '^Fuzz' "$pkg") || { echo "--- $pkg: cannot list its fuzz targets" >&2; exit 1; }
  for target in $(grep '^Fuzz' <<<"$list"); do
    start=$(date +%s)
    echo "--- $pkg $target ($fuzztime)"
    fuzz "$pkg" "$target"
    total=$((total + 1))
    echo "--- $pkg $target: $(( $(date +%s) - start ))s"
  done
done
# Finding none means the search above broke, not that there is nothing to fuzz.
[ "$total" -gt 0 ] || { echo "--- no fuzz target found" >&2; exit 1; }
echo "--- $total fuzz targets, no failure"
