#!/usr/bin/env bash
# Runs a command in a session of its own and kills whatever is left of that
# session when it ends (envtest's etcd and kube-apiserver, dsguard, kubectl),
# also on Ctrl-C, so nothing outlives a test run or the demo.
set -uo pipefail
setsid "$@" &
pid=$!
# Some children put themselves in a process group of their own (envtest
# starts etcd and kube-apiserver so), but none leaves the session setsid
# made: the session is what is killed, the group too for good measure.
cleanup() {
  kill -TERM -- -"$pid" 2>/dev/null || true
  pkill -TERM -s "$pid" 2>/dev/null || true
  sleep 1
  kill -KILL -- -"$pid" 2>/dev/null || true
  pkill -KILL -s "$pid" 2>/dev/null || true
}
trap 'kill -INT -- -"$pid" 2>/dev/null; wait "$pid"; cleanup; exit 130' INT TERM
wait "$pid"
rc=$?
cleanup
exit $rc
