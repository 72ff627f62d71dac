package coveragemap

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/coverage"
)

func node(name string, labels ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for i := 0; i+1 < len(labels); i += 2 {
		n.Labels[labels[i]] = labels[i+1]
	}
	return n
}

// fleet: two control-plane nodes, three general workers, one GPU node.
var fleet = []*corev1.Node{
	node("cp-1", "node-role.kubernetes.io/control-plane", ""),
	node("cp-2", "node-role.kubernetes.io/control-plane", ""),
	node("w-1", "karpenter.sh/nodepool", "general"),
	node("w-2", "karpenter.sh/nodepool", "general"),
	node("w-3", "karpenter.sh/nodepool", "general"),
	node("gpu-1", "karpenter.sh/nodepool", "gpu"),
}

var cpSkip = coverage.SkipGroup{Kind: coverage.SkipTaint, Reason: "taint node-role.kubernetes.io/control-plane:NoSchedule not tolerated",
	Count: 2, Nodes: []string{"cp-1", "cp-2"}}

func TestBuild_GroupsNodesThatEveryDaemonSetTreatsAlike(t *testing.T) {
	exporter := Agent{Namespace: "monitoring", Name: "node-exporter", Placement: &coverage.Placement{
		RunsOnNodes: []string{"gpu-1", "w-1", "w-2", "w-3"}, Skips: []coverage.SkipGroup{cpSkip}}}
	cni := Agent{Namespace: "kube-system", Name: "cni", Placement: &coverage.Placement{
		RunsOnNodes: []string{"cp-1", "cp-2", "gpu-1", "w-1", "w-2", "w-3"}}}
	cases := []struct {
		name   string
		agents []Agent
		// want maps "pool: nodes" to each agent's state (in the map's
		// sorted order: kube-system/cni, then monitoring/node-exporter).
		want map[string]string
		live bool
	}{{
		name:   "offline: predicted nodes are covered",
		agents: []Agent{exporter, cni},
		want: map[string]string{
			"general: w-1,w-2,w-3":           "covered covered",
			"gpu: gpu-1":                     "covered covered",
			"role: control-plane: cp-1,cp-2": "covered skipped",
		},
	}, {
		name: "live: a missing, an unbound and an unready Pod are Pending; a Pod on a skipped node is misscheduled",
		agents: []Agent{{
			Namespace: exporter.Namespace, Name: exporter.Name, Placement: exporter.Placement,
			Pods: map[string]PodOnNode{"w-1": {Bound: true, Ready: true}, "w-2": {Bound: false}, "gpu-1": {Bound: true},
				"cp-2": {Bound: true, Ready: true}},
			Status: &appsv1.DaemonSetStatus{DesiredNumberScheduled: 4, NumberReady: 1, NumberMisscheduled: 1},
		}, cni},
		live: true,
		want: map[string]string{
			"general: w-1":              "covered covered",
			"general: w-2":              "covered pending",
			"general: w-3":              "covered pending",
			"gpu: gpu-1":                "covered pending",
			"role: control-plane: cp-1": "covered skipped",
			"role: control-plane: cp-2": "covered misscheduled",
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := Build(Input{Nodes: slices.Values(fleet), Agents: tc.agents, Title: "test"})
			if m.Live != tc.live || m.Nodes != len(fleet) {
				t.Errorf("live %v nodes %d, want %v and %d", m.Live, m.Nodes, tc.live, len(fleet))
			}
			if m.Agents[0].Key() != "kube-system/cni" || m.Agents[1].Key() != "monitoring/node-exporter" {
				t.Fatalf("columns %s, %s: want them sorted", m.Agents[0].Key(), m.Agents[1].Key())
			}
			got := map[string]string{}
			for _, g := range m.Groups {
				var states []string
				for _, c := range g.Cells {
					states = append(states, string(c.State))
				}
				got[g.Pool+": "+strings.Join(g.Nodes, ",")] = strings.Join(states, " ")
			}
			if len(got) != len(tc.want) {
				t.Errorf("groups %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("group %q: %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			total := 0
			for _, n := range m.Agents[1].Counts {
				total += n
			}
			if total != len(fleet) {
				t.Errorf("node-exporter's counts %v add up to %d, want every node once", m.Agents[1].Counts, total)
			}
		})
	}
}

func TestPoolOf(t *testing.T) {
	cases := []struct {
		node  *corev1.Node
		label string
		want  string
	}{
		{node("a", "cloud.google.com/gke-nodepool", "pool-1"), "", "pool-1"},
		{node("a", "eks.amazonaws.com/nodegroup", "ng", "pool", "other"), "", "ng"},
		{node("a", "node-role.kubernetes.io/worker", "", "node-role.kubernetes.io/infra", ""), "", "role: infra,worker"},
		{node("a"), "", "(no pool)"},
		{node("a", "team", "x"), "team", "x"},
		{node("a"), "team", "(no team)"},
	}
	for _, tc := range cases {
		if got := poolOf(tc.node, tc.label); got != tc.want {
			t.Errorf("poolOf(%v, %q) = %q, want %q", tc.node.Labels, tc.label, got, tc.want)
		}
	}
}

func TestWriteHTML_CellsCarryTheirDaemonSetNodesAndState(t *testing.T) {
	m := Build(Input{Nodes: slices.Values(fleet), Title: "a <test> cluster", Agents: []Agent{{Namespace: "monitoring", Name: "node-exporter",
		Placement: &coverage.Placement{RunsOnNodes: []string{"gpu-1", "w-1", "w-2", "w-3"}, Skips: []coverage.SkipGroup{cpSkip}}}}})
	var b strings.Builder
	if err := m.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`<title>dsguard coverage map: a &lt;test&gt; cluster</title>`,
		`data-nodes="cp-1,cp-2"`,
		`<td class="cell skipped" data-ds="monitoring/node-exporter" data-state="skipped"`,
		`taint node-role.kubernetes.io/control-plane:NoSchedule not tolerated`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if regexp.MustCompile(`(?i)<(script|link|img)[^>]+(src|href)=`).MatchString(page) {
		t.Error("the page loads something from elsewhere; it must be self-contained")
	}
	data := page[strings.Index(page, `id="coverage-data">`)+len(`id="coverage-data">`):]
	data = data[:strings.Index(data, "</script>")]
	var back Map
	if err := json.Unmarshal([]byte(data), &back); err != nil || len(back.Groups) != len(m.Groups) {
		t.Errorf("the embedded data does not read back (%v): %s", err, data)
	}
}

func TestWriteMarkdown(t *testing.T) {
	m := Build(Input{Nodes: slices.Values(fleet), Title: "manifests/", Agents: []Agent{{Namespace: "monitoring", Name: "node-exporter",
		Placement: &coverage.Placement{RunsOnNodes: []string{"gpu-1", "w-1", "w-2", "w-3"}, Skips: []coverage.SkipGroup{cpSkip}}}}})
	var b strings.Builder
	if err := m.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	want := "| `monitoring/node-exporter` | 4 | 0 | 0 | 2: taint node-role.kubernetes.io/control-plane:NoSchedule not tolerated |\n"
	if !strings.Contains(b.String(), want) || !strings.Contains(b.String(), "6 nodes, 1 DaemonSets (predicted from the manifests)") {
		t.Errorf("markdown:\n%s\nwant the row:\n%s", b.String(), want)
	}
}
