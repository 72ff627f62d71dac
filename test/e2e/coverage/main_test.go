// Package coverage proves dsguard's coverage model against the real
// DaemonSet controller: random node sets and DaemonSets go to a real
// kube-apiserver with a real kube-controller-manager, and every prediction of
// coverage.Predict must equal the controller's
// status.desiredNumberScheduled and the set of nodes it creates Pods for, and
// so must the node list `dsguard check -o json --nodes` prints.
package coverage

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// namespace holds the scenarios' DaemonSets.
const namespace = "coverage"

var (
	client kubernetes.Interface
	kcm    *framework.ControllerManager
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	start := time.Now()
	root, err := framework.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "coverage:", err)
		return 1
	}
	tools, err := framework.ToolsDir(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "coverage:", err)
		return 1
	}
	binDir, err := os.MkdirTemp("", "dsguard-coverage-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "coverage:", err)
		return 1
	}
	defer os.RemoveAll(binDir)
	if dsguardBin, err = framework.BuildDsguard(root, binDir); err != nil {
		fmt.Fprintln(os.Stderr, "coverage:", err)
		return 1
	}
	plane, err := framework.StartControllerPlane(tools)
	if err != nil {
		fmt.Fprintln(os.Stderr, "coverage:", err)
		return 1
	}
	defer plane.Stop()
	cfg := plane.Config
	kcm = plane.KCM

	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.WarningHandler = rest.NoWarnings{} // beta.kubernetes.io/os and arch are deprecated, and meant
	if client, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "coverage:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "coverage: creating the namespace:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "coverage: kube-apiserver, etcd and kube-controller-manager up in %s\n",
		time.Since(start).Round(time.Millisecond))

	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "coverage: kube-controller-manager log (last lines):\n%s\n", tail(kcm.Log(), 60))
	}
	return code
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
