// Package coveragemap proves the page `dsguard check --nodes DUMP -o html`
// writes, in a real browser, against what the same run says in JSON. It
// needs no control plane: only dsguard, a cluster dump and Chromium.
package coveragemap

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/test/e2e/framework"
)

// The cluster: three workers of 2 cpu and 4Gi; worker-1 nearly full with a
// database of priority 1000, worker-2 with a batch job of priority 0,
// worker-3 (role=web) running a web server that holds host port 9100.
const dump = "../../../policy/rules/testdata/rules/resource-fit/nodes.yaml"

// agent is the project's plain test DaemonSet named name, requesting
// 100m and 64Mi, changed by the mutators.
func agent(name string, mutators ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	return testobj.DS(append([]func(*appsv1.DaemonSet){func(ds *appsv1.DaemonSet) {
		ds.Name = name
		ds.Spec.Template.Spec.Containers[0].Resources.Requests = requests("100m", "64Mi")
	}}, mutators...)...)
}

func requests(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

func withRequests(cpu, memory string) func(*appsv1.DaemonSet) {
	return testobj.WithAgent(func(c *corev1.Container) { c.Resources.Requests = requests(cpu, memory) })
}

// TestCoverageMap_FromADumpAgreesWithTheJSONInABrowser writes the map of a
// cluster dump where agents preempt, stay Pending by a taken port, never
// fit, skip nodes by their selector, and share a name across files; opens it
// in headless Chromium; and holds every rendered cell against `-o json` of
// the same run: a covered node is covered where the fit says it fits (or its
// room is unknown), preempts where it preempts, pending where it does not
// fit; a skipped node carries the JSON's reason; namesakes are two columns
// named by their files. Then it opens the page at #gaps and #gaps&ds=twin
// and holds what the script hides against the same JSON: which columns
// have a gap, and which groups a shown column leaves uncovered.
func TestCoverageMap_FromADumpAgreesWithTheJSONInABrowser(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	web := testobj.WithNodeSelector(map[string]string{"role": "web"})
	files := map[string]*appsv1.DaemonSet{
		// Above what worker-1 and worker-2 have free, priority above theirs:
		// preempts there, fits on worker-3.
		"critical.yaml": agent("critical-agent", withRequests("1", "2Gi"),
			func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.PriorityClassName = "node-agent" }),
		// Only web nodes; worker-3's port 9100 is taken: Pending there.
		"port.yaml": agent("port-agent", web, testobj.WithPorts(corev1.ContainerPort{ContainerPort: 9100, HostPort: 9100})),
		// More memory than any node has: never fits.
		"big.yaml": agent("big-agent", withRequests("100m", "8Gi")),
		// One name in two files, placed apart.
		"prod/twin.yaml": agent("twin"),
		"dev/twin.yaml":  agent("twin", web),
	}
	for name, ds := range files {
		body, err := yaml.Marshal(ds)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(work, "manifests", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dsguard, err := framework.BuildDsguard(root, work)
	if err != nil {
		t.Fatal(err)
	}
	page, report := filepath.Join(work, "map.html"), filepath.Join(work, "report.json")
	nodes, err := filepath.Abs(dump)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dsguard, "check", "manifests", "--nodes", nodes, "-o", "html="+page, "-o", "json="+report)
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("dsguard check: exit %d (%v), want 1 (big-agent and port-agent are denied):\n%s", code, err, out)
	}
	var results struct {
		Results []struct {
			File      string `json:"file"`
			Document  int    `json:"document"`
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
			Placement struct {
				RunsOnNodes []string `json:"runsOnNodes"`
				Skips       []struct {
					Reason    string   `json:"reason"`
					Transient bool     `json:"transient"`
					Nodes     []string `json:"nodes"`
				} `json:"skips"`
			} `json:"placement"`
			Fit *struct {
				Error    string `json:"error"`
				Outcomes []struct {
					Node string `json:"node"`
					Kind string `json:"kind"`
				} `json:"outcomes"`
			} `json:"fit"`
		} `json:"results"`
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &results); err != nil || len(results.Results) != len(files) {
		t.Fatalf("-o json: %v, %d results, want %d:\n%s", err, len(results.Results), len(files), data)
	}

	dom, err := framework.RenderPage(t.Context(), page, "", filepath.Join(work, "map.png"))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := framework.PageCells(dom)
	if err != nil || cells == nil {
		t.Fatalf("no cells in the rendered page (%v):\n%s", err, dom)
	}
	seen := map[string]int{} // states across the page, to know the test saw each kind
	// expected holds each column's cells as the JSON decides them, which
	// the gaps filter is then held against.
	expected := map[string][]framework.PageCell{}
	names := map[string]int{}
	for _, r := range results.Results {
		names[r.Namespace+"/"+r.Name]++
	}
	for _, r := range results.Results {
		id := r.Namespace + "/" + r.Name
		if names[id] > 1 {
			id += fmt.Sprintf(" (%s: document %d)", r.File, r.Document)
		}
		if r.Fit == nil {
			t.Fatalf("%s: no fit prediction in the JSON, though the dump holds the cluster's Pods", id)
		}
		fits := map[string]string{}
		for _, o := range r.Fit.Outcomes {
			fits[o.Node] = o.Kind
		}
		var want []framework.PageCell
		for _, n := range r.Placement.RunsOnNodes {
			state := "covered" // fits, or room unknown
			switch kind, ok := fits[n]; {
			case r.Fit.Error != "":
				state = "pending"
			case ok && kind == "preempts":
				state = "preempts"
			case ok && (kind == "does-not-fit" || kind == "never-fits"):
				state = "pending"
			}
			want = append(want, framework.PageCell{Node: n, State: state})
		}
		for _, s := range r.Placement.Skips {
			reason := s.Reason
			if s.Transient {
				reason += " (transient)"
			}
			for _, n := range s.Nodes {
				want = append(want, framework.PageCell{Node: n, State: "skipped", Reason: reason})
			}
		}
		got := slices.Clone(cells[id])
		for i := range got {
			seen[got[i].State]++
			if got[i].State == "skipped" {
				continue
			}
			// The reason of a landing or Pending cell is the map's own
			// wording of the outcome; the state is what the JSON decides.
			if got[i].State == "pending" && !strings.HasPrefix(got[i].Reason, "the scheduler leaves it Pending: ") {
				t.Errorf("%s on %s: pending for %q, want the scheduler's reason", id, got[i].Node, got[i].Reason)
			}
			got[i].Reason = ""
		}
		slices.SortFunc(want, framework.ComparePageCells)
		slices.SortFunc(got, framework.ComparePageCells)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the page shows %v, the JSON says %v", id, got, want)
		}
		expected[id] = want
	}
	if len(cells) != len(results.Results) {
		t.Errorf("the page has %d columns %v, the JSON %d results", len(cells), slices.Sorted(maps.Keys(cells)), len(results.Results))
	}
	for _, state := range []string{"covered", "preempts", "pending", "skipped"} {
		if seen[state] == 0 {
			t.Errorf("no %s cell on the page (%v): the scenario no longer shows what this test is about", state, seen)
		}
	}
	summary, err := framework.PageText(dom, "summary")
	if err != nil || !strings.Contains(summary, "what the scheduler would do with each new Pod") {
		t.Errorf("the summary does not say the fit was weighed (%v): %q", err, summary)
	}

	// Unasked, the filter hides nothing; asked by the address, it must
	// hide prod's twin (covered everywhere) but show the columns with a
	// gap, and, narrowed to the twins, hide worker-3's group, where the
	// one twin left shown is covered although big-agent, hidden, is not.
	checkFilter(t, dom, "", expected)
	for _, fragment := range []string{"gaps", "gaps&ds=twin"} {
		dom, err := framework.RenderPage(t.Context(), page, fragment, "")
		if err != nil {
			t.Fatal(err)
		}
		checkFilter(t, dom, fragment, expected)
	}
}

// checkFilter holds the page's filtering, preset by the fragment (#gaps,
// #ds=<text>), against the cells the JSON decides (expected, by column): a
// column is shown when its name holds the text and, with gaps, when one of
// its nodes is not covered; a group is shown, with gaps, when a shown
// column does not cover its nodes. Without gaps every group is shown.
func checkFilter(t *testing.T, dom, fragment string, expected map[string][]framework.PageCell) {
	t.Helper()
	gaps, text := false, ""
	for _, p := range strings.Split(fragment, "&") {
		if p == "gaps" {
			gaps = true
		}
		if v, ok := strings.CutPrefix(p, "ds="); ok {
			text = v
		}
	}
	hidden, filtered, err := framework.PageColumns(dom)
	if err != nil || !filtered {
		t.Fatalf("#%s: the page's script did not run (%v)", fragment, err)
	}
	state := map[string]map[string]string{} // column, node: state
	var wantShown []string
	for id, cells := range expected {
		state[id] = map[string]string{}
		gap := false
		for _, c := range cells {
			state[id][c.Node] = c.State
			gap = gap || c.State != "covered"
		}
		if strings.Contains(id, text) && (!gaps || gap) {
			wantShown = append(wantShown, id)
		}
	}
	var shown []string
	for id, h := range hidden {
		if !h {
			shown = append(shown, id)
		}
	}
	slices.Sort(shown)
	slices.Sort(wantShown)
	if !slices.Equal(shown, wantShown) {
		t.Errorf("#%s shows the columns %q, want %q", fragment, shown, wantShown)
	}
	if gaps && (len(wantShown) == 0 || len(wantShown) == len(expected)) {
		t.Errorf("#%s: the JSON leaves %d of %d columns with a gap: the scenario no longer shows the filter hiding and keeping", fragment, len(wantShown), len(expected))
	}

	groups, err := framework.PageGroups(dom)
	if err != nil || len(groups) == 0 {
		t.Fatalf("#%s: no groups on the page (%v)", fragment, err)
	}
	groupsShown, groupsHidden := 0, 0
	for _, g := range groups {
		want := !gaps
		for _, id := range wantShown {
			for _, n := range g.Nodes {
				want = want || state[id][n] != "covered"
			}
		}
		if g.Hidden == want {
			t.Errorf("#%s: the group of %v is hidden=%v, want hidden=%v (shown columns %q)", fragment, g.Nodes, g.Hidden, !want, wantShown)
		}
		if want {
			groupsShown++
		} else {
			groupsHidden++
		}
	}
	if text != "" && gaps && (groupsShown == 0 || groupsHidden == 0) {
		t.Errorf("#%s: %d groups to show and %d to hide: the scenario no longer has a group the narrowed filter hides", fragment, groupsShown, groupsHidden)
	}
	wantCount := fmt.Sprintf("%d DaemonSets, %d groups shown", len(wantShown), groupsShown)
	if got, err := framework.PageTextByID(dom, "shown"); err != nil || got != wantCount {
		t.Errorf("#%s: the page counts %q (%v), want %q", fragment, got, err, wantCount)
	}
}
