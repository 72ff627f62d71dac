package check

import (
	"cmp"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
)

// placementNames is how many node names a line shows before "and N more".
const placementNames = 10

// WritePlacement prints a placement for a person: where it runs, then each
// group of skipped nodes with its reason.
func WritePlacement(b *strings.Builder, p *coverage.Placement, indent string) {
	fmt.Fprintf(b, "%sruns on %d of %d nodes%s\n", indent, p.RunsOn, p.Nodes, nameList(p.RunsOnNodes))
	for _, s := range p.Skips {
		note, names := "", nameList(s.Nodes)
		if s.Transient {
			note = fmt.Sprintf(" (lifecycle: %s; not a coverage gap)", cmp.Or(s.Lifecycle, "expected while a node joins or leaves"))
			names = nameListWith(s.Nodes, func(n string) string {
				if d, ok := s.TaintedFor[n]; ok {
					return fmt.Sprintf("%s (for %s)", n, duration.HumanDuration(d.Duration))
				}
				return n
			})
		}
		fmt.Fprintf(b, "%sskips %d: %s%s%s\n", indent, s.Count, s.Reason, note, names)
	}
}

func nameList(names []string) string { return nameListWith(names, nil) }

// nameListWith is nameList showing each name as shows returns it (nil: as
// it is).
func nameListWith(names []string, shows func(string) string) string {
	if len(names) == 0 {
		return ""
	}
	more := ""
	if len(names) > placementNames {
		more = fmt.Sprintf(" and %d more", len(names)-placementNames)
		names = names[:placementNames]
	}
	if shows != nil {
		shown := make([]string, len(names))
		for i, n := range names {
			shown[i] = shows(n)
		}
		names = shown
	}
	return ": " + strings.Join(names, ", ") + more
}

// WriteFit prints what the scheduler will do on the covered nodes: how many
// the Pod lands on, then each group of nodes by outcome and reason.
func WriteFit(b *strings.Builder, r *fit.Report, indent string) {
	if r.Error != "" {
		fmt.Fprintf(b, "%sno Pod can be created: %s\n", indent, r.Error)
		return
	}
	never := ""
	if r.PreemptNever {
		never = ", preemptionPolicy Never"
	}
	fmt.Fprintf(b, "%slands on %d of %d covered nodes (priority %d%s)", indent, r.Lands(), r.Covered(), r.Priority, never)
	if r.Unknown > 0 {
		fmt.Fprintf(b, "; %d nodes without status.allocatable not weighed", r.Unknown)
	}
	b.WriteString("\n")
	for _, s := range r.Summarize() {
		switch s.Kind {
		case fit.Fits:
			continue
		case fit.Preempts:
			fmt.Fprintf(b, "%sfits on %d %s%s\n", indent, len(s.Nodes), s.Why, nameList(s.Nodes))
		default:
			fmt.Fprintf(b, "%s%s on %d: %s%s\n", indent, strings.ReplaceAll(string(s.Kind), "-", " "), len(s.Nodes), s.Why, nameList(s.Nodes))
		}
	}
}
