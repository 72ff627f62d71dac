package coveragemap

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strings"
)

// WriteHTML writes the map as one page that needs nothing else: styles,
// script and data inline, no request to anywhere. The script only filters
// what the server-side table already shows, so the page reads the same with
// scripts off. The address's fragment presets the filters (#gaps,
// #ds=<text>), so that a link can point at a view.
func (m *Map) WriteHTML(w io.Writer) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return pageTemplate.Execute(w, struct {
		*Map
		Data template.JS
	}{m, template.JS(data)})
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"short": shortNames,
	"join":  strings.Join,
	"gap":   func(c Column) bool { return c.Gaps() > 0 },
	"rowGap": func(g Group) bool {
		for _, c := range g.Cells {
			if c.State != Covered {
				return true
			}
		}
		return false
	},
	"deref": func(p *int32) int32 { return *p },
}).Parse(pageHTML))

// shortNames lists up to 3 names and counts the rest.
func shortNames(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:3], ", "), len(names)-3)
}

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dsguard coverage map: {{.Title}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d2329; }
h1 { font-size: 1.3em; margin: 0 0 .3em; }
.summary, .legend { color: #555; margin: .3em 0; }
.controls { margin: .8em 0; display: flex; gap: 1em; align-items: center; flex-wrap: wrap; }
table { border-collapse: collapse; }
th, td { border: 1px solid #d0d5da; padding: .3em .5em; vertical-align: top; }
thead th { background: #f3f5f7; font-weight: 600; text-align: center; }
th.ds .counts { font-weight: normal; font-size: .85em; color: #555; display: block; }
th.group { text-align: left; font-weight: normal; background: #fafbfc; max-width: 22em; }
th.group .pool { font-weight: 600; }
th.group .nodes { color: #555; font-size: .85em; }
td.cell { text-align: center; min-width: 6em; font-size: .85em; }
td.covered { background: #d9f2df; }
td.pending { background: #fff1c2; }
td.skipped { background: #eceff1; color: #555; }
td.misscheduled { background: #f9d3d0; }
td.preempts { background: #ffd9b3; }
th.ds .source, th.group .traits { font-weight: normal; font-size: .85em; color: #555; }
.badge { display: inline-block; padding: 0 .4em; border-radius: .3em; font-size: .85em; }
.hidden { display: none; }
</style>
</head>
<body>
<h1>dsguard coverage map</h1>
<div class="summary">{{.Title}}: {{.Nodes}} nodes in {{len .Groups}} groups, {{len .Agents}} DaemonSets{{if .Live}}{{else if .FitPredicted}}; predicted from the manifests and the cluster's Pods: pending and preempts say what the scheduler would do with each new Pod (none of these DaemonSets' Pods known, so nothing is misscheduled){{else}}; predicted from the manifests (no Pods known, so nothing is Pending or misscheduled){{end}}.</div>
<div class="legend">
<span class="badge covered" style="background:#d9f2df">covered</span>
<span class="badge" style="background:#fff1c2">pending</span>
<span class="badge" style="background:#eceff1">skipped</span>
<span class="badge" style="background:#f9d3d0">misscheduled</span>
<span class="badge" style="background:#ffd9b3">preempts</span>
a group is the nodes of one pool that every DaemonSet treats alike.
</div>
<div class="controls">
<label>DaemonSets <input id="filter-ds" type="search" placeholder="namespace/name contains"></label>
<label><input id="filter-gaps" type="checkbox"> only gaps (DaemonSets and groups with a node not covered)</label>
<span id="shown"></span>
</div>
<table id="map">
<thead>
<tr><th>node group</th>{{range .Agents}}<th class="ds" data-ds="{{.ID}}" data-gap="{{gap .}}">{{.Namespace}}/<br>{{.Name}}{{if .Namesake}}<br><span class="source">{{.Source}}</span>{{end}}
<span class="counts">covered {{.N "covered"}}{{if .N "preempts"}} · preempts {{.N "preempts"}}{{end}} · pending {{.N "pending"}} · skipped {{.N "skipped"}}{{if .N "misscheduled"}} · misscheduled {{.N "misscheduled"}}{{end}}</span>
{{if .Desired}}<span class="counts">status: desired {{deref .Desired}} · ready {{deref .Ready}} · updated {{deref .Updated}} · misscheduled {{deref .Misscheduled}}</span>{{end}}</th>{{end}}</tr>
</thead>
<tbody>
{{range $g, $group := .Groups}}<tr class="group" data-group="{{$g}}" data-gap="{{rowGap $group}}" data-nodes="{{join $group.Nodes ","}}">
<th class="group" title="{{join $group.Nodes ", "}}"><span class="pool">{{$group.Pool}}</span>{{if $group.Traits}} <span class="traits">{{join $group.Traits ", "}}</span>{{else if $group.NoTrait}} <span class="traits">(no label or taint sets these apart)</span>{{end}} · {{len $group.Nodes}} node{{if ne (len $group.Nodes) 1}}s{{end}}<br><span class="nodes">{{short $group.Nodes}}</span></th>
{{range $i, $c := $group.Cells}}{{$ds := index $.Agents $i}}<td class="cell {{$c.State}}" data-ds="{{$ds.ID}}" data-state="{{$c.State}}" title="{{$ds.ID}} on {{len $group.Nodes}} node(s): {{$c.State}}{{if $c.Reason}}: {{$c.Reason}}{{end}}">{{$c.State}}{{if $c.Reason}}<br>{{$c.Reason}}{{end}}</td>
{{end}}</tr>
{{end}}</tbody>
</table>
<script type="application/json" id="coverage-data">{{.Data}}</script>
<script>
(function () {
  var ds = document.getElementById('filter-ds'), gaps = document.getElementById('filter-gaps');
  var hash = decodeURIComponent(location.hash.slice(1));
  hash.split('&').forEach(function (p) {
    if (p === 'gaps') gaps.checked = true;
    if (p.indexOf('ds=') === 0) ds.value = p.slice(3);
  });
  function apply() {
    var text = ds.value.trim(), onlyGaps = gaps.checked, shownDS = 0, shownGroups = 0;
    var keep = {};
    document.querySelectorAll('th.ds').forEach(function (th) {
      var k = th.dataset.ds, on = k.indexOf(text) >= 0 && (!onlyGaps || th.dataset.gap === 'true');
      keep[k] = on;
      th.classList.toggle('hidden', !on);
      if (on) shownDS++;
    });
    document.querySelectorAll('tr.group').forEach(function (tr) {
      var any = false;
      tr.querySelectorAll('td.cell').forEach(function (td) {
        var on = keep[td.dataset.ds];
        td.classList.toggle('hidden', !on);
        if (on && td.dataset.state !== 'covered') any = true;
      });
      var on = !onlyGaps || any;
      tr.classList.toggle('hidden', !on);
      if (on) shownGroups++;
    });
    document.getElementById('shown').textContent = shownDS + ' DaemonSets, ' + shownGroups + ' groups shown';
    document.body.dataset.filtered = 'true';
  }
  ds.addEventListener('input', apply);
  gaps.addEventListener('change', apply);
  apply();
})();
</script>
</body>
</html>
`

// WriteMarkdown writes one row per DaemonSet: nodes covered, Pending,
// misscheduled, and the skipped nodes by reason, for a pull-request
// comment.
func (m *Map) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "### dsguard coverage: %s\n\n", markdownCell(m.Title))
	fmt.Fprintf(&b, "%d nodes, %d DaemonSets", m.Nodes, len(m.Agents))
	if !m.Live {
		b.WriteString(" (predicted from the manifests)")
	}
	b.WriteString("\n\n" + markdownHeader)
	for i, a := range m.Agents {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s |\n", markdownCode(a.ID()), covered(a), a.Counts[Pending], a.Counts[Misscheduled],
			reasonList(skipReasons(m, i), nil))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// markdownHeader heads both Markdown tables.
const markdownHeader = "| DaemonSet | covered | pending | misscheduled | skipped |\n|---|---|---|---|---|\n"

// markdownCell is s as plain text in a table cell: one line, and every
// character that opens inline markup (emphasis, code, links and images,
// HTML, entities, strikethrough, cell breaks) escaped. Names and reasons come from manifests, which nobody validated:
// a DaemonSet named to look like a link or an image must print as its name.
func markdownCell(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r':
			b.WriteByte(' ')
		case strings.ContainsRune("\\`*_[]<>|~&", r):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// markdownCode is s as a code span in a table cell: fenced by more
// backticks than any run in s (so that s cannot close it), on one line,
// with pipes escaped (GitHub splits cells before it reads code spans).
func markdownCode(s string) string {
	s = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ").Replace(s)
	run, longest := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

// WriteMarkdownChange writes, for a pull-request comment, how coverage
// changes from before to after (two node sets, or the DaemonSets as they
// stand and as the manifests would make them): one row per DaemonSet whose
// counts or skip reasons differ.
func WriteMarkdownChange(w io.Writer, before, after *Map) error {
	var b strings.Builder
	fmt.Fprintf(&b, "### dsguard coverage change: %s → %s\n\n", markdownCell(before.Title), markdownCell(after.Title))
	rows := 0
	table := func() {
		if rows == 0 {
			b.WriteString(markdownHeader)
		}
		rows++
	}
	was := map[string]int{}
	for i, c := range before.Agents {
		was[c.Key()] = i
	}
	seen := map[string]bool{}
	for i, a := range after.Agents {
		seen[a.Key()] = true
		j, ok := was[a.Key()]
		if !ok {
			table()
			fmt.Fprintf(&b, "| %s (new) | %d | %d | %d | %s |\n", markdownCode(a.Key()), a.Counts[Covered], a.Counts[Pending], a.Counts[Misscheduled],
				reasonList(skipReasons(after, i), nil))
			continue
		}
		old := before.Agents[j]
		oldSkips, newSkips := skipReasons(before, j), skipReasons(after, i)
		if old.Counts[Covered] == a.Counts[Covered] && old.Counts[Pending] == a.Counts[Pending] &&
			old.Counts[Misscheduled] == a.Counts[Misscheduled] && maps.Equal(oldSkips, newSkips) {
			continue
		}
		table()
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", markdownCode(a.Key()), change(old.Counts[Covered], a.Counts[Covered]),
			change(old.Counts[Pending], a.Counts[Pending]), change(old.Counts[Misscheduled], a.Counts[Misscheduled]),
			reasonList(newSkips, oldSkips))
	}
	for _, c := range before.Agents {
		if !seen[c.Key()] {
			table()
			fmt.Fprintf(&b, "| %s (gone) | %d → 0 | | | |\n", markdownCode(c.Key()), c.Counts[Covered])
		}
	}
	if rows == 0 {
		b.WriteString("No DaemonSet's coverage changes.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// skipReasons counts agent i's skipped nodes by reason.
func skipReasons(m *Map, i int) map[string]int {
	out := map[string]int{}
	for _, g := range m.Groups {
		if c := g.Cells[i]; c.State == Skipped {
			out[c.Reason] += len(g.Nodes)
		}
	}
	return out
}

// reasonList lists the skip reasons with their counts, marking those that
// differ from was (nil: nothing to compare with).
func reasonList(now, was map[string]int) string {
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(now)) {
		if was == nil || was[r] == now[r] {
			parts = append(parts, fmt.Sprintf("%d: %s", now[r], markdownCell(r)))
			continue
		}
		parts = append(parts, fmt.Sprintf("**%s: %s**", change(was[r], now[r]), markdownCell(r)))
	}
	for _, r := range slices.Sorted(maps.Keys(was)) {
		if _, still := now[r]; !still {
			parts = append(parts, fmt.Sprintf("~~%d: %s~~", was[r], markdownCell(r)))
		}
	}
	return strings.Join(parts, "<br>")
}

// covered counts the nodes the agent lands on, saying how many of them
// only by preempting.
func covered(c Column) string {
	if p := c.Counts[Preempts]; p > 0 {
		return fmt.Sprintf("%d (%d by preempting)", c.Counts[Covered]+p, p)
	}
	return fmt.Sprint(c.Counts[Covered])
}

// change is "a → b", or a alone when equal.
func change(a, b int) string {
	if a == b {
		return fmt.Sprint(a)
	}
	return fmt.Sprintf("%d → %d", a, b)
}
