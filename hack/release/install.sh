#!/usr/bin/env bash
# install.sh VERSION DIR: install the dsguard release VERSION (a tag, e.g. v0.1.0) for this machine's OS
# and architecture into DIR, after checking the archive against the release's checksums. Used by
# action.yml; works on any Linux or macOS machine with curl and sha256sum or shasum.
set -euo pipefail
version=${1:?usage: install.sh VERSION DIR}
dir=${2:?usage: install.sh VERSION DIR}
case "$(uname -s)" in Linux) os=linux ;; Darwin) os=darwin ;; *) echo "install.sh: unsupported OS $(uname -s)" >&2; exit 1 ;; esac
case "$(uname -m)" in x86_64 | amd64) arch=amd64 ;; aarch64 | arm64) arch=arm64 ;; *) echo "install.sh: unsupported architecture $(uname -m)" >&2; exit 1 ;; esac
plain=${version#v}
base="https://github.com/dsguard/dsguard/releases/download/${version}"
archive="dsguard_${plain}_${os}_${arch}.tar.gz"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsSL --retry 3 -o "$tmp/$archive" "$base/$archive"
curl -fsSL --retry 3 -o "$tmp/checksums.txt" "$base/dsguard_${plain}_checksums.txt"
(cd "$tmp" && grep " ${archive}\$" checksums.txt > want.txt && if command -v sha256sum > /dev/null; then sha256sum -c want.txt; else shasum -a 256 -c want.txt; fi)
mkdir -p "$dir"
tar -xzf "$tmp/$archive" -C "$dir" dsguard
"$dir/dsguard" version
