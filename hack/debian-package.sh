#!/usr/bin/env bash
# Installs a Debian package when its command is not on PATH: runc for the
# real node, chromium for the coverage map's browser test. Only as root (CI
# and the project's sessions are); a developer without root is told the
# apt-get line instead. apt keeps the package for later runs on the machine.
#
# Usage: hack/debian-package.sh COMMAND PACKAGE...
set -euo pipefail

[[ $# -ge 2 ]] || { echo "usage: hack/debian-package.sh COMMAND PACKAGE..." >&2; exit 2; }
cmd="$1"
shift
log() { echo "[debian] $*" >&2; }

command -v "$cmd" >/dev/null && exit 0
if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null; then
  log "$cmd is not installed; as root: apt-get install $*"
  exit 1
fi
start=$SECONDS
log "$cmd: installing Debian's $*"
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1; then
  apt-get update >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >/dev/null
fi
log "$cmd: $("$cmd" --version 2>/dev/null | head -1) installed in $((SECONDS - start))s"
