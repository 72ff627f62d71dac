#!/usr/bin/env bash
# publish.sh: publish a release's image and chart to an OCI registry, signed.
#
#   hack/release/publish.sh --registry ghcr.io/dsguard --version 1.2.3 \
#     --binary linux/amd64=out/linux-amd64/dsguard --binary linux/arm64=out/linux-arm64/dsguard \
#     [--sbom FILE ...] [--key cosign.key] [--plain-http]
#
# 1. The image: one OCI image index of the binaries (one per architecture,
#    each named by its ELF header), pushed as REGISTRY/dsguard:VERSION by
#    hack/image (no Docker engine).
# 2. The chart: charts/dsguard with version and appVersion VERSION and its
#    default image pinned to that index by digest, pushed with `helm push` as
#    oci://REGISTRY/charts/dsguard, so that
#      helm install dsguard oci://REGISTRY/charts/dsguard --version VERSION
#    pulls exactly the image signed here and needs no other value.
# 3. cosign signs both digests (with --key, a key pair and no transparency
#    log; without it, keyless through the workflow's OIDC identity), attests
#    each --sbom (CycloneDX) to the image, and verifies the signatures it
#    made before it says it is done.
#
# The release workflow runs it after GoReleaser (make release-publish); the
# real-node e2e runs it against a registry in the test process (--key,
# --plain-http). It prints "image REF@DIGEST" and "chart REF@DIGEST" last.
# Tools: helm and cosign on PATH (hack/tools.sh --only helm --cosign
# builds both), go for hack/image.
set -euo pipefail

registry="" version="" key="" plain_http=false
binaries=() sboms=()
while (($#)); do
  case "$1" in
    --registry) registry=${2:?}; shift ;;
    --version) version=${2:?}; shift ;;
    --binary) binaries+=("${2:?}"); shift ;;
    --sbom) sboms+=("${2:?}"); shift ;;
    --key) key=${2:?}; shift ;;
    --plain-http) plain_http=true ;;
    *) echo "publish.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -n $registry && -n $version && ${#binaries[@]} -gt 0 ]] || {
  echo "usage: publish.sh --registry REGISTRY --version X.Y.Z --binary FILE [--binary FILE ...] [--sbom FILE ...] [--key FILE] [--plain-http]" >&2
  exit 2
}
# One convention: the image tag, chart version and appVersion are the
# version without a leading v (test/chart/version_test.go holds the rest).
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || {
  echo "publish.sh: version $version: want X.Y.Z (no leading v), the chart's and the image's form" >&2
  exit 2
}
for tool in helm cosign go; do
  command -v "$tool" > /dev/null || { echo "publish.sh: $tool is not on PATH" >&2; exit 1; }
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log() { printf '[publish] %s\n' "$*" >&2; }

helm_http=() cosign_http=() cosign_key=() verify_with=()
if $plain_http; then
  helm_http=(--plain-http)
  cosign_http=(--allow-http-registry)
fi
if [[ -n $key ]]; then
  # A key pair and no transparency log: what a registry without the
  # internet can hold (the e2e), verified with the public key. Without a
  # signing config cosign asks Sigstore's TUF repository for one; with
  # these two flags it asks nothing of the network.
  cosign_key=(--key "$key" --use-signing-config=false --tlog-upload=false)
  cosign public-key --key "$key" > "$tmp/cosign.pub"
  verify_with=(--key "$tmp/cosign.pub" --insecure-ignore-tlog=true)
else
  # Keyless: the workflow's OIDC token names the signer; a user verifies
  # with the identity docs/install.md gives.
  verify_with=(--certificate-identity-regexp "${COSIGN_IDENTITY_REGEXP:-^https://github.com/dsguard/dsguard/\.github/workflows/release\.yaml@refs/tags/v}"
    --certificate-oidc-issuer "${COSIGN_OIDC_ISSUER:-https://token.actions.githubusercontent.com}")
fi

# In the workflow the registry takes the job's token: helm logs in with
# it (hack/image and cosign read the Docker config the login step wrote).
if [[ -n ${REGISTRY_PASSWORD:-} ]]; then
  printf '%s' "$REGISTRY_PASSWORD" | helm registry login "${registry%%/*}" -u "${REGISTRY_USERNAME:?REGISTRY_USERNAME goes with REGISTRY_PASSWORD}" --password-stdin
fi

# 1. The image index.
image_args=()
for b in "${binaries[@]}"; do image_args+=(-binary "$b"); done
log "pushing the image index $registry/dsguard:$version (${#binaries[@]} architectures)"
image_ref=$(cd "$root" && go run ./hack/image "${image_args[@]}" -path /dsguard -user 65532:65532 -ca-certificates -cmd serve \
  -version "$version" -push "$registry/dsguard:$version")
image_digest=${image_ref##*@}

# 2. The chart, its default image pinned to the index just pushed.
cp -r "$root/charts/dsguard" "$tmp/dsguard"
# Only the image block's repository and digest change; the rest of
# values.yaml stays the chart's own.
awk -v repo="$registry/dsguard" -v digest="$image_digest" '
  /^image:/ { inimage = 1; print; next }
  inimage && /^[^ #]/ { inimage = 0 }
  inimage && /^  repository:/ { print "  repository: " repo; seen++; next }
  inimage && /^  digest:/ { print "  digest: \"" digest "\""; seen++; next }
  { print }
  END { if (seen != 2) { print "publish.sh: values.yaml has no image.repository and image.digest to set" > "/dev/stderr"; exit 1 } }
' "$root/charts/dsguard/values.yaml" > "$tmp/dsguard/values.yaml"
helm package "$tmp/dsguard" --version "$version" --app-version "$version" -d "$tmp" > /dev/null
log "pushing the chart oci://$registry/charts/dsguard --version $version"
helm push "$tmp/dsguard-$version.tgz" "oci://$registry/charts" "${helm_http[@]}" > "$tmp/push.out" 2>&1 || { cat "$tmp/push.out" >&2; exit 1; }
chart_digest=$(sed -n 's/^Digest: *//p' "$tmp/push.out")
[[ $chart_digest == sha256:* ]] || { echo "publish.sh: helm push printed no digest:" >&2; cat "$tmp/push.out" >&2; exit 1; }
chart_ref="$registry/charts/dsguard@$chart_digest"

# 3. Signatures and SBOM attestations, then verify what was made.
for ref in "$image_ref" "$chart_ref"; do
  log "signing $ref"
  cosign sign --yes "${cosign_key[@]}" "${cosign_http[@]}" "$ref" > /dev/null 2> "$tmp/cosign.err" || { cat "$tmp/cosign.err" >&2; exit 1; }
done
for sbom in "${sboms[@]}"; do
  log "attesting $(basename "$sbom") to the image"
  cosign attest --yes "${cosign_key[@]}" "${cosign_http[@]}" --type cyclonedx --predicate "$sbom" "$image_ref" > /dev/null 2> "$tmp/cosign.err" ||
    { cat "$tmp/cosign.err" >&2; exit 1; }
done
for ref in "$image_ref" "$chart_ref"; do
  cosign verify "${verify_with[@]}" "${cosign_http[@]}" "$ref" > /dev/null 2> "$tmp/cosign.err" || { cat "$tmp/cosign.err" >&2; exit 1; }
  log "verified the signature of $ref"
done
if ((${#sboms[@]})); then
  cosign verify-attestation --type cyclonedx "${verify_with[@]}" "${cosign_http[@]}" "$image_ref" > /dev/null 2> "$tmp/cosign.err" ||
    { cat "$tmp/cosign.err" >&2; exit 1; }
  log "verified the SBOM attestations of $image_ref"
fi
echo "image $image_ref"
echo "chart $chart_ref"
