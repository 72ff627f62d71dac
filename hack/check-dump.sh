#!/usr/bin/env bash
# check-dump.sh NODES PODS_PER_NODE [yaml|json] [kubectl|api|stripped] [MAX_SECONDS MAX_MIB]: measure dsguard
# check --nodes on a cluster dump of NODES nodes with PODS_PER_NODE Pods each, as kubectl get
# nodes,pods,priorityclasses -A -o yaml (or json) writes it (api: the one-line NodeList the API server returns,
# managedFields kept; stripped: nodes with names, labels and taints only), beside the floor of merely parsing the
# same file with the same decoder (JSON token by token; YAML split and converted, nothing decoded), and print the
# time and peak RSS of each; with MAX_SECONDS and MAX_MIB, say whether check stayed within them (exit 1 if not).
# The dump is written once per size and form into a cache directory.
set -euo pipefail
nodes=${1:-5000}
per=${2:-30}
format=${3:-yaml}
as=${4:-kubectl}
max_s=${5:-}
max_mib=${6:-}
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${DSGUARD_DUMP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dsguard/dumps}
mkdir -p "$cache"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/dsguard" "$root/cmd/dsguard"
go build -o "$tmp/load" "$root/test/load"
dump="$cache/dump-$nodes-$per-$as.$format"
if [ ! -s "$dump" ]; then
  echo "writing $dump"
  "$tmp/load" dump -nodes "$nodes" -pods-per-node "$per" -format "$format" -as "$as" -o "$dump.part"
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
echo "input: $dump ($as), $(du -m "$dump" | cut -f1) MB, $nodes nodes with $per Pods each"
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
verdict=0
if [[ -n "$max_s" ]]; then
  if awk -v s="$secs" -v m="$max_s" -v kb="$kb" -v mib="$max_mib" 'BEGIN { exit !(s <= m && kb / 1024 <= mib) }'; then
    echo "within the target: <= ${max_s}s and <= ${max_mib} MiB"
  else
    echo "OVER the target: <= ${max_s}s and <= ${max_mib} MiB"
    verdict=1
  fi
fi
/usr/bin/time -f "%M %e" -o "$tmp/time" "$tmp/dsguard" version > /dev/null
read -r kb secs < <(tail -n 1 "$tmp/time")
echo "dsguard version (the binary's own footprint): peak RSS $((kb / 1024)) MiB"
exit $verdict
