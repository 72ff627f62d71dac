package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The test node's fixed names and addresses. One node runs on a machine at a
// time (NodeCluster holds nodeLock); hack/node-cleanup.sh knows the same names.
const (
	// NodeName is the name the kubelet registers.
	NodeName = "dsguard-node"
	// nodeDirPrefix names the node's directory (and its cgroups) under $TMPDIR.
	nodeDirPrefix = "dsguard-node-"
	// serviceCIDR is the cluster's Service range; its first address is the
	// kubernetes Service, which the API server itself listens on.
	serviceCIDR = "10.96.0.0/16"
	apiServerIP = "10.96.0.1"
	// podCIDR is the bridge network's range; the host is its gateway.
	podCIDR    = "10.244.0.0/24"
	bridgeName = "dsg-br0"
	cniNetwork = "dsguard-node"
	// PauseImage is the sandbox image: hack/pause, built and imported here.
	PauseImage = "dsguard.local/pause:e2e"
)

// NodeOptions tune StartNode.
type NodeOptions struct {
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Images are OCI archives (hack/image -archive) imported into the
	// node's containerd before the kubelet starts; nothing is ever pulled.
	Images []string
}

// NodeCluster is a control plane with one real node: etcd, kube-apiserver,
// kube-controller-manager with its usual controllers, kube-scheduler, and a
// kubelet that runs Pods through containerd, runc and a bridge CNI network.
//
// There is no kube-proxy and no cluster DNS. The API server listens on the
// kubernetes Service's address itself (an address on the loopback device), so Pods reach it at the address client-go's in-cluster
// configuration reads; it calls webhook Services at their endpoints
// (--enable-aggregator-routing), which the host routes into the bridge.
//
// It needs root, cgroups and the node binaries of `hack/tools.sh --node`.
type NodeCluster struct {
	Root  string
	Tools string
	// Dir holds every file, socket and mount of the node; Stop removes it.
	Dir        string
	Kubeconfig string

	env       *envtest.Environment
	kcm       *ControllerManager
	daemons   []*daemon // started in order, stopped in reverse
	lock      *os.File
	logf      func(format string, args ...any)
	socket    string
	cgroupDir string
	// stopHeartbeats end the Lease renewals of AddControlPlaneNode.
	stopHeartbeats []chan struct{}
}

// daemon is a long-running process of the node with its log file.
type daemon struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan error
}

// NodeToolsDir returns the tools directory after `hack/tools.sh --node`,
// which adds containerd, ctr, the runc shim, the CNI plugins and runc.
func NodeToolsDir(root string) (string, error) {
	if dir := os.Getenv("DSGUARD_TOOLS_DIR"); dir != "" {
		return dir, nil
	}
	r := Run(context.Background(), root, "", nil, "bash", filepath.Join(root, "hack", "tools.sh"), "--node", "--print-dir")
	if r.Err != nil {
		return "", fmt.Errorf("hack/tools.sh --node: %v: %s", r.Err, r.Stderr)
	}
	return strings.TrimSpace(r.Stdout), nil
}

// StartNode starts the control plane and the node and waits until the node
// is Ready. Stop undoes all of it, and so does hack/node-cleanup.sh when the
// test process was killed.
func StartNode(ctx context.Context, opts NodeOptions) (_ *NodeCluster, err error) {
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	n := &NodeCluster{logf: func(format string, args ...any) { fmt.Fprintf(logw, format+"\n", args...) }}
	if os.Geteuid() != 0 {
		return nil, errors.New("a real node needs root (containerd, runc, cgroups, network devices)")
	}
	if n.Root, err = RepoRoot(); err != nil {
		return nil, err
	}
	if n.Tools, err = NodeToolsDir(n.Root); err != nil {
		return nil, err
	}
	// One node per machine: the bridge, the service address and the CNI
	// network are fixed names.
	if n.lock, err = os.OpenFile(filepath.Join(os.TempDir(), "dsguard-node.lock"), os.O_CREATE|os.O_RDWR, 0o600); err != nil {
		return nil, err
	}
	if err = syscall.Flock(int(n.lock.Fd()), syscall.LOCK_EX); err != nil {
		n.lock.Close()
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = n.Stop()
		}
	}()
	// What an earlier run that was killed left behind.
	if err = n.cleanup(); err != nil {
		return nil, err
	}
	if n.Dir, err = os.MkdirTemp("", nodeDirPrefix); err != nil {
		return nil, err
	}
	n.socket = filepath.Join(n.Dir, "containerd.sock")

	start := time.Now()
	if err = n.addServiceAddress(); err != nil {
		return nil, err
	}
	if err = n.startControlPlane(); err != nil {
		return nil, err
	}
	n.logf("started etcd and kube-apiserver at %s in %s", n.env.Config.Host, since(start))

	start = time.Now()
	if err = n.startContainerd(); err != nil {
		return nil, err
	}
	for _, img := range opts.Images {
		if err = n.ImportImage(ctx, img); err != nil {
			return nil, err
		}
	}
	n.logf("started containerd and imported %d images in %s", len(opts.Images), since(start))

	start = time.Now()
	if err = n.startKubelet(); err != nil {
		return nil, err
	}
	if err = n.waitNodeReady(ctx, 3*time.Minute); err != nil {
		return nil, err
	}
	// From 1.36 the kubelet no longer falls back to its own cgroupDriver:
	// containerd must hand it over through the RuntimeConfig CRI call.
	if log := n.DaemonLog("kubelet"); !strings.Contains(log, "Using cgroup driver setting received from the CRI runtime") {
		return nil, fmt.Errorf("the kubelet did not get its cgroup driver from containerd (RuntimeConfig); kubelet log:\n%s", LastLines(log, 40))
	}
	n.logf("node %s Ready in %s (cgroup driver from containerd's RuntimeConfig)", NodeName, since(start))
	return n, nil
}

// addServiceAddress puts the kubernetes Service's address on the loopback
// device: Pods' packets to it arrive over the bridge and are delivered
// locally, to the API server listening there.
func (n *NodeCluster) addServiceAddress() error {
	// Already there: left by a run that could not clean up; the lock makes it ours.
	if out, err := exec.Command("ip", "addr", "add", apiServerIP+"/32", "dev", "lo").CombinedOutput(); err != nil &&
		!strings.Contains(string(out), "already assigned") && !strings.Contains(string(out), "File exists") {
		return fmt.Errorf("ip addr add %s/32 dev lo: %v: %s", apiServerIP, err, out)
	}
	return nil
}

func (n *NodeCluster) startControlPlane() error {
	n.env = &envtest.Environment{
		BinaryAssetsDirectory:    n.Tools,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	// envtest starts etcd and kube-apiserver in process groups of their own,
	// so a killed test leaves them running: with their directories under
	// Dir, hack/node-cleanup.sh finds them by their command lines.
	for _, d := range []string{"etcd", "apiserver"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o700); err != nil {
			return err
		}
	}
	n.env.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(n.Dir, "etcd")}
	api := n.env.ControlPlane.GetAPIServer()
	api.CertDir = filepath.Join(n.Dir, "apiserver")
	api.SecureServing.ListenAddr.Address = apiServerIP
	api.SecureServing.ListenAddr.Port = "443"
	args := api.Configure()
	args.Set("service-cluster-ip-range", serviceCIDR)
	args.Set("advertise-address", apiServerIP)
	args.Set("enable-aggregator-routing", "true")
	// envtest turns the ServiceAccount admission plugin off; Pods need it to
	// get their token.
	args.Disable("disable-admission-plugins")
	if _, err := n.env.Start(); err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	n.Kubeconfig = filepath.Join(n.Dir, "kubeconfig")
	if err := os.WriteFile(n.Kubeconfig, n.env.KubeConfig, 0o600); err != nil {
		return err
	}
	ca := filepath.Join(n.Dir, "ca.crt")
	if err := os.WriteFile(ca, n.env.Config.CAData, 0o644); err != nil {
		return err
	}
	var err error
	n.kcm, err = StartControllerManager(ControllerManagerOptions{
		Tools: n.Tools, KubeConfig: n.env.KubeConfig, Dir: n.Dir,
		Controllers: []string{"*"},
		Args: []string{
			"--root-ca-file=" + ca,
			"--service-account-private-key-file=" + filepath.Join(api.CertDir, "sa-signer.key"),
			"--use-service-account-credentials=false",
			"--node-monitor-grace-period=40s",
		},
	})
	if err != nil {
		return err
	}
	return n.startDaemon("kube-scheduler", filepath.Join(n.Tools, "kube-scheduler"), nil,
		"--kubeconfig="+n.Kubeconfig, "--leader-elect=false", "--secure-port=0", "--v=1")
}

func (n *NodeCluster) startContainerd() error {
	cfg := fmt.Sprintf(containerdConfig, n.Dir, n.socket, n.Tools)
	cfgPath := filepath.Join(n.Dir, "containerd.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	netd := filepath.Join(n.Dir, "net.d")
	if err := os.MkdirAll(netd, 0o755); err != nil {
		return err
	}
	cni := fmt.Sprintf(cniConfig, cniNetwork, bridgeName, podCIDR, filepath.Join(n.Dir, "cni-ipam"))
	if err := os.WriteFile(filepath.Join(netd, "10-dsguard.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	// The shim and runc are looked up on PATH.
	env := []string{"PATH=" + n.Tools + ":" + os.Getenv("PATH")}
	if err := n.startDaemon("containerd", filepath.Join(n.Tools, "containerd"), env, "--config", cfgPath); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r := n.Ctr(context.Background(), "version"); r.Err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("containerd does not answer on %s after 60s:\n%s", n.socket, n.DaemonLog("containerd"))
}

// Ctr runs ctr against the node's containerd, in the CRI's namespace.
func (n *NodeCluster) Ctr(ctx context.Context, args ...string) Result {
	return Run(ctx, n.Root, "", nil, filepath.Join(n.Tools, "ctr"), append([]string{"--address", n.socket, "--namespace", "k8s.io"}, args...)...)
}

// ImportImage imports an OCI archive into the node's containerd and unpacks
// it, so the kubelet finds it present and never pulls.
func (n *NodeCluster) ImportImage(ctx context.Context, archive string) error {
	if r := n.Ctr(ctx, "images", "import", "--local", "--snapshotter", "overlayfs", archive); r.Err != nil {
		return r.Error()
	}
	return nil
}

func (n *NodeCluster) startKubelet() error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	n.cgroupDir = filepath.Base(n.Dir)
	if err := makeCgroupRoot(n.cgroupDir); err != nil {
		return err
	}
	cfg := fmt.Sprintf(kubeletConfig, n.socket, "/"+n.cgroupDir, port, filepath.Join(n.Dir, "pod-logs"))
	cfgPath := filepath.Join(n.Dir, "kubelet.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	return n.startDaemon("kubelet", filepath.Join(n.Tools, "kubelet"), nil,
		"--config="+cfgPath,
		"--kubeconfig="+n.Kubeconfig,
		"--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--hostname-override="+NodeName,
		"--node-ip="+hostIP(),
		"--v=2",
	)
}

// hostIP is the address the node reports: the one the default route leaves
// from, else loopback.
func hostIP() string {
	c, err := net.Dial("udp", "192.0.2.1:9")
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}

// makeCgroupRoot creates the kubelet's --cgroup-root in every v1 hierarchy;
// a cpuset child starts with no CPUs or memory nodes, so those are copied.
func makeCgroupRoot(name string) error {
	hierarchies, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil {
			continue
		}
		dir := filepath.Join(h, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

func (n *NodeCluster) waitNodeReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last Result
	for time.Now().Before(deadline) {
		for _, d := range n.daemons {
			select {
			case err := <-d.exited:
				d.exited <- err
				return fmt.Errorf("%s exited (%v):\n%s", d.name, err, LastLines(n.DaemonLog(d.name), 60))
			default:
			}
		}
		last = n.Kubectl(ctx, "", "get", "node", NodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if last.Err == nil && last.Stdout == "True" {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("node %s not Ready after %s (%s %s); kubelet log:\n%s", NodeName, timeout, last.Stdout, last.Stderr, LastLines(n.DaemonLog("kubelet"), 60))
}

// LastLines returns the last lines of s, for a log quoted in a failure.
func LastLines(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

func (n *NodeCluster) startDaemon(name, bin string, env []string, args ...string) error {
	d := &daemon{name: name, logPath: filepath.Join(n.Dir, name+".log")}
	logFile, err := os.Create(d.logPath)
	if err != nil {
		return err
	}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = logFile, logFile
	if env != nil {
		d.cmd.Env = append(os.Environ(), env...)
	}
	// If the test process dies, the daemon dies with it; what it started
	// (shims, containers) is hack/node-cleanup.sh's.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	d.exited = make(chan error, 1)
	go func() { d.exited <- d.cmd.Wait(); logFile.Close() }()
	n.daemons = append(n.daemons, d)
	select {
	case err := <-d.exited:
		d.exited <- err
		return fmt.Errorf("%s exited at once (%v):\n%s", name, err, LastLines(n.DaemonLog(name), 40))
	case <-time.After(300 * time.Millisecond):
	}
	return nil
}

// DaemonLog returns what kube-scheduler, containerd or the kubelet logged.
func (n *NodeCluster) DaemonLog(name string) string {
	if name == "kube-controller-manager" && n.kcm != nil {
		return n.kcm.Log()
	}
	b, _ := os.ReadFile(filepath.Join(n.Dir, name+".log"))
	return string(b)
}

// Config returns an admin REST config.
func (n *NodeCluster) Config() *rest.Config { return rest.CopyConfig(n.env.Config) }

// Kubectl runs the built kubectl with the cluster's kubeconfig.
func (n *NodeCluster) Kubectl(ctx context.Context, stdin string, args ...string) Result {
	return Run(ctx, n.Root, stdin, nil, filepath.Join(n.Tools, "kubectl"), append([]string{"--kubeconfig", n.Kubeconfig}, args...)...)
}

// Helm runs the built helm (bin "helm" for Helm 3, "helm4" for Helm 4)
// with the cluster's kubeconfig.
func (n *NodeCluster) Helm(ctx context.Context, bin string, args ...string) Result {
	return Run(ctx, n.Root, "", []string{"KUBECONFIG=" + n.Kubeconfig, "HELM_CACHE_HOME=" + filepath.Join(n.Dir, "helm"),
		"HELM_CONFIG_HOME=" + filepath.Join(n.Dir, "helm"), "HELM_DATA_HOME=" + filepath.Join(n.Dir, "helm")},
		filepath.Join(n.Tools, bin), args...)
}

// Stop stops the kubelet, containerd, the scheduler, the controller manager
// and the control plane, then removes every process, mount, cgroup, network
// device and file the node made (hack/node-cleanup.sh). It is safe to call
// more than once.
func (n *NodeCluster) Stop() error {
	for _, c := range n.stopHeartbeats {
		close(c)
	}
	n.stopHeartbeats = nil
	for i := len(n.daemons) - 1; i >= 0; i-- {
		terminate(n.daemons[i].cmd, n.daemons[i].exited)
	}
	n.daemons = nil
	if n.kcm != nil {
		n.kcm.Stop()
		n.kcm = nil
	}
	if n.env != nil {
		_ = n.env.Stop()
		n.env = nil
	}
	err := n.cleanup()
	n.Dir = ""
	if n.lock != nil {
		_ = syscall.Flock(int(n.lock.Fd()), syscall.LOCK_UN)
		n.lock.Close()
		n.lock = nil
	}
	return err
}

// cleanup runs hack/node-cleanup.sh: for n.Dir once the node has one, and
// for every leftover node directory before.
func (n *NodeCluster) cleanup() error {
	args := []string{filepath.Join(n.Root, "hack", "node-cleanup.sh")}
	if n.Dir != "" {
		args = append(args, n.Dir)
	}
	if out, err := exec.Command("bash", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("hack/node-cleanup.sh: %v: %s", err, out)
	}
	return nil
}

// AddControlPlaneNode registers a Node without a kubelet that stands for a
// control-plane node, as every real cluster has: labelled and tainted
// node-role.kubernetes.io/control-plane, Ready, and kept Ready by renewing
// its Lease (the node lifecycle controller reads Lease renewals as the
// node's heartbeat) until Stop. No Pod ever runs on it.
func (n *NodeCluster) AddControlPlaneNode(ctx context.Context, name string) error {
	node := fmt.Sprintf(`apiVersion: v1
kind: Node
metadata:
  name: %[1]s
  labels:
    kubernetes.io/hostname: %[1]s
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    node-role.kubernetes.io/control-plane: ""
spec:
  taints:
  - key: node-role.kubernetes.io/control-plane
    effect: NoSchedule
`, name)
	if r := n.Kubectl(ctx, node, "create", "-f", "-"); r.Err != nil {
		return r.Error()
	}
	now := time.Now().UTC().Format(time.RFC3339)
	status := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"control-plane stand-in","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`, now, now)
	if r := n.Kubectl(ctx, "", "patch", "node", name, "--subresource=status", "--type=merge", "-p", status); r.Err != nil {
		return r.Error()
	}
	renew := func() error {
		lease := fmt.Sprintf(`apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: %s
  namespace: kube-node-lease
spec:
  holderIdentity: %s
  leaseDurationSeconds: 40
  renewTime: %q
`, name, name, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"))
		if r := n.Kubectl(ctx, lease, "apply", "-f", "-"); r.Err != nil {
			return r.Error()
		}
		return nil
	}
	if err := renew(); err != nil {
		return err
	}
	stop := make(chan struct{})
	n.stopHeartbeats = append(n.stopHeartbeats, stop)
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = renew()
			}
		}
	}()
	// The API server adds node.kubernetes.io/not-ready at creation; the
	// node lifecycle controller lifts it once it has seen the node Ready.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		r := n.Kubectl(ctx, "", "get", "node", name, "-o", "jsonpath={.spec.taints[*].key}")
		if r.Err == nil && !strings.Contains(r.Stdout, "node.kubernetes.io/") {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("node %s still tainted not-ready or unreachable after 60s", name)
}
