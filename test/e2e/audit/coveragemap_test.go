package audit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestCoverageMap_RendersInABrowserAndAgreesWithTheJSON writes the audit's
// coverage map with `dsguard audit -o html`, opens it in headless Chromium
// and holds every cell of the rendered page against `dsguard audit -o json`:
// the nodes a DaemonSet covers or has Pending are its predicted placement,
// Pending exactly where the test's kubelet left the Pod unready, and the
// skipped nodes are the JSON's skipped nodes with their reason. The page's
// filters run in the browser (preset by the address). The screenshot is
// kept in bin/artifacts.
func TestCoverageMap_RendersInABrowserAndAgreesWithTheJSON(t *testing.T) {
	gpu := daemonSet("map-gpu", tolerateAll) // worker-3 only: skips the others by its selector
	gpu.Spec.Template.Spec.NodeSelector = map[string]string{"gpu": "true"}
	tolerant := daemonSet("map-tolerant", tolerateAll) // its Pod on worker-2 stays unready: Pending there
	for _, ds := range []*appsv1.DaemonSet{gpu, tolerant} {
		ds.Labels = map[string]string{"e2e.dsguard.io/map": "true"}
		create(t, ds)
	}
	runPods(t, gpu.Name, 1)
	runPods(t, tolerant.Name, 4, "worker-2")
	waitStatus(t, gpu.Name, func(d *appsv1.DaemonSet) bool { return d.Status.NumberReady == 1 })
	waitStatus(t, tolerant.Name, func(d *appsv1.DaemonSet) bool { return d.Status.NumberReady == 3 })

	artifacts := filepath.Join(cluster.Root, "bin", "artifacts")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(artifacts, "coverage-map.html")
	r := audit(t, "-n", "audit", "-l", "e2e.dsguard.io/map=true", "-o", "html")
	if r.Err != nil {
		t.Fatal(r.Error())
	}
	if err := os.WriteFile(page, []byte(r.Stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	r = audit(t, "-n", "audit", "-l", "e2e.dsguard.io/map=true", "-o", "json")
	if r.Err != nil {
		t.Fatal(r.Error())
	}
	var report struct {
		Items []struct {
			Name      string `json:"name"`
			Placement struct {
				RunsOnNodes []string `json:"runsOnNodes"`
				Skips       []struct {
					Reason string   `json:"reason"`
					Nodes  []string `json:"nodes"`
				} `json:"skips"`
			} `json:"placement"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &report); err != nil || len(report.Items) != 2 {
		t.Fatalf("audit -o json: %v, %d items:\n%s", err, len(report.Items), r.Stdout)
	}

	screenshot := filepath.Join(artifacts, "coverage-map.png")
	dom, err := framework.RenderPage(t.Context(), page, "", screenshot)
	if err != nil {
		t.Fatal(err)
	}
	cells := renderedCells(t, dom)
	for _, item := range report.Items {
		key := "audit/" + item.Name
		got := cells[key]
		var want []framework.PageCell
		for _, n := range item.Placement.RunsOnNodes {
			state := "covered"
			if item.Name == tolerant.Name && n == "worker-2" {
				state = "pending"
			}
			want = append(want, framework.PageCell{Node: n, State: state})
		}
		for _, s := range item.Placement.Skips {
			for _, n := range s.Nodes {
				want = append(want, framework.PageCell{Node: n, State: "skipped", Reason: s.Reason})
			}
		}
		slices.SortFunc(want, framework.ComparePageCells)
		slices.SortFunc(got, framework.ComparePageCells)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the page shows %v, the JSON says %v", key, got, want)
		}
	}
	if info, err := os.Stat(screenshot); err != nil || info.Size() < 1000 {
		t.Errorf("screenshot %s: %v (%v bytes)", screenshot, err, info)
	}

	// The filter, preset by the address: only the DaemonSet with a gap.
	dom, err = framework.RenderPage(t.Context(), page, "gaps", "")
	if err != nil {
		t.Fatal(err)
	}
	hidden := hiddenColumns(t, dom)
	if hidden["audit/map-tolerant"] || hidden["audit/map-gpu"] {
		t.Errorf("#gaps hid %v, want both shown (map-gpu skips nodes, map-tolerant has one Pending)", hidden)
	}
	dom, err = framework.RenderPage(t.Context(), page, "gaps&ds=gpu", "")
	if err != nil {
		t.Fatal(err)
	}
	if hidden = hiddenColumns(t, dom); !hidden["audit/map-tolerant"] || hidden["audit/map-gpu"] {
		t.Errorf("#gaps&ds=gpu hid %v, want only audit/map-gpu shown", hidden)
	}
}

// renderedCells reads the rendered table. A Pending cell's reason is left
// out: the test's kubelet left the Pod unready, and the JSON has no Pods.
func renderedCells(t *testing.T, dom string) map[string][]framework.PageCell {
	t.Helper()
	out, err := framework.PageCells(dom)
	if err != nil || out == nil {
		t.Fatalf("no cells in the rendered page (%v):\n%s", err, dom)
	}
	for _, cells := range out {
		for i := range cells {
			if cells[i].State == "pending" {
				cells[i].Reason = ""
			}
		}
	}
	return out
}

// hiddenColumns are the DaemonSet columns the page's script hid.
func hiddenColumns(t *testing.T, dom string) map[string]bool {
	t.Helper()
	hidden, filtered, err := framework.PageColumns(dom)
	if err != nil {
		t.Fatal(err)
	}
	if !filtered {
		t.Fatal("the page's script did not run in the browser (body has no data-filtered)")
	}
	return hidden
}
