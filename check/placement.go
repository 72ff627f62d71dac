package check

import (
	"fmt"
	"strings"

	"github.com/dsguard/dsguard/coverage"
)

// placementNames is how many node names a line shows before "and N more".
const placementNames = 10

// WritePlacement prints a placement for a person: where it runs, then each
// group of skipped nodes with its reason.
func WritePlacement(b *strings.Builder, p *coverage.Placement, indent string) {
	fmt.Fprintf(b, "%sruns on %d of %d nodes%s\n", indent, p.RunsOn, p.Nodes, nameList(p.RunsOnNodes))
	for _, s := range p.Skips {
		note := ""
		if s.Transient {
			note = " (transient: expected while a node joins, fails or is scaled away)"
		}
		fmt.Fprintf(b, "%sskips %d: %s%s%s\n", indent, s.Count, s.Reason, note, nameList(s.Nodes))
	}
}

func nameList(names []string) string {
	if len(names) == 0 {
		return ""
	}
	more := ""
	if len(names) > placementNames {
		more = fmt.Sprintf(" and %d more", len(names)-placementNames)
		names = names[:placementNames]
	}
	return ": " + strings.Join(names, ", ") + more
}
