#!/usr/bin/env bash
# Runs a long step of `make test` beside the stages that follow it, at the
# lowest CPU priority, and joins it later as a stage of its own.
#
# `make test` starts the tools build (CPU bound, the longest step of a cold
# run) right after `go vet`, whose compiled packages it shares, and fuzzing
# with the race detector's unit tests (each compiles every dependency again,
# instrumented) right after the tools: each takes what the stages in front
# leave of the machine's cores (links, single-threaded tests, an e2e suite
# waiting on its control plane) instead of starting after them. Niced, it
# yields to the stage in front.
#
# Usage (DSGUARD_BACKGROUND names a directory for the steps' state and logs):
#   hack/background.sh start NAME COMMAND...  start COMMAND in a session of its own
#   hack/background.sh join NAME              print its output as it comes, wait
#                                             for its end, exit with its status
#   hack/background.sh stop-all               kill every step still running and
#                                             all they started; remove the directory
set -uo pipefail
dir="${DSGUARD_BACKGROUND:?DSGUARD_BACKGROUND must name a directory}"

case "${1:-}" in
  start)
    (($# >= 3)) || { echo "usage: hack/background.sh start NAME COMMAND..." >&2; exit 2; }
    name="$2"; shift 2
    mkdir -p "$dir"
    rm -f "$dir/$name".{log,rc,pid,start}
    date +%s >"$dir/$name.start"
    # setsid: its own process group, so that stop-all reaches every compiler
    # it started, and a Ctrl-C in the terminal reaches it only through
    # make test's trap. The status is written last, through a rename.
    setsid nice -n 19 bash -c 'out="$1"; shift; "$@" >"$out.log" 2>&1; echo $? >"$out.rc.tmp"; mv "$out.rc.tmp" "$out.rc"' \
      _ "$dir/$name" "$@" </dev/null >/dev/null 2>&1 &
    echo $! >"$dir/$name.pid"
    echo "==> $name: started in the background (its output comes where it is joined)"
    ;;
  join)
    (($# == 2)) || { echo "usage: hack/background.sh join NAME" >&2; exit 2; }
    name="$2"
    [[ -f "$dir/$name.pid" ]] || { echo "hack/background.sh: $name was not started" >&2; exit 1; }
    pid="$(cat "$dir/$name.pid")"
    joined=$(date +%s)
    tail -n +1 -f --pid="$pid" "$dir/$name.log" 2>/dev/null
    # tail ends when the step does; its status file is written just before.
    for _ in 1 2 3 4 5 6 7 8 9 10; do [[ -f "$dir/$name.rc" ]] && break; sleep 0.5; done
    [[ -f "$dir/$name.rc" ]] || { echo "hack/background.sh: $name ended without a status (killed?)" >&2; exit 1; }
    rc="$(cat "$dir/$name.rc")"
    now=$(date +%s) started="$(cat "$dir/$name.start")"
    echo "==> $name: ran $((now - started))s in all, of which $((now - joined))s after the run came to wait for it"
    exit "$rc"
    ;;
  stop-all)
    shopt -s nullglob
    for f in "$dir"/*.pid; do
      pid="$(cat "$f")"
      # The negative pid is the process group setsid made: every child too.
      kill -TERM -- "-$pid" 2>/dev/null || true
    done
    for f in "$dir"/*.pid; do
      pid="$(cat "$f")"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL -- "-$pid" 2>/dev/null || true
    done
    rm -rf "$dir"
    ;;
  *)
    echo "usage: hack/background.sh start NAME COMMAND... | join NAME | stop-all" >&2
    exit 2
    ;;
esac
