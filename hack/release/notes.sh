#!/usr/bin/env bash
# Usage: hack/release/notes.sh VERSION [CHANGELOG.md]
# Prints the CHANGELOG.md section of VERSION (1.2.3 or v1.2.3; "Unreleased" for a snapshot), without its
# heading, as the GitHub release's notes. Fails when the section is missing or empty: a release announces
# what it changes, and a tag without its section is a release step forgotten.
set -euo pipefail
(($# >= 1)) || { echo "usage: hack/release/notes.sh VERSION [CHANGELOG.md]" >&2; exit 2; }
version=${1#v}
changelog=${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/CHANGELOG.md}
notes=$(awk -v want="$version" '
  /^## \[/ {
    heading = $0; sub(/^## \[/, "", heading); sub(/\].*/, "", heading)
    if (found) exit
    found = (heading == want); next
  }
  found { print }
' "$changelog")
if [[ -z "${notes//[[:space:]]/}" ]]; then
  echo "hack/release/notes.sh: $changelog has no section \"## [$version]\" with notes in it" >&2
  exit 1
fi
printf '%s\n' "$notes" | sed -e '/./,$!d'
