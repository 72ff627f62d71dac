package coverage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// dsguardBin is the dsguard binary under test, built by TestMain.
var dsguardBin string

// cliPlacements runs `dsguard check -o json --nodes` on a batch's DaemonSets
// with the cluster's Nodes, saved as a user would save them, and returns each
// DaemonSet's printed node list (placement.runsOnNodes) by name. The test then
// compares it with the nodes the real controller bound Pods to.
func cliPlacements(dir string, dss []*appsv1.DaemonSet, nodes []*corev1.Node) (map[string][]string, error) {
	nodeList := &metav1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, n := range nodes {
		saved := &corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels},
			Spec:       corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
		}
		nodeList.Items = append(nodeList.Items, runtime.RawExtension{Object: saved})
	}
	dsList := &metav1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, ds := range dss {
		c := &appsv1.DaemonSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
			ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, Labels: ds.Labels},
			Spec:       ds.Spec,
		}
		dsList.Items = append(dsList.Items, runtime.RawExtension{Object: c})
	}
	nodesFile, dsFile := filepath.Join(dir, "nodes.json"), filepath.Join(dir, "daemonsets.json")
	for file, obj := range map[string]any{nodesFile: nodeList, dsFile: dsList} {
		data, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(dsguardBin, "check", dsFile, "--nodes", nodesFile, "-o", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	// Exit 1 is a deny verdict on some scenario: the placement is still printed.
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		return nil, fmt.Errorf("dsguard check: %v: %s", err, stderr.String())
	}
	var out struct {
		Results []struct {
			Name      string
			Placement *struct {
				RunsOn      int
				RunsOnNodes []string
			}
		}
		Errors []struct{ Error string }
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("dsguard check -o json: %v", err)
	}
	if len(out.Errors) > 0 {
		return nil, fmt.Errorf("dsguard check could not read a DaemonSet: %s", out.Errors[0].Error)
	}
	placements := make(map[string][]string, len(out.Results))
	for _, r := range out.Results {
		if r.Placement == nil || r.Placement.RunsOn != len(r.Placement.RunsOnNodes) {
			return nil, fmt.Errorf("dsguard check -o json: DaemonSet %s has no consistent placement", r.Name)
		}
		placements[r.Name] = r.Placement.RunsOnNodes
	}
	return placements, nil
}
