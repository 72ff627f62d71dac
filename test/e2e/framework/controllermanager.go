package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// DefaultControllers are the kube-controller-manager controllers the tests
// need: the DaemonSet controller, and the garbage collector so that Pods and
// ControllerRevisions of deleted DaemonSets go away.
var DefaultControllers = []string{"daemonset-controller", "garbage-collector-controller"}

// ControllerManagerOptions tune StartControllerManager.
type ControllerManagerOptions struct {
	// Tools is the directory holding kube-controller-manager (ToolsDir).
	Tools string
	// KubeConfig is an admin kubeconfig for the control plane, as
	// envtest.Environment.KubeConfig holds after Start.
	KubeConfig []byte
	// Dir receives the kubeconfig and the log; a temporary directory,
	// removed by Stop, when empty.
	Dir string
	// Controllers to run; DefaultControllers when empty. Add
	// "namespace-controller" when a test deletes namespaces.
	Controllers []string
	// Args are appended to the command line (they win over the defaults).
	Args []string
}

// ControllerManager is a running kube-controller-manager.
type ControllerManager struct {
	// LogPath is the file its output goes to.
	LogPath string

	cmd     *exec.Cmd
	exited  chan error
	dir     string
	tempDir bool
}

// StartControllerManager starts the real kube-controller-manager against a
// running control plane with only the given controllers, no leader election,
// no serving port and a raised client rate limit. It dies with the test
// process (parent-death signal); Stop ends it gracefully. There is no health
// endpoint (--secure-port=0): callers wait for the effect they need, e.g. a
// DaemonSet's status.observedGeneration.
func StartControllerManager(opts ControllerManagerOptions) (_ *ControllerManager, err error) {
	if len(opts.KubeConfig) == 0 {
		return nil, errors.New("kube-controller-manager: no kubeconfig")
	}
	cm := &ControllerManager{dir: opts.Dir}
	if cm.dir == "" {
		if cm.dir, err = os.MkdirTemp("", "dsguard-kcm-"); err != nil {
			return nil, err
		}
		cm.tempDir = true
	}
	defer func() {
		if err != nil && cm.tempDir {
			_ = os.RemoveAll(cm.dir)
		}
	}()
	kubeconfig := filepath.Join(cm.dir, "kube-controller-manager.kubeconfig")
	if err = os.WriteFile(kubeconfig, opts.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	controllers := opts.Controllers
	if len(controllers) == 0 {
		controllers = DefaultControllers
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--secure-port=0",
		"--kube-api-qps=500",
		"--kube-api-burst=1000",
		"--concurrent-daemonset-syncs=8",
		"--v=2",
	}
	args = append(args, opts.Args...)

	cm.LogPath = filepath.Join(cm.dir, "kube-controller-manager.log")
	logFile, err := os.Create(cm.LogPath)
	if err != nil {
		return nil, err
	}
	cm.cmd = exec.Command(filepath.Join(opts.Tools, "kube-controller-manager"), args...)
	cm.cmd.Stdout, cm.cmd.Stderr = logFile, logFile
	// If the test process dies, the controller manager dies with it.
	cm.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err = cm.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	cm.exited = make(chan error, 1)
	go func() { cm.exited <- cm.cmd.Wait(); logFile.Close() }()

	// A bad flag or an unreachable API server ends it at once; give it a
	// moment to fail loudly rather than leave the caller waiting on statuses.
	select {
	case err := <-cm.exited:
		cm.exited <- err
		return nil, fmt.Errorf("kube-controller-manager exited early (%v):\n%s", err, cm.Log())
	case <-time.After(500 * time.Millisecond):
	}
	return cm, nil
}

// Running reports whether the process is still running.
func (cm *ControllerManager) Running() bool {
	if cm == nil || cm.cmd == nil {
		return false
	}
	select {
	case err := <-cm.exited:
		cm.exited <- err
		return false
	default:
		return true
	}
}

// Log returns what kube-controller-manager has logged so far.
func (cm *ControllerManager) Log() string {
	data, _ := os.ReadFile(cm.LogPath)
	return string(data)
}

// Stop sends SIGTERM and waits for the process to end (SIGKILL after 15s),
// then removes its temporary directory. It is safe to call more than once.
func (cm *ControllerManager) Stop() {
	if cm == nil {
		return
	}
	if cm.cmd != nil && cm.cmd.Process != nil {
		terminate(cm.cmd, cm.exited)
		cm.cmd = nil
	}
	if cm.tempDir && cm.dir != "" {
		_ = os.RemoveAll(cm.dir)
		cm.dir = ""
	}
}
