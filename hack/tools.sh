#!/usr/bin/env bash
# Builds the binaries that the end-to-end tests and the demo need: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kubectl (k8s.io/kubernetes),
# etcd (the version that Kubernetes release pins), helm 3 and 4, and
# cert-manager's controller and cainjector, all in one Go build (see "One
# module, one build" below). Everything comes from the Go module proxy; nothing
# is downloaded from anywhere else.
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
# Usage: hack/tools.sh [--print-dir] [--node] [--TOOL] [--print-TOOL] [--only NAME,...]
#   --print-dir  print the directory holding the binaries (building first if needed)
#   --node       also build the node's container runtime and network plugins
#   --TOOL       also build TOOL, one of cosign, promtool, goreleaser and
#                cyclonedx-gomod (see "Tools built from their own modules"
#                below); --print-TOOL builds it and prints its path
#   --only       build (and require) only the named binaries, e.g.
#                --only kube-apiserver,kubectl,etcd for `make demo`, or
#                --only goreleaser,cyclonedx-gomod for the release targets;
#                DSGUARD_TOOLS_ONLY in the environment says the same, so that
#                a program asking for the tools directory (the e2e framework)
#                builds no more than its caller wanted
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
HELM4_VERSION="${HELM4_VERSION:-v4.3.1}"
# cert-manager's controller and cainjector, for the chart's tls.mode=certManager
# e2e test (hack/cert-manager holds their mains).
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
# The tools built from their own modules (see "Tools built from their own
# modules" below).
MODULE_TOOLS=(cosign promtool goreleaser cyclonedx-gomod)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
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
# cold_estimate KEY: what a first build of KEY took, measured, on a 2-core
# machine with empty module, build and tool caches (the demo's four tools:
# in make demo, beside its offline build); nothing when not measured.
cold_estimate() {
  case "$1" in
    go-tools-kube-apiserver-kubectl-etcd-helm) echo 319 ;;
  esac
}
with_progress() {
  local key="$1" name="$2" start=$SECONDS ticker rc=0 last="" took="$CACHE_ROOT/.took-$1" cold
  shift 2
  cold="$(cold_estimate "$key")"
  [[ -n "$cold" ]] && last=" (a first build took ${cold}s on a fresh 2-core machine)"
  [[ -f "$took" ]] && last=" (its last build here took $(cat "$took")s)"
  log "$name: building$last; cached afterwards"
  (while sleep 30; do log "$name: still building, $((SECONDS - start))s so far$last"; done) &
  ticker=$!
  "$@" || rc=$?
  kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
  ((rc != 0)) || echo "$((SECONDS - start))" >"$took"
  # make test's table of stages lists each tool build too.
  if [[ -n "${DSGUARD_STAGES:-}" ]]; then
    printf '  tool build: %s\t%d\t%s\n' "$name" "$((SECONDS - start))" "$( ((rc == 0)) && echo ok || echo FAILED)" >>"$DSGUARD_STAGES"
  fi
  return $rc
}

print_dir=false
node=false
# module_tools are built from their own modules (below); print_tools says
# which of them to print the path of.
module_tools=()
print_tools=()
only="${DSGUARD_TOOLS_ONLY:-}"
usage() { echo "usage: hack/tools.sh [--print-dir] [--node] [--TOOL] [--print-TOOL] [--only NAME,...] (TOOL: ${MODULE_TOOLS[*]})" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --print-dir) print_dir=true ;;
    --node) node=true ;;
    --cosign|--promtool|--goreleaser|--cyclonedx-gomod) module_tools+=("${1#--}") ;;
    --print-cosign|--print-promtool|--print-goreleaser|--print-cyclonedx-gomod)
      module_tools+=("${1#--print-}"); print_tools+=("${1#--print-}") ;;
    --only) (($# > 1)) || usage; only="$2"; shift ;;
    *) usage ;;
  esac
  shift
done

# wanted NAME: whether this run builds and requires NAME.
wanted() { [[ -z "$only" || ",$only," == *",$1,"* ]]; }
if [[ -n "$only" ]]; then
  known=" ${K8S_BINS[*]} etcd helm helm4 ${CERT_MANAGER_BINS[*]} ${MODULE_TOOLS[*]} "
  IFS=, read -ra only_list <<<"$only"
  for b in "${only_list[@]}"; do
    [[ "$known" == *" $b "* ]] || { echo "hack/tools.sh: --only: unknown binary $b (known:$known)" >&2; exit 2; }
    # A tool of its own module named there is built, as with --TOOL.
    if [[ " ${MODULE_TOOLS[*]} " == *" $b "* ]]; then module_tools+=("$b"); fi
  done
  kept=()
  for b in "${K8S_BINS[@]}"; do wanted "$b" && kept+=("$b"); done
  K8S_BINS=("${kept[@]}")
fi

# A tool asked for twice (--only and --print-TOOL) is built once: two
# builds into one directory would race.
if ((${#module_tools[@]})); then
  mapfile -t module_tools < <(printf '%s\n' "${module_tools[@]}" | awk '!seen[$0]++')
fi

mkdir -p "$BIN_DIR"

# all_stamped: every wanted binary is built (stamped, defined below).
all_stamped() {
  local b
  for b in "${K8S_BINS[@]}" etcd helm helm4 "${CERT_MANAGER_BINS[@]}"; do
    wanted "$b" || continue
    stamped "$b" || return 1
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

# node_stamped: the node's binaries are built at the versions above, and runc
# is installed.
node_stamped() {
  local b
  for b in "${CONTAINERD_BINS[@]}"; do stamped "$b" || return 1; done
  for b in "${CNI_PLUGINS[@]}"; do stamped "cni/${b##*/}" || return 1; done
  command -v runc >/dev/null
}

# install_runc installs Debian's runc when none is on PATH (only as root).
install_runc() { "$(dirname "${BASH_SOURCE[0]}")/debian-package.sh" runc runc; }

k8s_gomod() {
  go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p'
}
k8s_dir() {
  go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

# --- Tools built from their own modules --------------------------------------
# cosign signs and verifies a release's image and chart
# (hack/release/publish.sh); the real-node e2e publishes to a registry of its
# own with it, and `make release-publish` uses the same build. promtool runs
# the PrometheusRule's alert unit tests (test/chart). GoReleaser builds the
# release's archives (`make release`, and the snapshot make test runs), and
# cyclonedx-gomod writes their SBOMs (.goreleaser.yaml's sboms). Each is built from its
# own module, not the wrapper below: their cloud clients and Kubernetes
# libraries are versions of their own, and forcing them to the wrapper's would
# build a tool nobody released. promtool leaves out Prometheus' service
# discovery plugins (remove_all_sd): rule tests need none.
COSIGN_VERSION="${COSIGN_VERSION:-v3.1.3}"
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
GORELEASER_VERSION="${GORELEASER_VERSION:-v2.17.0}"
CYCLONEDX_GOMOD_VERSION="${CYCLONEDX_GOMOD_VERSION:-v1.10.0}"
# module_tool_dir NAME: where NAME is cached, keyed by its version.
module_tool_dir() {
  case "$1" in
    cosign) echo "$CACHE_ROOT/cosign-${COSIGN_VERSION}" ;;
    promtool) echo "$CACHE_ROOT/promtool-${PROMETHEUS_VERSION}" ;;
    goreleaser) echo "$CACHE_ROOT/goreleaser-${GORELEASER_VERSION}" ;;
    cyclonedx-gomod) echo "$CACHE_ROOT/cyclonedx-gomod-${CYCLONEDX_GOMOD_VERSION}" ;;
  esac
}
module_tool_stamped() { [[ -x "$(module_tool_dir "$1")/$1" && -f "$(module_tool_dir "$1")/.stamp-$1" ]]; }
build_module_tool() {
  local name="$1" dir args
  module_tool_stamped "$name" && return 0
  dir="$(module_tool_dir "$name")"
  case "$name" in
    cosign) args=(-ldflags "-s -w -X sigs.k8s.io/release-utils/version.gitVersion=${COSIGN_VERSION}"
      "github.com/sigstore/cosign/v3/cmd/cosign@${COSIGN_VERSION}") ;;
    promtool) args=(-tags remove_all_sd -ldflags "-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v0.}"
      "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_VERSION}") ;;
    # Both read their version from the build's module information.
    goreleaser) args=(-ldflags "-s -w" "github.com/goreleaser/goreleaser/v2@${GORELEASER_VERSION}") ;;
    cyclonedx-gomod) args=(-ldflags "-s -w" "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@${CYCLONEDX_GOMOD_VERSION}") ;;
  esac
  mkdir -p "$dir"
  with_progress "$name" "$name" env GOBIN="$dir" GOFLAGS=-buildvcs=false go install "${args[@]}"
  basename "$dir" >"$dir/.stamp-$name"
}
module_tools_stamped() { local t; for t in "${module_tools[@]}"; do module_tool_stamped "$t" || return 1; done; }

# --- One module, one build ------------------------------------------------
# Every Go binary comes from one wrapper module and one `go build`, so that:
#  - a package two tools share (client-go, grpc, protobuf, ...) is one
#    version, compiled once: built as separate modules, helm, cert-manager,
#    containerd and Kubernetes each brought their own versions of the same
#    packages, 5,400 package compiles for 3,500 distinct packages;
#  - the module also requires what dsguard's go.mod requires, and builds
#    without -trimpath, like `go vet` and `go test`: the packages dsguard and
#    the tools share (about 1,000) come from the build cache, whichever
#    compiled them first;
#  - Go schedules every compile and link of every tool on the machine's cores
#    at once, critical path first, instead of seven builds fighting for them.
# The build tags are containerd's alone (its btrfs, devmapper and zfs
# snapshotters need cgo); they select files in containerd's packages only.
# The binaries are test tools, cached per machine: no -trimpath needed.
#
# Kubernetes' go.mod replaces every staging module with ./staging/src/...; the
# wrapper replaces them with the published v0.x.y of the same release.

# go_package NAME: the package and version that builds NAME.
go_package() {
  case "$1" in
    kube-*|kubectl|kubelet) echo "k8s.io/kubernetes/cmd/$1@${K8S_VERSION}" ;;
    etcd) echo "go.etcd.io/etcd/server/v3@$(etcd_version)" ;;
    helm) echo "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" ;;
    helm4) echo "helm.sh/helm/v4/cmd/helm@${HELM4_VERSION}" ;;
    cert-manager-controller) echo "./cert-manager/controller" ;;
    cert-manager-cainjector) echo "./cert-manager/cainjector" ;;
    containerd|containerd-shim-runc-v2|ctr) echo "github.com/containerd/containerd/v2/cmd/$1@${CONTAINERD_VERSION}" ;;
    cni/*) echo "github.com/containernetworking/plugins/plugins/$(cni_plugin "${1#cni/}")@${CNI_PLUGINS_VERSION}" ;;
    *) log "no package for $1"; return 1 ;;
  esac
}
# go build names a binary after its package's last element (a /vN suffix
# skipped): built_name NAME says which.
built_name() {
  case "$1" in
    etcd) echo server ;;
    helm|helm4) echo helm ;;
    cert-manager-controller) echo controller ;;
    cert-manager-cainjector) echo cainjector ;;
    cni/*) echo "${1#cni/}" ;;
    *) echo "$1" ;;
  esac
}
cni_plugin() { local p; for p in "${CNI_PLUGINS[@]}"; do [[ "${p##*/}" == "$1" ]] && echo "$p"; done; }
# target NAME: where NAME is installed, and what its stamp holds once built.
target() { echo "$BIN_DIR/$1"; }
stamp_file() { local d; d="$(dirname "$(target "$1")")"; echo "$d/.stamp-$(basename "$1")"; }
stamp_value() {
  case "$1" in
    kube-*|kubectl|kubelet) echo "${K8S_VERSION}" ;;
    etcd) etcd_version ;;
    helm) echo "${HELM_VERSION}" ;;
    helm4) echo "${HELM4_VERSION}" ;;
    cert-manager-*) echo "${CERT_MANAGER_STAMP}" ;;
    containerd|containerd-shim-runc-v2|ctr) echo "${CONTAINERD_VERSION}" ;;
    cni/*) echo "${CNI_PLUGINS_VERSION}" ;;
  esac
}

etcd_version() {
  local ver="$ETCD_VERSION"
  if [[ -z "$ver" ]]; then
    ver="$(awk '/^[[:space:]]*- name: "etcd"/{f=1} f && /version:/{print $2; exit}' "$(k8s_dir)/build/dependencies.yaml")"
  fi
  [[ "$ver" == v* ]] || ver="v$ver"
  echo "$ver"
}

# write_wrapper_module DIR PKG...: the wrapper's go.mod, with dsguard's
# requirements, Kubernetes' staging replaces and every package as a tool.
write_wrapper_module() {
  local dir="$1" gomod staging_ver
  shift
  gomod="$(k8s_gomod)"
  staging_ver="v0.${K8S_VERSION#v1.}"
  mkdir -p "$dir"
  {
    echo "module dsguard.local/tools"
    echo
    echo "go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/')"
    echo
    awk '/^require \($/ {f = 1; next} f && /^\)$/ {f = 0} f && NF >= 2 {print "require " $1 " " $2} /^require [^(]/ {print "require " $2 " " $3}' "$ROOT/go.mod"
    echo
    grep -E '^[[:space:]]*k8s.io/[^ ]+ => ./staging/' "$gomod" |
      awk -v v="$staging_ver" '{print "replace " $1 " => " $1 " " v}'
  } >"$dir/go.mod"
  local remote=() p
  for p in "$@"; do
    if [[ "$p" == ./cert-manager/* ]]; then
      mkdir -p "$dir/cert-manager"
      cp -r "$ROOT/hack/cert-manager/${p#./cert-manager/}" "$dir/cert-manager/"
    else
      remote+=("$p")
    fi
  done
  log "resolving modules for ${#remote[@]} tool packages in one module ($(grep -c '^replace' "$dir/go.mod") staging replaces)"
  in_dir "$dir" go get -tool "${remote[@]}" >/dev/null 2>&1 || in_dir "$dir" go get -tool "${remote[@]}"
  in_dir "$dir" go mod tidy >/dev/null 2>&1 || in_dir "$dir" go mod tidy
}

# version_ldflags: the -X flags of every tool, for one link command (a -X
# for a package a binary does not have is ignored).
version_ldflags() {
  local maj min p ld="-s -w"
  maj="${K8S_VERSION#v}"; maj="${maj%%.*}"
  min="${K8S_VERSION#v*.}"; min="${min%%.*}"
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ld+=" -X $p.gitVersion=${K8S_VERSION} -X $p.gitMajor=${maj} -X $p.gitMinor=${min}"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  ld+=" -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION} -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for p in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ld+=" -X $p.k8sVersionMajor=${maj} -X $p.k8sVersionMinor=${min}"
  done
  # Helm 4 takes its Kubernetes version for `helm template` from the
  # client-go module it is built with (read from the binary's build info).
  ld+=" -X helm.sh/helm/v4/internal/version.version=${HELM4_VERSION} -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
  p=github.com/containerd/containerd/v2/version
  ld+=" -X $p.Version=${CONTAINERD_VERSION} -X $p.Package=github.com/containerd/containerd/v2 -X $p.Revision=module-proxy"
  ld+=" -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=${CNI_PLUGINS_VERSION}"
  echo "$ld"
}

# stamped NAME: NAME is built at the version this script wants. Kubernetes,
# etcd and helm stamps are only checked to exist (they name their version in
# the directory or did not always hold it).
stamped() {
  local f
  f="$(stamp_file "$1")"
  [[ -f "$f" && -x "$(target "$1")" ]] || return 1
  case "$1" in
    kube-*|kubectl|kubelet|etcd|helm|helm4) return 0 ;;
  esac
  [[ "$(cat "$f")" == "$(stamp_value "$1")" ]]
}

# go_builds runs in the wrapper module with build_go_tools' variables. helm v3
# and v4 are both "helm": one -o directory cannot take both, so v3 links in a
# second command, its packages compiled by then.
go_builds() {
  if ((${#main[@]})); then "${build[@]}" -o "$work/bin/" "${main[@]}"; fi
  if $helm3; then "${build[@]}" -o "$work/helm3/helm" helm.sh/helm/v3/cmd/helm; fi
}

build_go_tools() {
  local names=() b
  for b in "${K8S_BINS[@]}" etcd helm helm4 "${CERT_MANAGER_BINS[@]}"; do
    wanted "$b" && ! stamped "$b" && names+=("$b")
  done
  if $node; then
    for b in "${CONTAINERD_BINS[@]}"; do stamped "$b" || names+=("$b"); done
    for b in "${CNI_PLUGINS[@]}"; do stamped "cni/${b##*/}" || names+=("cni/${b##*/}"); done
  fi
  ((${#names[@]})) || return 0
  local start=$SECONDS dir="$work/tools" pkgs=() main=() helm3=false ld
  for b in "${names[@]}"; do
    pkgs+=("$(go_package "$b")")
    if [[ "$b" == helm ]]; then helm3=true; else main+=("${pkgs[-1]%@*}"); fi
  done
  write_wrapper_module "$dir" "${pkgs[@]}"
  ld="$(version_ldflags)"
  # helm v3 and v4 are both "helm": one -o directory cannot take both, so
  # v3 links in a second command (its packages are compiled by then).
  local build=(go build -tags "no_btrfs no_devmapper no_zfs urfave_cli_no_docs" -ldflags "$ld")
  log "building ${names[*]}"
  # Keyed by the set built, so that the demo's few tools and the tests' many
  # each compare with their own last build.
  local built_set="${names[*]}"
  with_progress "go-tools-${built_set//[ \/]/-}" "${#names[@]} Go binaries (${built_set})" in_dir "$dir" go_builds
  for b in "${names[@]}"; do
    local from="$work/bin/$(built_name "$b")"
    [[ "$b" == helm ]] && from="$work/helm3/helm"
    mkdir -p "$(dirname "$(target "$b")")"
    mv -f "$from" "$(target "$b")"
    stamp_value "$b" >"$(stamp_file "$b")"
  done
  log "built ${names[*]} in $((SECONDS - start))s"
}

# The builds are independent; run them side by side and fail if any fails.
# print_paths prints what --print-dir and --print-<tool> asked for.
print_paths() {
  local t
  $print_dir && echo "$BIN_DIR"
  for t in "${print_tools[@]}"; do echo "$(module_tool_dir "$t")/$t"; done
}

if all_stamped && { ! $node || node_stamped; } && module_tools_stamped; then
  log "all binaries cached in $BIN_DIR"
  print_paths
  exit 0
fi

# One builder at a time; a second run waits, then finds the stamps.
exec 9>"$CACHE_ROOT/.lock"
log "waiting for the build lock $CACHE_ROOT/.lock"
flock 9

total_start=$SECONDS
work="$(mktemp -d "${TMPDIR:-/tmp}/dsguard-tools.XXXXXX")"
trap 'rm -rf "$work"' EXIT

pids=()
build_go_tools & pids+=($!)
if $node; then
  install_runc & pids+=($!)
fi
for t in "${module_tools[@]}"; do
  build_module_tool "$t" & pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
((rc == 0)) || { log "a build failed"; exit 1; }
all_stamped || { log "binaries missing after build"; exit 1; }
! $node || node_stamped || { log "node binaries missing after build"; exit 1; }
module_tools_stamped || { log "${module_tools[*]} missing after build"; exit 1; }
log "all binaries built in $((SECONDS - total_start))s into $BIN_DIR"
print_paths
exit 0
