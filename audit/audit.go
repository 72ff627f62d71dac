package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/policy"
)

// Input is what one audit pass looks at.
type Input struct {
	DaemonSets []*appsv1.DaemonSet
	Nodes      *coverage.NodeSnapshot
	Policy     *policy.Policy
	Now        time.Time
	// GapSince holds when each DaemonSet's current gap was first seen (kept
	// by a watching caller across passes); missing means unknown.
	GapSince map[types.NamespacedName]time.Time
	// Window turns a gap older than this into a persistent gap.
	Window time.Duration
	// Fit is what the scheduler weighs on the nodes (the cluster's Pods and
	// PriorityClasses); nil leaves resource-fit and priority-class out.
	Fit *fit.Cluster
	// Others returns the DaemonSets the audited ones are compared with
	// (host-port-conflict, anti-affinity-conflict); nil compares them with
	// each other.
	Others func() []*appsv1.DaemonSet
}

// GapClock remembers when each DaemonSet's current gap (ready < desired) was
// first seen, across audit passes, so that a gap can turn persistent.
type GapClock map[types.NamespacedName]time.Time

// Observe updates the clock with the DaemonSets seen now: a new gap starts
// at now, a closed gap or a DaemonSet that is gone is forgotten.
func (g GapClock) Observe(dss []*appsv1.DaemonSet, now time.Time) {
	seen := make(map[types.NamespacedName]bool, len(dss))
	for _, ds := range dss {
		seen[types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}] = true
		g.Track(ds, now)
	}
	for key := range g {
		if !seen[key] {
			delete(g, key)
		}
	}
}

// Track updates the clock for one DaemonSet seen now: a new gap starts at
// now, a closed gap is forgotten. A watching caller that audits DaemonSets
// one at a time calls Forget when one goes away.
func (g GapClock) Track(ds *appsv1.DaemonSet, now time.Time) {
	key := types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}
	if ds.Status.NumberReady >= ds.Status.DesiredNumberScheduled {
		delete(g, key)
	} else if _, ok := g[key]; !ok {
		g[key] = now
	}
}

// Forget drops a DaemonSet that is gone.
func (g GapClock) Forget(key types.NamespacedName) { delete(g, key) }

// Entry is the audit of one DaemonSet.
type Entry struct {
	DaemonSet *appsv1.DaemonSet
	Status    StatusAssessment
	Coverage  coverage.Coverage
	// Skipped counts the nodes left out by untolerated, non-transient
	// taints: the gap the status counters cannot show.
	Skipped int
	// Intended is the coverage.dsguard.io/intended reason when it takes
	// effect (declared with a reason, in a namespace the exemption gate
	// allows), cleaned for display.
	Intended string
	// Exemptions are the DaemonSet's exemptions that take effect.
	Exemptions []policy.ActiveExemption
	// GroupsNotChecked is set when Exemptions or Intended are listed under a
	// policy with exemptions.allowedGroups, which only admission can apply.
	GroupsNotChecked bool
	Findings         []policy.Finding
	// Fit is what the scheduler does with a new Pod of the DaemonSet on each
	// node it covers (its own old Pod counted as gone); nil without
	// Input.Fit.
	Fit *fit.Report
	// Investigation is filled by the caller for entries with a gap.
	Investigation []coverage.NodeDiagnosis
}

// Key returns the DaemonSet's namespaced name.
func (e *Entry) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: e.DaemonSet.Namespace, Name: e.DaemonSet.Name}
}

// HasGap reports a gap an operator must look at: from the counters, or nodes
// skipped by taints that the DaemonSet does not declare as intended.
func (e *Entry) HasGap() bool {
	return e.Status.HasGap() || (e.Skipped > 0 && e.Intended == "")
}

// Run assesses every DaemonSet: status counters, predicted coverage on the
// live nodes, and the policy's findings on the live object.
func Run(in Input) []Entry {
	out := make([]Entry, 0, len(in.DaemonSets))
	others := in.Others
	if others == nil {
		others = func() []*appsv1.DaemonSet { return in.DaemonSets }
	}
	for _, ds := range in.DaemonSets {
		key := types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}
		env := policy.Env{Policy: in.Policy, Now: in.Now, Nodes: in.Nodes, Fit: in.Fit, DaemonSets: others}
		e := Entry{
			DaemonSet: ds,
			Status:    AssessStatus(ds, in.GapSince[key], in.Now, in.Window),
		}
		// One prediction serves the entry and the rules: env caches it
		// and Evaluate's copy of env carries the cache along.
		if cov := env.Coverage(ds); cov != nil {
			e.Coverage = *cov
			e.Skipped = e.Coverage.GapNodes()
		}
		e.Fit = env.FitReport(ds)
		e.Findings = policy.Evaluate(ds, env)
		// Only the annotations that take effect: the namespace gate
		// applies here as at admission, so an intended coverage it voids
		// silences no gap, Event or alert. The group gate cannot (who wrote
		// an annotation is not on the object); admission refuses the
		// others' adds and changes, so a stored one was written by a
		// permitted person or predates the gate.
		e.Exemptions = env.ActiveExemptions(ds)
		if reason, _, ok := env.IntendedCoverage(ds); ok {
			e.Intended = reason
		}
		e.GroupsNotChecked = in.Policy != nil && in.Policy.GroupGated() && (e.Intended != "" || len(e.Exemptions) > 0)
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Key(), out[j].Key()
		return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Name < b.Name)
	})
	return out
}

// WriteTable renders the overview, one row per DaemonSet; wide then adds,
// per DaemonSet, the skipped nodes, the node-by-node investigation and the
// findings, below the table so that its columns stay aligned.
func WriteTable(w io.Writer, entries []Entry, wide, noHeaders bool) error {
	if err := printers.NewTablePrinter(printers.PrintOptions{NoHeaders: noHeaders, Wide: wide}).PrintObj(Table(entries), w); err != nil {
		return err
	}
	if !wide {
		return nil
	}
	var b strings.Builder
	for i := range entries {
		if details := auditDetails(&entries[i]); len(details) > 0 {
			fmt.Fprintf(&b, "\n%s:\n%s", entries[i].Key(), strings.Join(details, ""))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// tableColumns are the audit table's columns, as kubectl's table printer
// writes a Table (headers in upper case).
var tableColumns = []metav1.TableColumnDefinition{
	{Name: "Namespace", Type: "string", Description: "The DaemonSet's namespace."},
	{Name: "Name", Type: "string", Format: "name", Description: "The DaemonSet's name."},
	{Name: "Desired", Type: "integer", Description: "status.desiredNumberScheduled"},
	{Name: "Current", Type: "integer", Description: "status.currentNumberScheduled"},
	{Name: "Ready", Type: "integer", Description: "status.numberReady"},
	{Name: "Up-to-date", Type: "integer", Description: "status.updatedNumberScheduled"},
	{Name: "Available", Type: "integer", Description: "status.numberAvailable"},
	{Name: "Misscheduled", Type: "integer", Description: "status.numberMisscheduled"},
	{Name: "Skipped", Type: "integer", Description: "Nodes skipped for untolerated taints, which desiredNumberScheduled leaves out."},
	{Name: "Exempt", Type: "string", Description: "The rules the DaemonSet is exempted from."},
	{Name: "State", Type: "string", Description: "The audit state."},
	{Name: "Reason", Type: "string", Description: "Why, in words."},
}

// Table is the audit as a Kubernetes Table, one row per DaemonSet, for
// kubectl's table printer (cli-runtime's printers).
func Table(entries []Entry) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: tableColumns, Rows: make([]metav1.TableRow, 0, len(entries))}
	for i := range entries {
		e := &entries[i]
		st := &e.DaemonSet.Status
		state, reason := string(e.Status.State), e.Status.Reason
		if e.Status.State == StateHealthy && e.Skipped > 0 && e.Intended == "" {
			state, reason = "TaintGap", fmt.Sprintf("%d nodes skipped for untolerated taints", e.Skipped)
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{e.DaemonSet.Namespace, e.DaemonSet.Name,
			int64(st.DesiredNumberScheduled), int64(st.CurrentNumberScheduled), int64(st.NumberReady), int64(st.UpdatedNumberScheduled),
			int64(st.NumberAvailable), int64(st.NumberMisscheduled), int64(e.Skipped), exemptColumn(e.Exemptions), state, reason}})
	}
	return t
}

func auditDetails(e *Entry) []string {
	var out []string
	for _, s := range e.Coverage.Skips {
		if s.Kind != coverage.SkipTaint && s.Kind != coverage.SkipNodeName {
			continue
		}
		note := ""
		if s.Transient {
			note = " [transient]"
		} else if e.Intended != "" {
			note = " [intended: " + e.Intended + "]"
		}
		out = append(out, fmt.Sprintf("  skips %s%s\n", s.Describe(10), note))
	}
	for _, d := range e.Investigation {
		pod := d.Pod
		if pod == "" {
			pod = "-"
		}
		out = append(out, fmt.Sprintf("  node %s: pod %s %s: %s\n", d.Node, pod, d.State, d.Reason))
	}
	for _, f := range e.Findings {
		if f.Action == policy.ActionDeny || f.Action == policy.ActionWarn {
			out = append(out, fmt.Sprintf("  %s %s: %s\n", f.Action, f.RuleID, f.Message))
		}
	}
	for _, x := range e.Exemptions {
		out = append(out, fmt.Sprintf("  exempt %s\n", x))
	}
	if e.GroupsNotChecked {
		out = append(out, "  "+groupsNotChecked+"\n")
	}
	return out
}

// groupsNotChecked says, beside listed exemptions and intended coverage,
// that the audit cannot check who granted them (RBAC, allowedGroups).
const groupsNotChecked = "groups not checked offline: who may grant exemptions (exemptions.grantedByRBAC, exemptions.allowedGroups) " +
	"is checked at admission, which refuses adds and changes by others; an annotation that predates the gate holds until changed"

type jsonAuditEntry struct {
	Namespace  string                 `json:"namespace"`
	Name       string                 `json:"name"`
	Status     appsv1.DaemonSetStatus `json:"status"`
	State      StatusState            `json:"state"`
	Reason     string                 `json:"reason"`
	Gap        int32                  `json:"gap"`
	HasGap     bool                   `json:"hasGap"`
	Predicted  *jsonCoverage          `json:"predicted,omitempty"`
	Intended   string                 `json:"intended,omitempty"`
	Exemptions []jsonExemption        `json:"exemptions,omitempty"`
	// GroupsNotChecked: see Entry.GroupsNotChecked.
	GroupsNotChecked bool                     `json:"groupsNotChecked,omitempty"`
	Investigation    []coverage.NodeDiagnosis `json:"investigation"`
	Findings         []policy.Finding         `json:"findings"`
	// Fit is present when the cluster's Pods were read (dsguard audit
	// --fit): each covered node's outcome for a new Pod.
	Fit *fit.Report `json:"fit,omitempty"`
}

type jsonExemption struct {
	Rule    string `json:"rule"`
	Reason  string `json:"reason"`
	Expires string `json:"expires,omitempty"`
}

type jsonCoverage struct {
	Nodes    int        `json:"nodes"`
	Eligible int        `json:"eligible"`
	Skipped  int        `json:"skipped"`
	Skips    []jsonSkip `json:"skips"`
}

type jsonSkip struct {
	Kind      coverage.SkipKind `json:"kind"`
	Reason    string            `json:"reason"`
	Transient bool              `json:"transient,omitempty"`
	Nodes     []string          `json:"nodes"`
}

// The JSON audit's type; bump the version on any incompatible change.
const (
	JSONAPIVersion = "dsguard.io/v1alpha1"
	JSONKind       = "AuditReport"
)

// WriteJSON renders the audit for machines: an AuditReport object with
// one item per DaemonSet.
func WriteJSON(w io.Writer, entries []Entry, nodesKnown bool) error {
	items := make([]jsonAuditEntry, 0, len(entries))
	for i := range entries {
		e := &entries[i]
		j := jsonAuditEntry{
			Namespace: e.DaemonSet.Namespace, Name: e.DaemonSet.Name, Status: e.DaemonSet.Status,
			State: e.Status.State, Reason: e.Status.Reason, Gap: e.Status.Gap, HasGap: e.HasGap(),
			Intended: e.Intended, GroupsNotChecked: e.GroupsNotChecked, Investigation: e.Investigation, Findings: e.Findings,
			Fit: e.Fit,
		}
		for _, x := range e.Exemptions {
			j.Exemptions = append(j.Exemptions, jsonExemption{Rule: x.Rule, Reason: x.Reason, Expires: x.LastDay()})
		}
		if j.Investigation == nil {
			j.Investigation = []coverage.NodeDiagnosis{}
		}
		if j.Findings == nil {
			j.Findings = []policy.Finding{}
		}
		if nodesKnown {
			c := &jsonCoverage{Nodes: e.Coverage.Total, Eligible: e.Coverage.Eligible, Skipped: e.Skipped, Skips: []jsonSkip{}}
			for _, s := range e.Coverage.Skips {
				c.Skips = append(c.Skips, jsonSkip{Kind: s.Kind, Reason: s.Reason(), Transient: s.Transient, Nodes: s.Nodes()})
			}
			j.Predicted = c
		}
		items = append(items, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		APIVersion string           `json:"apiVersion"`
		Kind       string           `json:"kind"`
		Items      []jsonAuditEntry `json:"items"`
	}{JSONAPIVersion, JSONKind, items})
}
