#!/usr/bin/env bash
# check-memory.sh [MB [FORMAT...]]: measure dsguard check's peak memory on a generated manifest file of about
# MB megabytes (default 50) of DaemonSets, every one with findings, and print the peak RSS of each output
# format (default: all of them). check reads one document at a time and every format writes each DaemonSet as
# it is judged, so the peak should follow the largest document, not the input.
set -euo pipefail
mb=${1:-50}
shift $(($# > 0 ? 1 : 0))
formats=("$@")
[ ${#formats[@]} -gt 0 ] || formats=(text wide json sarif junit github)
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/dsguard" "$root/cmd/dsguard"
awk -v target=$((mb * 1024 * 1024)) 'BEGIN {
  for (i = 0; size < target; i++) {
    doc = sprintf("---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent-%d\n  namespace: team-%d\n  labels: {app: agent-%d, team: team-%d}\n  annotations:\n    description: \"%s\"\nspec:\n  selector:\n    matchLabels: {app: agent-%d}\n  updateStrategy:\n    type: RollingUpdate\n    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}\n  template:\n    metadata:\n      labels: {app: agent-%d}\n    spec:\n      hostNetwork: true\n      containers:\n        - name: agent\n          image: example.com/agent:latest\n          ports: [{containerPort: 9100, hostPort: 9100}]\n          securityContext: {privileged: true}\n          volumeMounts: [{name: root, mountPath: /host}]\n        - name: sidecar\n          image: example.com/sidecar:v1.2.3\n      volumes: [{name: root, hostPath: {path: /}}]\n",
      i, i % 50, i, i % 50, sprintf("%0400d", i), i, i)
    printf "%s", doc
    size += length(doc)
  }
}' > "$tmp/big.yaml"
docs=$(grep -c '^kind: DaemonSet' "$tmp/big.yaml")
echo "input: $(du -m "$tmp/big.yaml" | cut -f1) MB, $docs DaemonSets"
for format in "${formats[@]}"; do
  set +e
  /usr/bin/time -f "%M %e" -o "$tmp/time" "$tmp/dsguard" check "$tmp/big.yaml" -o "$format" > /dev/null
  rc=$?
  set -e
  read -r kb secs < <(tail -n 1 "$tmp/time")
  echo "-o $format: peak RSS $((kb / 1024)) MiB, ${secs}s, exit $rc"
done
