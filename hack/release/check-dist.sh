#!/usr/bin/env bash
# Usage: hack/release/check-dist.sh [DIST]
# Checks what a release publishes, as GoReleaser left it in DIST (default dist/, from `goreleaser release
# --snapshot`): every archive holds the binary, the kubectl completion helper and the shell completions; the
# checksums cover every archive; the krew manifest names each archive with its checksum; the Homebrew cask
# installs the completions and lifts macOS's quarantine; and CHANGELOG.md gives the release notes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dist=${1:-$root/dist}
fail() { echo "hack/release/check-dist.sh: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

shopt -s nullglob
archives=("$dist"/dsguard_*.tar.gz "$dist"/dsguard_*.zip)
((${#archives[@]} == 6)) || fail "want 6 archives (linux, darwin, windows × amd64, arm64), found ${#archives[@]}"
sums=("$dist"/dsguard_*_checksums.txt)
((${#sums[@]} == 1)) || fail "want one checksums file, found ${#sums[@]}"
for a in "${archives[@]}"; do
  name=$(basename "$a")
  case $a in
    *.zip) list=$(unzip -Z1 "$a"); bin=dsguard.exe ;;
    *) list=$(tar -tzf "$a"); bin=dsguard ;;
  esac
  for want in "$bin" kubectl_complete-dsguard LICENSE README.md CHANGELOG.md \
    completions/dsguard.bash completions/dsguard.zsh completions/dsguard.fish completions/dsguard.ps1; do
    grep -qx "$want" <<<"$list" || fail "$name has no $want (it holds: $(tr '\n' ' ' <<<"$list"))"
  done
  sum=$(sha256sum "$a" | cut -d' ' -f1)
  grep -q "^$sum  $name\$" "${sums[0]}" || fail "$(basename "${sums[0]}") has no line for $name with its sha256 $sum"
  [[ $a == *.zip ]] && continue
  # A completion script that does not define its function is no completion (an error text, say).
  tar -xzf "$a" -C "$tmp" completions/dsguard.bash
  grep -q '__start_dsguard' "$tmp/completions/dsguard.bash" || fail "$name: completions/dsguard.bash defines no completion"
done

krew="$dist/krew/dsguard.yaml"
[[ -f $krew ]] || fail "no krew manifest $krew"
for a in "${archives[@]}"; do
  name=$(basename "$a")
  grep -q "uri: .*/$name\$" "$krew" || fail "the krew manifest does not install $name"
  grep -q "sha256: $(sha256sum "$a" | cut -d' ' -f1)" "$krew" || fail "the krew manifest does not carry $name's sha256"
done

cask="$dist/homebrew/Casks/dsguard.rb"
[[ -f $cask ]] || fail "no Homebrew cask $cask"
for want in 'bash_completion "completions/dsguard.bash"' 'zsh_completion "completions/dsguard.zsh"' \
  'fish_completion "completions/dsguard.fish"' 'com.apple.quarantine' 'binary "dsguard"'; do
  grep -qF "$want" "$cask" || fail "the Homebrew cask has no $want"
done

"$root/hack/release/notes.sh" Unreleased > "$tmp/notes.md" || fail "CHANGELOG.md gives no release notes"
echo "release artefacts: ${#archives[@]} archives with completions, checksums, krew manifest, Homebrew cask, notes ($(wc -l < "$tmp/notes.md") lines)"
