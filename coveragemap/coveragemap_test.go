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
	"github.com/dsguard/dsguard/coverage/fit"
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
		// reasons maps a group to node-exporter's reason there.
		reasons   map[string]string
		live, fit bool
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
	}, {
		name: "offline with the cluster's Pods: the fit prediction's Pending and preempting nodes; a node of unknown room stays covered",
		agents: []Agent{{
			Namespace: exporter.Namespace, Name: exporter.Name, Placement: exporter.Placement,
			Fit: fit.NewReport([]fit.NodeOutcome{
				{Node: "w-1"},
				{Node: "w-2", Outcome: fit.Outcome{Kind: fit.DoesNotFit, Plugin: fit.PluginNodePorts,
					Reasons: []string{fit.ReasonPorts}, Ports: []fit.HostPort{{Protocol: corev1.ProtocolTCP, Port: 9100, HostIP: "0.0.0.0"}}}},
				{Node: "gpu-1", Outcome: fit.Outcome{Kind: fit.Preempts, Victims: []fit.Victim{{Key: "ml/trainer-0", Priority: 0}}}},
				// w-3's allocatable is not known: not weighed.
			}),
		}, cni},
		fit: true,
		want: map[string]string{
			"general: w-1,w-3":               "covered covered",
			"general: w-2":                   "covered pending",
			"gpu: gpu-1":                     "covered preempts",
			"role: control-plane: cp-1,cp-2": "covered skipped",
		},
		reasons: map[string]string{
			"general: w-2": "the scheduler leaves it Pending: host port TCP/9100 on 0.0.0.0 taken",
			"gpu: gpu-1":   "lands by preempting lower-priority Pods",
		},
	}, {
		name: "offline, no Pod can be made: Pending on every covered node",
		agents: []Agent{{
			Namespace: exporter.Namespace, Name: exporter.Name, Placement: exporter.Placement,
			Fit: &fit.Report{Error: `PriorityClass "agents" not found`},
		}, cni},
		fit: true,
		want: map[string]string{
			"general: w-1,w-2,w-3":           "covered pending",
			"gpu: gpu-1":                     "covered pending",
			"role: control-plane: cp-1,cp-2": "covered skipped",
		},
		reasons: map[string]string{"gpu: gpu-1": `no Pod can be made: PriorityClass "agents" not found`},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := Build(Input{Nodes: slices.Values(fleet), Agents: tc.agents, Title: "test"})
			if m.Live != tc.live || m.FitPredicted != tc.fit || m.Nodes != len(fleet) {
				t.Errorf("live %v fit %v nodes %d, want %v, %v and %d", m.Live, m.FitPredicted, m.Nodes, tc.live, tc.fit, len(fleet))
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
				group := g.Pool + ": " + strings.Join(g.Nodes, ",")
				got[group] = strings.Join(states, " ")
				if want, ok := tc.reasons[group]; ok && g.Cells[1].Reason != want {
					t.Errorf("group %q: node-exporter's reason %q, want %q", group, g.Cells[1].Reason, want)
				}
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

// Two DaemonSets of one name from different files are two columns that say
// where each came from; a name of its own shows none.
func TestBuild_NamesakesAreToldApartBySource(t *testing.T) {
	all := &coverage.Placement{RunsOnNodes: []string{"cp-1", "cp-2", "gpu-1", "w-1", "w-2", "w-3"}}
	m := Build(Input{Nodes: slices.Values(fleet), Agents: []Agent{
		{Namespace: "monitoring", Name: "node-exporter", Source: "prod/exporter.yaml: document 1", Placement: all},
		{Namespace: "kube-system", Name: "cni", Source: "cni.yaml: document 1", Placement: all},
		{Namespace: "monitoring", Name: "node-exporter", Source: "dev/exporter.yaml: document 1",
			Placement: &coverage.Placement{RunsOnNodes: []string{"gpu-1", "w-1", "w-2", "w-3"}, Skips: []coverage.SkipGroup{cpSkip}}},
	}})
	var ids []string
	for _, c := range m.Agents {
		ids = append(ids, c.ID())
	}
	want := []string{"kube-system/cni", "monitoring/node-exporter (dev/exporter.yaml: document 1)",
		"monitoring/node-exporter (prod/exporter.yaml: document 1)"}
	if !slices.Equal(ids, want) {
		t.Fatalf("columns %q, want %q", ids, want)
	}
	if m.Agents[1].N("skipped") != 2 || m.Agents[2].N("skipped") != 0 {
		t.Errorf("the dev column skips %d nodes and the prod one %d, want 2 and 0: the columns were mixed up",
			m.Agents[1].N("skipped"), m.Agents[2].N("skipped"))
	}
	var b strings.Builder
	if err := m.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<span class="source">dev/exporter.yaml: document 1</span>`,
		`data-ds="monitoring/node-exporter (prod/exporter.yaml: document 1)"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(b.String(), `<span class="source">cni.yaml`) {
		t.Error("the page names the source of a column that has no namesake")
	}
}

// Groups of one pool are named by the labels and taints that set them
// apart, or say that none does.
func TestBuild_GroupsOfOnePoolSayWhatSetsThemApart(t *testing.T) {
	tainted := func(n *corev1.Node, taints ...corev1.Taint) *corev1.Node { n.Spec.Taints = taints; return n }
	gpuTaint := corev1.Taint{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	nodes := []*corev1.Node{
		node("a-1", "kubernetes.io/os", "linux", "kubernetes.io/hostname", "a-1"),
		node("a-2", "kubernetes.io/os", "linux", "kubernetes.io/hostname", "a-2"),
		node("win-1", "kubernetes.io/os", "windows", "kubernetes.io/hostname", "win-1"),
		tainted(node("g-1", "kubernetes.io/os", "linux", "kubernetes.io/hostname", "g-1"), gpuTaint),
		node("p-1", "karpenter.sh/nodepool", "general", "zone", "a"),
		node("p-2", "karpenter.sh/nodepool", "general", "zone", "a"),
		node("solo", "karpenter.sh/nodepool", "solo"),
	}
	agent := Agent{Namespace: "ns", Name: "agent", Placement: &coverage.Placement{
		RunsOnNodes: []string{"a-1", "a-2", "p-1", "solo"},
		Skips: []coverage.SkipGroup{
			{Reason: "nodeSelector kubernetes.io/os=linux", Nodes: []string{"win-1"}},
			{Reason: "taint gpu=true:NoSchedule not tolerated", Nodes: []string{"g-1"}},
			{Reason: "nodeAffinity", Nodes: []string{"p-2"}},
		}}}
	m := Build(Input{Nodes: slices.Values(nodes), Agents: []Agent{agent}})
	got := map[string]string{}
	for _, g := range m.Groups {
		name := strings.Join(g.Traits, "; ")
		if g.NoTrait {
			name = "(none)"
		}
		got[strings.Join(g.Nodes, ",")] = name
	}
	want := map[string]string{
		"a-1,a-2": "kubernetes.io/os=linux; without taint gpu=true:NoSchedule",
		"win-1":   "kubernetes.io/os=windows",
		"g-1":     "taint gpu=true:NoSchedule",
		"p-1":     "(none)",
		"p-2":     "(none)",
		"solo":    "",
	}
	if len(got) != len(want) {
		t.Errorf("groups %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("group %s named %q, want %q", k, got[k], v)
		}
	}
}

// The page's "only gaps" filter keeps a DaemonSet by its header's data-gap
// and a group by its cells' data-state (any kept cell not covered), so
// those attributes are the filter's whole input: a fixture with columns and
// groups of both kinds, each attribute exactly as the filter must read it.
// The script itself runs only in a browser: test/e2e/coveragemap holds what
// it hides against the JSON of the same run.
func TestWriteHTML_MarksExactlyTheColumnsAndGroupsWithGapsForTheFilter(t *testing.T) {
	all := []string{"cp-1", "cp-2", "gpu-1", "w-1", "w-2", "w-3"}
	noRoomOnW2 := fit.NewReport([]fit.NodeOutcome{
		{Node: "w-1"}, {Node: "w-3"}, {Node: "gpu-1"}, {Node: "cp-1"}, {Node: "cp-2"},
		{Node: "w-2", Outcome: fit.Outcome{Kind: fit.DoesNotFit, Plugin: fit.PluginNodePorts,
			Reasons: []string{fit.ReasonPorts}, Ports: []fit.HostPort{{Protocol: corev1.ProtocolTCP, Port: 9100, HostIP: "0.0.0.0"}}}},
	})
	m := Build(Input{Nodes: slices.Values(fleet), Title: "gaps", Agents: []Agent{
		{Namespace: "kube-system", Name: "cni", Placement: &coverage.Placement{RunsOnNodes: all}},
		// Pending only: a gap without a skipped node.
		{Namespace: "kube-system", Name: "kube-proxy", Placement: &coverage.Placement{RunsOnNodes: all}, Fit: noRoomOnW2},
		{Namespace: "logging", Name: "fluent-bit", Placement: &coverage.Placement{RunsOnNodes: all}},
		{Namespace: "monitoring", Name: "node-exporter", Placement: &coverage.Placement{
			RunsOnNodes: []string{"gpu-1", "w-1", "w-2", "w-3"}, Skips: []coverage.SkipGroup{cpSkip}}},
	}})
	var b strings.Builder
	if err := m.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()

	wantColumns := []string{"kube-system/cni=false", "kube-system/kube-proxy=true", "logging/fluent-bit=false", "monitoring/node-exporter=true"}
	var columns []string
	for _, c := range regexp.MustCompile(`<th class="ds" data-ds="([^"]*)" data-gap="([^"]*)">`).FindAllStringSubmatch(page, -1) {
		columns = append(columns, c[1]+"="+c[2])
	}
	if !slices.Equal(columns, wantColumns) {
		t.Errorf("DaemonSet headers' data-gap:\n%q\nwant:\n%q", columns, wantColumns)
	}

	// Per group: its data-gap, then each cell's DaemonSet and data-state in
	// column order.
	wantRows := []string{
		"w-1,w-3 gap=false: kube-system/cni=covered kube-system/kube-proxy=covered logging/fluent-bit=covered monitoring/node-exporter=covered",
		"w-2 gap=true: kube-system/cni=covered kube-system/kube-proxy=pending logging/fluent-bit=covered monitoring/node-exporter=covered",
		"gpu-1 gap=false: kube-system/cni=covered kube-system/kube-proxy=covered logging/fluent-bit=covered monitoring/node-exporter=covered",
		"cp-1,cp-2 gap=true: kube-system/cni=covered kube-system/kube-proxy=covered logging/fluent-bit=covered monitoring/node-exporter=skipped",
	}
	row := regexp.MustCompile(`(?s)<tr class="group" data-group="\d+" data-gap="([^"]*)" data-nodes="([^"]*)">(.*?)</tr>`)
	cell := regexp.MustCompile(`<td class="cell [^"]*" data-ds="([^"]*)" data-state="([^"]*)"`)
	var rows []string
	for _, r := range row.FindAllStringSubmatch(page, -1) {
		var cells []string
		for _, c := range cell.FindAllStringSubmatch(r[3], -1) {
			cells = append(cells, c[1]+"="+c[2])
		}
		rows = append(rows, r[2]+" gap="+r[1]+": "+strings.Join(cells, " "))
	}
	if !slices.Equal(rows, wantRows) {
		t.Errorf("groups:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(wantRows, "\n"))
	}
}
