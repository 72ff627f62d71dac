#!/usr/bin/env bash
# make demo: dsguard's offline verdicts first, while the control plane builds
# in the background; then the live part (test/e2e/demo): a real
# kube-apiserver, dsguard serving its webhook, kubectl rejected and warned.
#
# On a cold machine the four tools the live part needs take minutes to build;
# dsguard's offline build (-tags offline,norender: check, rules and version,
# a third of the packages of the full binary) takes under a minute, so the
# first verdict comes while they build. The background step runs niced, so
# it yields to the offline build in front of it.
#
# Usage: hack/demo.sh TOOLS (comma-separated, as hack/tools.sh --only takes them)
set -euo pipefail
cd "$(dirname "$0")/.."
tools="${1:?usage: hack/demo.sh TOOLS}"
GO="${GO:-go}"
start=$SECONDS
out="${DSGUARD_DEMO_DIR:-bin/demo}"
mkdir -p "$out"
export DSGUARD_BACKGROUND
DSGUARD_BACKGROUND="$(mktemp -d "${TMPDIR:-/tmp}/dsguard-demo.XXXXXX")"
trap 'hack/background.sh stop-all' EXIT
trap 'exit 130' INT TERM

bold() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

echo "dsguard demo: first the offline engine CI runs, then a real kube-apiserver, dsguard serving its webhook, and kubectl being rejected and warned."
# The live part's program is compiled in the same background step, after
# the tools: it shares most of their packages.
hack/background.sh start "control plane" sh -c \
  "hack/tools.sh --only '$tools' && echo '[demo] compiling the live part and dsguard' &&
   $GO build -o '$out/demo-live' ./test/e2e/demo && $GO build -o /dev/null ./cmd/dsguard" >/dev/null
echo "(building kube-apiserver, etcd, kubectl and helm in the background; its progress follows the offline part)"

echo "(compiling dsguard's offline commands)"
"$GO" build -tags offline,norender -o "$out/dsguard-offline" ./cmd/dsguard

# run_check WANT_EXIT ARGS...: shows the command line and its real output,
# and fails the demo when the exit status is not the one narrated.
run_check() {
  local want="$1" rc=0
  shift
  printf '$ dsguard %s\n' "$*"
  "$out/dsguard-offline" "$@" || rc=$?
  [[ $rc == "$want" ]] || { echo "demo: unexpected: dsguard $* exited $rc, expected $want" >&2; exit 1; }
}

bold "Offline 1. node-exporter without a control-plane toleration would skip cp-1: denied, with the fix (first verdict $((SECONDS - start))s after the start)"
run_check 1 check examples/node-exporter.yaml --nodes examples/nodes.yaml
echo "(exit status 1: a CI job fails)"

bold "Offline 2. maxUnavailable 50%: passes, with a warning that half the fleet may go blind during a rollout"
run_check 0 check examples/log-shipper-half-fleet.yaml --nodes examples/nodes.yaml

bold "Offline 3. Every example against the same nodes, as a coverage map page: which node runs which agent"
run_check 1 check examples/ --nodes examples/nodes.yaml -o "html=$out/coverage-map.html"
echo "(wrote $out/coverage-map.html, $(wc -c <"$out/coverage-map.html") bytes: open it in a browser; exit status 1 because node-exporter.yaml is denied)"

bold "The live part: waiting for the control plane's build ($((SECONDS - start))s since the start)"
hack/background.sh join "control plane"
DSGUARD_TOOLS_ONLY="$tools" hack/run-isolated.sh "$out/demo-live"
echo "(make demo: $((SECONDS - start))s in all)"
