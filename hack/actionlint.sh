#!/usr/bin/env bash
# Lints the GitHub workflows (.github/workflows) with actionlint, built from
# the Go module proxy into the per-user cache, keyed by version, on first use.
# actionlint checks run: scripts with shellcheck when one is on PATH.
set -euo pipefail
ACTIONLINT_VERSION="${ACTIONLINT_VERSION:-v1.7.12}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${DSGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dsguard}/tools/actionlint-${ACTIONLINT_VERSION}"
if [[ ! -x "$dir/actionlint" ]]; then
  echo "[actionlint] building actionlint ${ACTIONLINT_VERSION} (cached afterwards)" >&2
  GOBIN="$dir.tmp" CGO_ENABLED=0 GOFLAGS=-buildvcs=false go install \
    -ldflags "-s -w -X github.com/rhysd/actionlint.version=${ACTIONLINT_VERSION}" \
    "github.com/rhysd/actionlint/cmd/actionlint@${ACTIONLINT_VERSION}"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
cd "$root"
"$dir/actionlint" -no-color "$@"
echo "[actionlint] $(ls .github/workflows/*.y*ml | wc -l) workflows clean" >&2
