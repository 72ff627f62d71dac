#!/usr/bin/env bash
# set-version.sh VERSION: write a release's version (vX.Y.Z) into the references a release fills in:
# the chart's version and appVersion (and so the image tag ghcr.io/dsguard/dsguard:X.Y.Z the chart
# deploys by default), the GitHub Action's default dsguard version, and the versions the install and CI
# examples of README.md, docs/install.md and docs/cli.md name. Run it, add the CHANGELOG section, commit, tag vX.Y.Z; the tag's CI runs
# GoReleaser.
set -euo pipefail
version=${1:?usage: set-version.sh vX.Y.Z}
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || { echo "set-version.sh: $version is not vX.Y.Z" >&2; exit 2; }
plain=${version#v}
root=$(cd "$(dirname "$0")/../.." && pwd)
sed -i -E "s/^version: .*/version: ${plain}/; s/^appVersion: .*/appVersion: \"${plain}\"/" "$root/charts/dsguard/Chart.yaml"
sed -i -E "/^  version:/,/^  [a-z]/ s/^    default: v[0-9][^ ]*/    default: ${version}/" "$root/action.yml"
sed -i -E "s#(dsguard/dsguard@)v[0-9]+\.[0-9]+\.[0-9]+[^ ]*#\1${version}#g; s#(rev: )v[0-9]+\.[0-9]+\.[0-9]+[^ ]*#\1${version}#g; s#(cmd/dsguard@)v[0-9]+\.[0-9]+\.[0-9]+[^ ]*#\1${version}#g; s#(charts/dsguard --version )[0-9]+\.[0-9]+\.[0-9]+[^ ]*#\1${plain}#g; s#(ghcr\.io/dsguard/(charts/)?dsguard:)[0-9]+\.[0-9]+\.[0-9]+[^ ]*#\1${plain}#g; s#(dsguard/dsguard/)v[0-9]+\.[0-9]+\.[0-9]+[^/ ]*(/hack/release/install\.sh)#\1${version}\2#g; s#(install\.sh )v[0-9]+\.[0-9]+\.[0-9]+[^ ]*#\1${version}#g" "$root/README.md" "$root/docs/install.md" "$root/docs/cli.md"
grep -n -E "^(version|appVersion):" "$root/charts/dsguard/Chart.yaml"
grep -n -A3 "^  version:" "$root/action.yml" | grep default
