package framework

// The configuration files of the test node, filled in by StartNode.

// containerdConfig: its own root, state, sockets (its own and the shims')
// and runc root under the node's directory; network namespaces mounted there too; the locally built
// pause image; OOM scores not lowered below containerd's; no NRI, no TCP
// streaming service. Arguments: node directory,
// socket, tools directory.
const containerdConfig = `version = 3
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "%[2]s"

[ttrpc]
  address = "%[2]s.ttrpc"

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = "%[1]s/containerd/opt"
  # The shims' sockets, by default under /run/containerd/s.
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = "%[1]s/s"
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "` + PauseImage + `"
  [plugins.'io.containerd.cri.v1.runtime']
    netns_mounts_under_state_dir = true
    # A sandbox may lack CAP_SYS_RESOURCE (this test machine does): never
    # lower a container's OOM score below containerd's own.
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          Root = "%[1]s/runc"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["%[3]s/cni"]
      conf_dir = "%[1]s/net.d"
  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`

// cniConfig: a bridge whose host side is the Pods' gateway, addresses from
// host-local with its state under the node's directory, no masquerading
// (nothing leaves the machine). Arguments: network, bridge, subnet, IPAM dir.
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "%s",
  "plugins": [{
    "type": "bridge",
    "bridge": "%s",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": "%s"}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": "%s"
    }
  }]
}
`

// kubeletConfig: on this cgroup v1 host failCgroupV1 must be false; the
// cgroup driver comes from containerd's RuntimeConfig; the kubelet's own
// cgroups live under a root named after the node's directory; no read-only
// or healthz port; thresholds low enough for a shared test disk. Arguments:
// socket, cgroup root, port, pod log directory.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
containerRuntimeEndpoint: unix://%s
cgroupRoot: %s
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzPort: 0
podLogsDir: %s
failSwapOn: false
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2%%
  imagefs.available: 2%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusUpdateFrequency: 5s
`
