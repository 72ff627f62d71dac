#!/usr/bin/env bash
# with-tools.sh COMMAND...: runs COMMAND with GoReleaser and cyclonedx-gomod (the SBOM tool .goreleaser.yaml
# runs) on PATH, building them first with hack/tools.sh when the per-user tool cache lacks their versions.
# The release targets of the Makefile and make test's release step run GoReleaser through it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tools=$("$root/hack/tools.sh" --only goreleaser,cyclonedx-gomod --print-goreleaser --print-cyclonedx-gomod)
dirs=$(printf '%s\n' "$tools" | xargs -n1 dirname | paste -sd: -)
PATH="$dirs:$PATH" exec "$@"
