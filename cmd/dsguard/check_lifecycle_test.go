package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestCheck_LifecycleTaintsAreNoGap: on an autoscaled fleet's dump, the
// nodes that carry lifecycle taints (Karpenter's, Cilium's, a NodePool's
// startup taint, a NodeReadinessRule's) draw no node-coverage warning, while
// a taint of the cluster's own still does; -o wide shows them as lifecycle
// skips with how long each node has carried the taint.
func TestCheck_LifecycleTaintsAreNoGap(t *testing.T) {
	const (
		dir   = "testdata/lifecycle/"
		ds    = dir + "node-exporter.yaml"
		fleet = dir + "fleet.yaml"
	)
	// The nodes that only carry lifecycle taints.
	lifecycleNodes := []string{"new-1", "new-2", "old-1", "gpu-1", "nfs-1"}
	policyFile := writeFile(t, t.TempDir(), "policy.yaml",
		"apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nlifecycleTaints: [dedicat*]\n")
	tests := []struct {
		name string
		args []string
		// want are in the output; never are not.
		want, never []string
		code        int
	}{
		{
			name: "only the cluster's own taint is a gap",
			args: []string{"check", "-f", ds, "--nodes", fleet},
			want: []string{"WARN  node-coverage", "skips 1 of 8 nodes: taint dedicated=infra:NoSchedule not tolerated (infra-1)"},
			// Not in the finding nor anywhere else in the text report.
			never: lifecycleNodes,
		},
		{
			name:  "a policy's lifecycle taint is no gap either",
			args:  []string{"check", "-f", ds, "--nodes", fleet, "--config", policyFile},
			want:  []string{"passed"},
			never: []string{"node-coverage", "infra-1"},
		},
		{
			name: "wide shows each lifecycle skip, its reason and its time",
			args: []string{"check", "-f", ds, "--nodes", fleet, "-o", "wide"},
			want: []string{
				"skips 1: taint dedicated=infra:NoSchedule not tolerated: infra-1\n",
				"node.cilium.io/agent-not-ready=true:NoExecute not tolerated (lifecycle: agent-not-ready; not a coverage gap): new-1 (for ",
				"karpenter.sh/unregistered:NoExecute not tolerated (lifecycle: joining; not a coverage gap): new-2\n",
				"karpenter.sh/disrupted:NoSchedule not tolerated (lifecycle: being disrupted; not a coverage gap): old-1\n",
				"(lifecycle: startup taint of NodePool gpu; not a coverage gap): gpu-1\n",
				"(lifecycle: taint of NodeReadinessRule nfs; not a coverage gap): nfs-1\n",
			},
		},
		{
			name: "declarations among the manifests are not read, and check says so",
			args: []string{"check", "-f", ds, "-f", fleet, "--nodes", "../../examples/nodes.yaml"},
			want: []string{"note: 2 objects among the manifests declare lifecycle taints and were not read for them"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, code := runCLI(t, "", tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			for _, n := range tt.never {
				if strings.Contains(out, n) {
					t.Errorf("output names %q", n)
				}
			}
			if t.Failed() {
				t.Log(out)
			}
		})
	}

	// -o json marks each lifecycle skip with its reason and, where the node
	// says, how long it has carried the taint.
	out, _, _ := runCLI(t, "", "check", "-f", ds, "--nodes", fleet, "-o", "json")
	var report struct {
		Results []struct {
			Placement struct {
				Skips []struct {
					Transient  bool              `json:"transient"`
					Lifecycle  string            `json:"lifecycle"`
					Nodes      []string          `json:"nodes"`
					TaintedFor map[string]string `json:"taintedFor"`
				} `json:"skips"`
			} `json:"placement"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || len(report.Results) != 1 {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	lifecycle, taintedFor := map[string]string{}, map[string]string{}
	for _, s := range report.Results[0].Placement.Skips {
		if s.Transient != (s.Lifecycle != "") {
			t.Errorf("skip of %v: transient %v, lifecycle %q", s.Nodes, s.Transient, s.Lifecycle)
		}
		for _, n := range s.Nodes {
			lifecycle[n] = s.Lifecycle
			if d, ok := s.TaintedFor[n]; ok {
				taintedFor[n] = d
			}
		}
	}
	want := map[string]string{
		"infra-1": "", "new-1": "agent-not-ready", "new-2": "joining", "old-1": "being disrupted",
		"gpu-1": "startup taint of NodePool gpu", "nfs-1": "taint of NodeReadinessRule nfs",
	}
	for n, w := range want {
		if lifecycle[n] != w {
			t.Errorf("-o json: %s: lifecycle %q, want %q", n, lifecycle[n], w)
		}
	}
	// Only new-1 reports when it got its taint; check's clock and the
	// test's differ by the run's time.
	if len(taintedFor) != 1 {
		t.Errorf("-o json: taintedFor %v, want new-1's only", taintedFor)
	}
	d, err := time.ParseDuration(taintedFor["new-1"])
	if off := d - time.Since(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil || off.Abs() > time.Minute {
		t.Errorf("-o json: new-1 tainted for %q (%v)", taintedFor["new-1"], err)
	}
}
