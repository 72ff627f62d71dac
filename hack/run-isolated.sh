#!/usr/bin/env bash
# Runs a command in its own process group and kills whatever is left of that
# group when it ends (envtest's etcd and kube-apiserver, dsguard, kubectl),
# also on Ctrl-C, so nothing outlives a test run or the demo.
set -uo pipefail
setsid "$@" &
pid=$!
cleanup() {
  kill -TERM -- -"$pid" 2>/dev/null || true
  sleep 1
  kill -KILL -- -"$pid" 2>/dev/null || true
}
trap 'kill -INT -- -"$pid" 2>/dev/null; wait "$pid"; cleanup; exit 130' INT TERM
wait "$pid"
rc=$?
cleanup
exit $rc
