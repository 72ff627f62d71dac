#!/usr/bin/env bash
# snapshot-image.sh DIR: the release's image index into DIR (an OCI layout and archive, as `make image-index`),
# built twice from two builds of the binaries; fails unless both give the same index digest. hack/image
# checks each binary's ELF header against the platform it is named for (linux/arm64=...), so an amd64 binary
# cannot be published as arm64. Run by `make release-snapshot` after GoReleaser.
set -euo pipefail
dir=${1:?usage: snapshot-image.sh DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
index_digest() { grep -o '"digest": *"sha256:[0-9a-f]*"' "$1/oci/index.json" | head -1 | grep -o 'sha256:[0-9a-f]*'; }
cd "$root"
make -s image-index INDEX_DIR="$dir"
first=$(index_digest "$dir")
# The second build starts from nothing of the first: other binaries, another layout.
make -s image-index INDEX_DIR="$tmp/again"
second=$(index_digest "$tmp/again")
for a in amd64 arm64; do
  cmp -s "$dir/linux-$a/dsguard" "$tmp/again/linux-$a/dsguard" || { echo "snapshot-image: the linux/$a binaries of two builds differ" >&2; exit 1; }
done
[[ -n $first && $first == "$second" ]] || { echo "snapshot-image: two builds gave the index digests $first and $second" >&2; exit 1; }
echo "image index $first (linux/amd64, linux/arm64): the same from two builds; layout $dir/oci, archive $dir/dsguard.oci.tar"
