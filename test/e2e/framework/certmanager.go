package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// CertManager is cert-manager's controller and cainjector (as hack/tools.sh
// builds them) running as processes against the cluster.
type CertManager struct {
	Controller, CAInjector *Process

	kubectl func(ctx context.Context, stdin string, args ...string) Result
	crds    []string // files of the CRDs StartCertManager installed
}

// certManagerCRDs are the cert-manager.io kinds the controllers watch.
var certManagerCRDs = []string{"certificates", "certificaterequests", "issuers", "clusterissuers"}

// StartCertManager installs cert-manager's CRDs (from the cert-manager Go
// module dsguard already requires, not from the network) and starts its
// controller and cainjector with the admin kubeconfig, logging into dir. They
// die with the test process; Stop ends them and removes the CRDs.
func (c *Cluster) StartCertManager(ctx context.Context, dir string) (*CertManager, error) {
	return startCertManager(ctx, c.Kubectl, c.Tools, c.Kubeconfig, dir)
}

// StartCertManager starts cert-manager against the node's control plane, as
// Cluster.StartCertManager does; the dsguard Pods on the node then mount
// the Secrets it issues.
func (n *NodeCluster) StartCertManager(ctx context.Context, dir string) (*CertManager, error) {
	return startCertManager(ctx, n.Kubectl, n.Tools, n.Kubeconfig, dir)
}

func startCertManager(ctx context.Context, kubectl func(ctx context.Context, stdin string, args ...string) Result,
	tools, kubeconfig, dir string) (*CertManager, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager").Output()
	if err != nil {
		return nil, fmt.Errorf("locating the cert-manager module: %w", err)
	}
	cm := &CertManager{kubectl: kubectl}
	for _, crd := range certManagerCRDs {
		file := filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds", "cert-manager.io_"+crd+".yaml")
		if r := kubectl(ctx, "", "apply", "--server-side", "-f", file); r.Err != nil {
			cm.Stop()
			return nil, r.Error()
		}
		cm.crds = append(cm.crds, file)
	}
	for _, crd := range certManagerCRDs {
		if err := WaitEstablished(ctx, kubectl, crd+".cert-manager.io", 60*time.Second); err != nil {
			cm.Stop()
			return nil, err
		}
	}
	for _, b := range []string{"cert-manager-controller", "cert-manager-cainjector"} {
		if _, err := os.Stat(filepath.Join(tools, b)); err != nil {
			cm.Stop()
			return nil, fmt.Errorf("%s is not built (hack/tools.sh builds it): %w", b, err)
		}
	}
	if cm.Controller, err = StartProcess(dir, filepath.Join(tools, "cert-manager-controller"), "--kubeconfig", kubeconfig); err != nil {
		cm.Stop()
		return nil, err
	}
	if cm.CAInjector, err = StartProcess(dir, filepath.Join(tools, "cert-manager-cainjector"), "--kubeconfig", kubeconfig); err != nil {
		cm.Stop()
		return nil, err
	}
	return cm, nil
}

// Running returns an error naming the process that has exited, with its log.
func (cm *CertManager) Running() error {
	var errs []error
	for _, p := range []*Process{cm.Controller, cm.CAInjector} {
		if p != nil && p.Exited() {
			errs = append(errs, fmt.Errorf("%s exited:\n%s", filepath.Base(p.cmd.Path), p.Log()))
		}
	}
	return errors.Join(errs...)
}

// Log returns what both processes have logged so far.
func (cm *CertManager) Log() string {
	var b strings.Builder
	for _, p := range []*Process{cm.Controller, cm.CAInjector} {
		if p != nil {
			fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(p.cmd.Path), p.Log())
		}
	}
	return b.String()
}

// Stop ends both processes and deletes the CRDs (and so every cert-manager
// object), so that later tests meet an API server without cert-manager. It
// is safe to call more than once.
func (cm *CertManager) Stop() {
	for _, p := range []*Process{cm.Controller, cm.CAInjector} {
		if p != nil {
			p.Stop()
		}
	}
	for _, f := range cm.crds {
		cm.kubectl(context.Background(), "", "delete", "--ignore-not-found", "--timeout=60s", "-f", f)
	}
	cm.crds = nil
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Renew forces cert-manager to reissue the Certificate name in namespace, as
// `cmctl renew` does: it adds the Issuing condition to its status.
func (cm *CertManager) Renew(ctx context.Context, namespace, name string) error {
	now := time.Now().UTC().Format(time.RFC3339)
	return cm.kubectl(ctx, "", "patch", "certificate", name, "-n", namespace, "--subresource=status", "--type=json", "-p",
		`[{"op":"add","path":"/status/conditions/-","value":{"type":"Issuing","status":"True","reason":"ManuallyTriggered",`+
			`"message":"Certificate re-issuance manually triggered","lastTransitionTime":"`+now+`"}}]`).Error()
}
