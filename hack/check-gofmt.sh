#!/usr/bin/env bash
# Fails when a Go file is not gofmt-formatted.
set -euo pipefail
unformatted="$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"
if [[ -n "$unformatted" ]]; then
  echo "not gofmt-formatted:" >&2
  echo "$unformatted" >&2
  exit 1
fi
