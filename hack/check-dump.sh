#!/usr/bin/env bash
# check-dump.sh NODES PODS_PER_NODE [yaml|json]: measure dsguard check --nodes on a cluster dump of NODES nodes
# with PODS_PER_NODE Pods each, as kubectl get nodes,pods,priorityclasses -A -o yaml (or json) writes it, beside
# the floor of merely parsing the same file with the same reader (YAML or JSON to objects, nothing decoded), and
# print the time and peak RSS of each. The dump is written once per size into a cache directory.
set -euo pipefail
nodes=${1:-5000}
per=${2:-30}
format=${3:-yaml}
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${DSGUARD_DUMP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dsguard/dumps}
mkdir -p "$cache"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/dsguard" "$root/cmd/dsguard"
go build -o "$tmp/load" "$root/test/load"
dump="$cache/dump-$nodes-$per.$format"
if [ ! -s "$dump" ]; then
  echo "writing $dump"
  "$tmp/load" dump -nodes "$nodes" -pods-per-node "$per" -format "$format" -o "$dump.part"
  mv "$dump.part" "$dump"
fi
cat > "$tmp/agent.yaml" <<'YAML'
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: monitoring}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      priorityClassName: system-node-critical
      tolerations: [{operator: Exists}]
      containers:
        - name: agent
          image: example.com/agent:v1.0.0
          resources: {requests: {cpu: 100m, memory: 128Mi}}
YAML
echo "input: $dump, $(du -m "$dump" | cut -f1) MB, $nodes nodes with $per Pods each"
/usr/bin/time -f "%M %e" -o "$tmp/time" "$tmp/load" parse "$dump"
read -r kb secs < <(tail -n 1 "$tmp/time")
echo "parse only: ${secs}s, peak RSS $((kb / 1024)) MiB"
set +e
/usr/bin/time -f "%M %e" -o "$tmp/time" "$tmp/dsguard" check "$tmp/agent.yaml" --nodes "$dump" -o wide > "$tmp/out" 2>&1
rc=$?
set -e
tail -n 3 "$tmp/out"
read -r kb secs < <(tail -n 1 "$tmp/time")
echo "dsguard check --nodes: ${secs}s, peak RSS $((kb / 1024)) MiB, exit $rc"
/usr/bin/time -f "%M %e" -o "$tmp/time" "$tmp/dsguard" version > /dev/null
read -r kb secs < <(tail -n 1 "$tmp/time")
echo "dsguard version (the binary's own footprint): peak RSS $((kb / 1024)) MiB"
