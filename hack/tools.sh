#!/usr/bin/env bash
# Builds the binaries that the end-to-end tests and the demo need: kube-apiserver,
# kube-controller-manager and kubectl (k8s.io/kubernetes), etcd (the version that
# Kubernetes release pins) and helm. Everything comes from the Go module proxy;
# nothing is downloaded from anywhere else.
#
# Binaries are cached per user, keyed by version:
#   ${DSGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dsguard}/tools/k8s-<ver>/{kube-apiserver,...}
# A stamp file per binary marks a finished build, so a later run (CI on the same
# machine included) only checks stamps. A lock keeps two concurrent runs from
# building the same thing twice.
#
# With --node it also builds what a real node needs beside the kubelet (see
# "A real node" below): containerd, its runc shim and ctr, the CNI plugins, and
# runc from Debian's package.
#
# Usage: hack/tools.sh [--print-dir] [--node] [--only NAME,...]
#   --print-dir  print the directory holding the binaries (building first if needed)
#   --node       also build the node's container runtime and network plugins
#   --only       build (and require) only the named binaries, e.g.
#                --only kube-apiserver,kubectl,etcd for `make demo`;
#                DSGUARD_TOOLS_ONLY in the environment says the same, so that
#                a program asking for the tools directory (the e2e framework)
#                builds no more than its caller wanted
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
HELM4_VERSION="${HELM4_VERSION:-v4.3.1}"
# cert-manager's controller and cainjector, for the chart's tls.mode=certManager
# e2e test (see build_cert_manager).
CERT_MANAGER_VERSION="${CERT_MANAGER_VERSION:-v1.21.2}"
CERT_MANAGER_BINS=(cert-manager-controller cert-manager-cainjector)
# Their stamp names the version and the sources of hack/cert-manager, so that a
# change there rebuilds them.
CERT_MANAGER_STAMP="${CERT_MANAGER_VERSION} $(cat "$(dirname "${BASH_SOURCE[0]}")"/cert-manager/go.mod \
  "$(dirname "${BASH_SOURCE[0]}")"/cert-manager/*/*.go | sha256sum | cut -c1-16)"
# Kubernetes pins etcd in build/dependencies.yaml of its module; read from there
# when the module is present, this default is what v1.37.2 pins.
ETCD_VERSION="${ETCD_VERSION:-}"
# The control plane of the e2e suites, plus the pieces of a real node
# (kube-scheduler places Pods, kubelet runs them).
K8S_BINS=(kube-apiserver kube-controller-manager kubectl kube-scheduler kubelet)

CACHE_ROOT="${DSGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dsguard}/tools"
BIN_DIR="$CACHE_ROOT/k8s-${K8S_VERSION}"
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

log() { printf '[tools] %s\n' "$*" >&2; }

# in_dir DIR CMD...: runs CMD in DIR.
in_dir() { (cd "$1" && shift && "$@"); }

# with_progress KEY NAME CMD...: runs CMD, and while it runs says every 30 s
# how long NAME has been building, against what the last build of KEY took on
# this machine when there was one. Go prints nothing while it compiles, for
# minutes, and a first run should not look hung.
with_progress() {
  local key="$1" name="$2" start=$SECONDS ticker rc=0 last="" took="$CACHE_ROOT/.took-$1"
  shift 2
  [[ -f "$took" ]] && last=" (its last build here took $(cat "$took")s)"
  log "$name: building$last; cached afterwards"
  (while sleep 30; do log "$name: still building, $((SECONDS - start))s so far$last"; done) &
  ticker=$!
  "$@" || rc=$?
  kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
  ((rc != 0)) || echo "$((SECONDS - start))" >"$took"
  return $rc
}

print_dir=false
node=false
only="${DSGUARD_TOOLS_ONLY:-}"
usage() { echo "usage: hack/tools.sh [--print-dir] [--node] [--only NAME,...]" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --print-dir) print_dir=true ;;
    --node) node=true ;;
    --only) (($# > 1)) || usage; only="$2"; shift ;;
    *) usage ;;
  esac
  shift
done

# wanted NAME: whether this run builds and requires NAME.
wanted() { [[ -z "$only" || ",$only," == *",$1,"* ]]; }
if [[ -n "$only" ]]; then
  known=" ${K8S_BINS[*]} etcd helm helm4 ${CERT_MANAGER_BINS[*]} "
  IFS=, read -ra only_list <<<"$only"
  for b in "${only_list[@]}"; do
    [[ "$known" == *" $b "* ]] || { echo "hack/tools.sh: --only: unknown binary $b (known:$known)" >&2; exit 2; }
  done
  kept=()
  for b in "${K8S_BINS[@]}"; do wanted "$b" && kept+=("$b"); done
  K8S_BINS=("${kept[@]}")
fi

mkdir -p "$BIN_DIR"

all_stamped() {
  local b
  for b in "${K8S_BINS[@]}" etcd helm helm4; do
    wanted "$b" || continue
    [[ -f "$BIN_DIR/.stamp-$b" && -x "$BIN_DIR/$b" ]] || return 1
  done
  for b in "${CERT_MANAGER_BINS[@]}"; do
    wanted "$b" || continue
    [[ "$(cat "$BIN_DIR/.stamp-$b" 2>/dev/null)" == "$CERT_MANAGER_STAMP" && -x "$BIN_DIR/$b" ]] || return 1
  done
}

# --- A real node -----------------------------------------------------------
# containerd 2.x, because the kubelet takes its cgroup driver from the
# runtime's RuntimeConfig CRI call, which containerd has from 2.0 on (Debian's
# containerd is 1.6). Built from the Go module proxy without cgo: the btrfs,
# devmapper and zfs snapshotters are left out (overlayfs and native remain).
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
CONTAINERD_BINS=(containerd containerd-shim-runc-v2 ctr)
# The CNI plugins the test node's network uses (bridge, host-local,
# loopback), and portmap for hostPort Pods. Go builds from the module proxy:
# they are pure Go, while Debian's containernetworking-plugins is 1.1.
CNI_PLUGINS_VERSION="${CNI_PLUGINS_VERSION:-v1.10.0}"
CNI_PLUGINS=(main/bridge ipam/host-local main/loopback meta/portmap)
# runc comes from Debian's package, not a Go build: runc needs cgo for its
# nsenter, and libseccomp for the RuntimeDefault seccomp profile the chart
# asks for, so a Go build would need a C compiler and libseccomp-dev from
# Debian anyway; the package brings a seccomp-enabled runc with no build.

# node_stamped: each stamp holds the version it was built at, so raising a
# version rebuilds.
node_stamped() {
  local b
  for b in "${CONTAINERD_BINS[@]}"; do
    [[ "$(cat "$BIN_DIR/.stamp-$b" 2>/dev/null)" == "$CONTAINERD_VERSION" && -x "$BIN_DIR/$b" ]] || return 1
  done
  for b in "${CNI_PLUGINS[@]}"; do
    [[ "$(cat "$BIN_DIR/cni/.stamp-${b##*/}" 2>/dev/null)" == "$CNI_PLUGINS_VERSION" && -x "$BIN_DIR/cni/${b##*/}" ]] || return 1
  done
  command -v runc >/dev/null
}

build_containerd() {
  local b wanted=()
  for b in "${CONTAINERD_BINS[@]}"; do
    [[ "$(cat "$BIN_DIR/.stamp-$b" 2>/dev/null)" == "$CONTAINERD_VERSION" ]] || wanted+=("$b")
  done
  ((${#wanted[@]})) || return 0
  local start=$SECONDS dir="$work/containerd" mod=github.com/containerd/containerd/v2 pkgs=()
  mkdir -p "$dir"
  printf 'module dsguard.local/containerd-tools\n\ngo 1.26\n' >"$dir/go.mod"
  for b in "${wanted[@]}"; do pkgs+=("$mod/cmd/$b"); done
  log "containerd ${CONTAINERD_VERSION}: resolving modules"
  (cd "$dir" && go get "${pkgs[@]/%/@${CONTAINERD_VERSION}}" >/dev/null 2>&1 || (cd "$dir" && go get "${pkgs[@]/%/@${CONTAINERD_VERSION}}"))
  local ld="-s -w -X $mod/version.Version=${CONTAINERD_VERSION} -X $mod/version.Package=$mod -X $mod/version.Revision=module-proxy"
  with_progress containerd "containerd ${CONTAINERD_VERSION} (${wanted[*]})" \
    in_dir "$dir" go build -trimpath -tags "no_btrfs no_devmapper no_zfs urfave_cli_no_docs" -ldflags "$ld" -o "$work/cbin/" "${pkgs[@]}"
  for b in "${wanted[@]}"; do
    mv -f "$work/cbin/$b" "$BIN_DIR/$b"
    echo "$CONTAINERD_VERSION" >"$BIN_DIR/.stamp-$b"
  done
  log "containerd ${CONTAINERD_VERSION}: built ${wanted[*]} in $((SECONDS - start))s"
}

build_cni_plugins() {
  local p wanted=()
  for p in "${CNI_PLUGINS[@]}"; do
    [[ "$(cat "$BIN_DIR/cni/.stamp-${p##*/}" 2>/dev/null)" == "$CNI_PLUGINS_VERSION" ]] || wanted+=("github.com/containernetworking/plugins/plugins/$p")
  done
  ((${#wanted[@]})) || return 0
  local start=$SECONDS dir="$work/cni"
  mkdir -p "$dir" "$BIN_DIR/cni"
  printf 'module dsguard.local/cni-tools\n\ngo 1.26\n' >"$dir/go.mod"
  log "CNI plugins ${CNI_PLUGINS_VERSION}: resolving modules"
  (cd "$dir" && go get "${wanted[@]/%/@${CNI_PLUGINS_VERSION}}" >/dev/null 2>&1 || (cd "$dir" && go get "${wanted[@]/%/@${CNI_PLUGINS_VERSION}}"))
  with_progress cni "CNI plugins ${CNI_PLUGINS_VERSION} (${wanted[*]##*/})" \
    in_dir "$dir" go build -trimpath -ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=${CNI_PLUGINS_VERSION}" -o "$work/cnibin/" "${wanted[@]}"
  for p in "${wanted[@]}"; do
    mv -f "$work/cnibin/${p##*/}" "$BIN_DIR/cni/${p##*/}"
    echo "$CNI_PLUGINS_VERSION" >"$BIN_DIR/cni/.stamp-${p##*/}"
  done
  log "CNI plugins ${CNI_PLUGINS_VERSION}: built in $((SECONDS - start))s"
}

# install_runc installs Debian's runc when none is on PATH. Only as root: a
# developer without root installs it once with `apt-get install runc`.
install_runc() {
  command -v runc >/dev/null && return 0
  if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null; then
    log "runc is not installed; as root: apt-get install runc"
    return 1
  fi
  local start=$SECONDS
  log "runc: installing Debian's package"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends runc >/dev/null 2>&1; then
    apt-get update >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends runc >/dev/null
  fi
  log "runc: $(runc --version | head -1) installed in $((SECONDS - start))s"
}

if all_stamped && { ! $node || node_stamped; }; then
  log "all binaries cached in $BIN_DIR"
  $print_dir && echo "$BIN_DIR"
  exit 0
fi

# One builder at a time; a second run waits, then finds the stamps.
exec 9>"$CACHE_ROOT/.lock"
log "waiting for the build lock $CACHE_ROOT/.lock"
flock 9

total_start=$SECONDS
work="$(mktemp -d "${TMPDIR:-/tmp}/dsguard-tools.XXXXXX")"
trap 'rm -rf "$work"' EXIT

k8s_gomod() {
  go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p'
}
k8s_dir() {
  go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

# Kubernetes' go.mod replaces every staging module with ./staging/src/...; a
# wrapper module must replace them with the published v0.x.y of the same release.
build_kubernetes() {
  local wanted=() b
  for b in "${K8S_BINS[@]}"; do
    [[ -f "$BIN_DIR/.stamp-$b" ]] || wanted+=("$b")
  done
  ((${#wanted[@]})) || return 0
  local start=$SECONDS dir="$work/kubernetes" gomod staging_ver
  mkdir -p "$dir"
  gomod="$(k8s_gomod)"
  staging_ver="v0.${K8S_VERSION#v1.}"
  {
    echo "module dsguard.local/k8s-tools"
    echo
    echo "go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/')"
    echo
    echo "require k8s.io/kubernetes ${K8S_VERSION}"
    echo
    grep -E '^[[:space:]]*k8s.io/[^ ]+ => ./staging/' "$gomod" |
      awk -v v="$staging_ver" '{print "replace " $1 " => " $1 " " v}'
  } >"$dir/go.mod"
  log "kubernetes ${K8S_VERSION}: resolving modules ($(grep -c '^replace' "$dir/go.mod") staging replaces)"
  local pkgs=() maj min date
  for b in "${wanted[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  (cd "$dir" && go get "${pkgs[@]/%/@${K8S_VERSION}}" >/dev/null 2>&1 || (cd "$dir" && go get "${pkgs[@]}"))
  maj="${K8S_VERSION#v}"; maj="${maj%%.*}"
  min="${K8S_VERSION#v*.}"; min="${min%%.*}"
  date="1970-01-01T00:00:00Z"
  local ld=""
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ld+=" -X $p.gitVersion=${K8S_VERSION} -X $p.gitMajor=${maj} -X $p.gitMinor=${min}"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=${date}"
  done
  with_progress "kubernetes-${wanted[*]// /,}" "kubernetes ${K8S_VERSION} (${wanted[*]})" \
    in_dir "$dir" go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "-s -w $ld" -o "$work/kbin/" "${pkgs[@]}"
  for b in "${wanted[@]}"; do
    mv -f "$work/kbin/$b" "$BIN_DIR/$b"
    touch "$BIN_DIR/.stamp-$b"
  done
  log "kubernetes ${K8S_VERSION}: built ${wanted[*]} in $((SECONDS - start))s"
}

build_etcd() {
  wanted etcd || return 0
  [[ -f "$BIN_DIR/.stamp-etcd" ]] && return 0
  local start=$SECONDS dir="$work/etcd" ver="$ETCD_VERSION"
  if [[ -z "$ver" ]]; then
    ver="$(awk '/^[[:space:]]*- name: "etcd"/{f=1} f && /version:/{print $2; exit}' "$(k8s_dir)/build/dependencies.yaml")"
    [[ "$ver" == v* ]] || ver="v$ver"
  fi
  mkdir -p "$dir"
  printf 'module dsguard.local/etcd-tools\n\ngo 1.26\n' >"$dir/go.mod"
  log "etcd ${ver}: resolving modules"
  (cd "$dir" && go get "go.etcd.io/etcd/server/v3@${ver}" >/dev/null)
  with_progress etcd "etcd ${ver}" \
    in_dir "$dir" go build -trimpath -ldflags "-s -w" -o "$BIN_DIR/etcd" go.etcd.io/etcd/server/v3
  echo "$ver" >"$BIN_DIR/.stamp-etcd"
  log "etcd ${ver}: built in $((SECONDS - start))s"
}

build_helm() {
  wanted helm || return 0
  [[ -f "$BIN_DIR/.stamp-helm" ]] && return 0
  local start=$SECONDS dir="$work/helm" maj min
  maj="${K8S_VERSION#v}"; maj="${maj%%.*}"
  min="${K8S_VERSION#v*.}"; min="${min%%.*}"
  mkdir -p "$dir"
  printf 'module dsguard.local/helm-tools\n\ngo 1.26\n' >"$dir/go.mod"
  log "helm ${HELM_VERSION}: resolving modules"
  (cd "$dir" && go get "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" >/dev/null 2>&1)
  local ld="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}"
  ld+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for p in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ld+=" -X $p.k8sVersionMajor=${maj} -X $p.k8sVersionMinor=${min}"
  done
  with_progress helm "helm ${HELM_VERSION}" \
    in_dir "$dir" go build -trimpath -ldflags "$ld" -o "$BIN_DIR/helm" helm.sh/helm/v3/cmd/helm
  touch "$BIN_DIR/.stamp-helm"
  log "helm ${HELM_VERSION}: built in $((SECONDS - start))s"
}

# Helm 4 takes its Kubernetes version for `helm template` from the client-go
# module it is built with (read from the binary's build info), so only its own
# version needs stamping. Installed as helm4 beside helm v3.
build_helm4() {
  wanted helm4 || return 0
  [[ -f "$BIN_DIR/.stamp-helm4" ]] && return 0
  local start=$SECONDS dir="$work/helm4"
  mkdir -p "$dir"
  printf 'module dsguard.local/helm4-tools\n\ngo 1.26\n' >"$dir/go.mod"
  log "helm ${HELM4_VERSION}: resolving modules"
  (cd "$dir" && go get "helm.sh/helm/v4/cmd/helm@${HELM4_VERSION}" >/dev/null 2>&1)
  local ld="-s -w -X helm.sh/helm/v4/internal/version.version=${HELM4_VERSION}"
  ld+=" -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
  with_progress helm4 "helm ${HELM4_VERSION}" \
    in_dir "$dir" go build -trimpath -ldflags "$ld" -o "$BIN_DIR/helm4" helm.sh/helm/v4/cmd/helm
  touch "$BIN_DIR/.stamp-helm4"
  log "helm ${HELM4_VERSION}: built in $((SECONDS - start))s"
}

# cert-manager publishes the main packages of its controller and cainjector as
# modules the Go module proxy does not serve; hack/cert-manager holds two small
# mains that wire the same controllers from the github.com/cert-manager/cert-manager
# module (which it serves, without replace directives), in a module of their
# own so that dsguard's go.mod stays free of the issuers' dependencies.
build_cert_manager() {
  local b missing=false
  for b in "${CERT_MANAGER_BINS[@]}"; do
    wanted "$b" || continue
    [[ "$(cat "$BIN_DIR/.stamp-$b" 2>/dev/null)" == "$CERT_MANAGER_STAMP" ]] || missing=true
  done
  $missing || return 0
  local start=$SECONDS dir="$work/cert-manager"
  cp -r "$(dirname "${BASH_SOURCE[0]}")/cert-manager" "$dir"
  log "cert-manager ${CERT_MANAGER_VERSION}: resolving modules"
  (cd "$dir" && go mod edit -require "github.com/cert-manager/cert-manager@${CERT_MANAGER_VERSION}" && go mod tidy >/dev/null 2>&1 ||
    (cd "$dir" && go mod tidy))
  with_progress cert-manager "cert-manager ${CERT_MANAGER_VERSION} (controller, cainjector)" \
    in_dir "$dir" go build -trimpath -ldflags "-s -w" -o "$work/cmbin/" ./controller ./cainjector
  mv -f "$work/cmbin/controller" "$BIN_DIR/cert-manager-controller"
  mv -f "$work/cmbin/cainjector" "$BIN_DIR/cert-manager-cainjector"
  for b in "${CERT_MANAGER_BINS[@]}"; do echo "$CERT_MANAGER_STAMP" >"$BIN_DIR/.stamp-$b"; done
  log "cert-manager ${CERT_MANAGER_VERSION}: built controller and cainjector in $((SECONDS - start))s"
}

# The builds are independent; run them side by side and fail if any fails.
pids=()
build_kubernetes & pids+=($!)
build_etcd & pids+=($!)
build_helm & pids+=($!)
build_helm4 & pids+=($!)
build_cert_manager & pids+=($!)
if $node; then
  build_containerd & pids+=($!)
  build_cni_plugins & pids+=($!)
  install_runc & pids+=($!)
fi
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
((rc == 0)) || { log "a build failed"; exit 1; }
all_stamped || { log "binaries missing after build"; exit 1; }
! $node || node_stamped || { log "node binaries missing after build"; exit 1; }
log "all binaries built in $((SECONDS - total_start))s into $BIN_DIR"
$print_dir && echo "$BIN_DIR"
exit 0
