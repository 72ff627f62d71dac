// Command dashboard writes dsguard's Grafana dashboard, built with the
// Grafana foundation SDK (Apache-2.0) from the metrics dsguard exports:
// coverage per DaemonSet, skipped nodes by reason, exemptions, admission
// decisions and latency, policy health and certificate expiry. The chart
// ships the JSON in a ConfigMap for Grafana's dashboard sidecar
// (grafanaDashboard.enabled):
//
//	go run ./hack/dashboard > charts/dsguard/dashboards/dsguard.json
//
// Its tests keep the chart's copy equal to what this writes, check every
// query with Prometheus' own parser (promtool, in test/chart) and, in
// test/e2e, against a scrape of a running dsguard: each series it reads is
// exported, and carries each label it groups, matches or selects by.
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	b, err := Render()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
	_, _ = os.Stdout.Write(b)
}

// Render returns the dashboard as indented JSON with a final newline.
func Render() ([]byte, error) {
	d, err := Dashboard().Build()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
