package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestGrafanaDashboard_QueriesParse renders the dashboard's ConfigMap and
// hands every query of the dashboard in it to Prometheus' own parser and
// checker (`promtool check rules`, each query a recording rule), its
// Grafana variables filled in as Grafana fills them.
func TestGrafanaDashboard_QueriesParse(t *testing.T) {
	e := setup(t)
	promtool := e.promtool(t)
	objs := objects(t, e.template(t, e.helms()[0], "--set", "grafanaDashboard.enabled=true",
		"--set", "grafanaDashboard.annotations.grafana_folder=Kubernetes"))
	cms := find(objs, "ConfigMap")
	var dashboard string
	for _, cm := range cms {
		if get(cm, "metadata", "name") == "dsguard-dashboard" {
			if get(cm, "metadata", "labels", "grafana_dashboard") != "1" || get(cm, "metadata", "annotations", "grafana_folder") != "Kubernetes" {
				t.Errorf("the dashboard's ConfigMap lacks the sidecar's label or the annotation: %v", get(cm, "metadata"))
			}
			dashboard, _ = get(cm, "data", "dsguard.json").(string)
		}
	}
	if dashboard == "" {
		t.Fatal("grafanaDashboard.enabled rendered no dsguard-dashboard ConfigMap with dsguard.json")
	}
	exprs, err := framework.DashboardQueries([]byte(dashboard))
	if err != nil {
		t.Fatal(err)
	}
	if len(exprs) < 10 {
		t.Fatalf("%d queries in the dashboard, want its panels'", len(exprs))
	}
	fill := strings.NewReplacer("$__rate_interval", "5m", "$job", "dsguard", "$namespace", namespace)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		b, _ := json.Marshal(fill.Replace(e))
		fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", i, b)
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := framework.Logged(t, framework.Run(t.Context(), filepath.Dir(file), "", nil, promtool, "check", "rules", "--lint=none", file)); r.Err != nil {
		t.Fatalf("promtool check rules on the dashboard's queries: %s", r.Error())
	}
}
