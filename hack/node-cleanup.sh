#!/usr/bin/env bash
# Removes everything a test node (test/e2e/framework's NodeCluster) made,
# whatever state its run ended in: the processes (kubelet, containerd, the
# runc shims and the containers, which all leave the test's process group),
# the containers' cgroups, every mount under the node's directory (overlay
# root filesystems, network namespaces, Pod volumes), the network devices
# (the CNI bridge, the service address on lo) and the directory itself.
#
# The Go framework calls it for its own directory when it stops; the
# e2e-node target calls it with no argument after the run, which covers a
# test binary that was killed before it could clean up.
#
# Usage: hack/node-cleanup.sh [DIR...]   (default: every ${TMPDIR:-/tmp}/dsguard-node-*)
set -uo pipefail

# Names shared with test/e2e/framework/node.go.
BRIDGE=dsg-br0
SERVICE_IP=10.96.0.1
CNI_NETWORK=dsguard-node

dirs=("$@")
if ((${#dirs[@]} == 0)); then
  shopt -s nullglob
  dirs=("${TMPDIR:-/tmp}"/dsguard-node-*)
fi

# pids_of DIR: processes whose command line mentions DIR (kubelet,
# containerd, the shims) or that sit in the node's cgroups (the containers).
pids_of() {
  local d=$1 name p pid cmd
  name=$(basename "$d")
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    cmd=$( (tr '\0' ' ' <"$p/cmdline") 2>/dev/null) || continue
    [[ $cmd == *"$d"* ]] && echo "$pid"
  done
  cat /sys/fs/cgroup/*/"$name"/cgroup.procs /sys/fs/cgroup/*/"$name"/**/cgroup.procs 2>/dev/null
}

shopt -s globstar
for d in "${dirs[@]}"; do
  [[ -n $d && $d == /* && $d != / ]] || continue
  name=$(basename "$d")
  for _ in 1 2 3 4 5; do
    pids=$(pids_of "$d" | sort -u)
    [[ -z $pids ]] && break
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null
    sleep 0.5
  done
  # Deepest mount first; lazily, as a mount point may still be busy for a moment.
  awk -v d="$d/" 'index($5, d) == 1 || $5 == substr(d, 1, length(d) - 1) {print $5}' /proc/self/mountinfo |
    sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
  # libcni caches each sandbox's results under /var/lib/cni whatever the
  # configuration; the file names carry the sandbox's ID.
  for id in $(ls "$d"/containerd/root/io.containerd.grpc.v1.cri/sandboxes "$d"/containerd/state/io.containerd.runtime.v2.task/k8s.io 2>/dev/null); do
    [[ $id =~ ^[0-9a-f]{64}$ ]] && rm -f /var/lib/cni/results/*-"$id"-*
  done
  # Children before parents.
  for cg in /sys/fs/cgroup/*/"$name"; do
    [[ -d $cg ]] && find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  for _ in 1 2 3; do
    rm -rf "$d" 2>/dev/null && break
    sleep 1
  done
done

# The devices and the CNI cache are shared by name; one node runs at a time
# (the framework holds a lock), so remove them once no node directory is left.
shopt -s nullglob
left=("${TMPDIR:-/tmp}"/dsguard-node-*)
if ((${#left[@]} == 0)); then
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE"
  ip addr show dev lo | grep -q " $SERVICE_IP/32 " && ip addr del "$SERVICE_IP/32" dev lo
  rm -rf /var/lib/cni/results/"$CNI_NETWORK"-* /var/lib/cni/networks/"$CNI_NETWORK"
  # Only if empty: a container runtime of the machine may use them.
  rmdir /var/lib/cni/results /var/lib/cni/networks /var/lib/cni 2>/dev/null
fi

# Say what could not be removed; the caller fails on it.
rc=0
for d in "${dirs[@]}"; do
  if [[ -e $d ]]; then echo "node-cleanup: $d is still there" >&2; rc=1; fi
  if grep -q " $d/" /proc/self/mountinfo; then echo "node-cleanup: mounts left under $d" >&2; rc=1; fi
  if [[ -n $(pids_of "$d") ]]; then echo "node-cleanup: processes left for $d: $(pids_of "$d" | tr '\n' ' ')" >&2; rc=1; fi
done
exit $rc
