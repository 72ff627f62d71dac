#!/usr/bin/env bash
# Usage: hack/release/completions.sh DIR
# Writes dsguard's shell completions (bash, zsh, fish, PowerShell) into DIR, from the CLI's own
# `dsguard completion`: the release archives ship them and the Homebrew cask installs them.
set -euo pipefail
(($# == 1)) || { echo "usage: hack/release/completions.sh DIR" >&2; exit 2; }
dir=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go build -trimpath -tags norender -o "$tmp/dsguard" ./cmd/dsguard)
mkdir -p "$dir"
for shell in bash zsh fish powershell; do
  ext=$shell
  [[ $shell == powershell ]] && ext=ps1
  "$tmp/dsguard" completion "$shell" > "$dir/dsguard.$ext"
  [[ -s "$dir/dsguard.$ext" ]] || { echo "hack/release/completions.sh: dsguard completion $shell wrote nothing" >&2; exit 1; }
done
