package main

import (
	"io"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/dsguard/dsguard/check"
	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coveragemap"
)

// mapFormats are the -o values that write a coverage map instead of a
// report.
var mapFormats = map[string]func(*coveragemap.Map, io.Writer) error{
	"html":     (*coveragemap.Map).WriteHTML,
	"markdown": (*coveragemap.Map).WriteMarkdown,
}

// mapWriter is the check.Writer of -o html and -o markdown: it keeps each
// DaemonSet's placement and fit prediction (not its findings) and lays
// them against the nodes at the end.
type mapWriter struct {
	w     io.Writer
	write func(*coveragemap.Map, io.Writer) error
	in    coveragemap.Input
	// before, when set, gives the map to compare with: -o markdown then
	// writes the change (--previous, --previous-nodes).
	before func(after *coveragemap.Map) (*coveragemap.Map, error)
}

func (m *mapWriter) Result(r *check.Result) error {
	if r.Placement != nil {
		m.in.Agents = append(m.in.Agents, coveragemap.Agent{Namespace: r.Namespace, Name: r.Name,
			Source: r.Location.String(), Placement: r.Placement, Fit: r.Fit})
	}
	return nil
}

func (m *mapWriter) Finish(r *check.Results) error {
	if r.Stopped != nil {
		return nil
	}
	if m.before != nil {
		after := coveragemap.Build(m.in)
		before, err := m.before(after)
		if err != nil {
			return err
		}
		return coveragemap.WriteMarkdownChange(m.w, before, after)
	}
	return m.write(coveragemap.Build(m.in), m.w)
}

// predictedAgents places each DaemonSet on nodes, as check does.
func predictedAgents(dss []*appsv1.DaemonSet, snap *coverage.NodeSnapshot) []coveragemap.Agent {
	out := make([]coveragemap.Agent, 0, len(dss))
	for _, ds := range dss {
		cov := coverage.Predict(ds, snap)
		out = append(out, coveragemap.Agent{Namespace: ds.Namespace, Name: ds.Name,
			Placement: coverage.NewPlacement(ds, &cov, snap)})
	}
	return out
}
