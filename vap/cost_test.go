package vap

import (
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/utils/ptr"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

// costTest runs the cost measurement on the largest DaemonSets.
var costTest = flag.Bool("vap.cost", false, "measure the generated expressions' cost on the largest DaemonSets (minutes)")

// maxObjectBytes is the largest DaemonSet the API accepts: etcd refuses a
// write above 1.5 MiB (its default --max-request-bytes). Admission may see a
// request up to 3 MiB (the API server's body limit) before etcd refuses it;
// there the host-path-read-only policies run out of budget on a DaemonSet of
// about 50,000 hostPath volumes and the request fails by failurePolicy
// (docs/modes.md).
const maxObjectBytes = 1536 * 1024

// filled returns the DaemonSet build(n) for the largest n whose JSON still
// fits in the API server's request limit.
func filled(t testing.TB, build func(n int) *appsv1.DaemonSet) *appsv1.DaemonSet {
	t.Helper()
	size := func(n int) int {
		data, err := json.Marshal(build(n))
		if err != nil {
			t.Fatal(err)
		}
		return len(data)
	}
	lo, hi := 1, 2
	for size(hi) <= maxObjectBytes {
		lo, hi = hi, hi*2
	}
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if size(mid) <= maxObjectBytes {
			lo = mid
		} else {
			hi = mid
		}
	}
	return build(lo)
}

// absentLabels are n requirements that hold on every model node: a label
// they lack does not exist.
func absentLabels(n int) []corev1.NodeSelectorRequirement {
	rs := make([]corev1.NodeSelectorRequirement, n)
	for i := range rs {
		rs[i] = corev1.NodeSelectorRequirement{Key: "a", Operator: corev1.NodeSelectorOpDoesNotExist}
	}
	return rs
}

// onArm64 holds on the arm64 model node only.
var onArm64 = corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}

// affinity sets the required node affinity's terms.
func affinity(ds *appsv1.DaemonSet, terms []corev1.NodeSelectorTerm) {
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
}

func base(name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "node-agent"}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: ptr.To(intstr.FromString("100%")), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "main", Image: "agent"}}},
			},
		},
	}
}

// worstCases are DaemonSets at the API server's size limit, each shaped to
// make one kind of generated check work hardest: the most containers, the
// most mounts against the most hostPath volumes, the most tolerations and
// node selector terms, the most annotation bytes, the longest strings.
func worstCases(t testing.TB) map[string]*appsv1.DaemonSet {
	t.Helper()
	container := func(i int) corev1.Container {
		return corev1.Container{
			Name: fmt.Sprintf("c%d", i), Image: "r/i",
			Ports:           []corev1.ContainerPort{{ContainerPort: 1, HostPort: 1}},
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			VolumeMounts:    []corev1.VolumeMount{{Name: "v", MountPath: "/m"}},
		}
	}
	return map[string]*appsv1.DaemonSet{
		"containers": filled(t, func(n int) *appsv1.DaemonSet {
			ds := base("containers")
			ds.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			for i := range n {
				ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, container(i))
			}
			return ds
		}),
		"sidecars": filled(t, func(n int) *appsv1.DaemonSet {
			ds := base("sidecars")
			ds.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			for i := range n {
				sidecar := container(i)
				sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
				ds.Spec.Template.Spec.InitContainers = append(ds.Spec.Template.Spec.InitContainers, sidecar)
			}
			return ds
		}),
		"mounts-and-volumes": filled(t, func(n int) *appsv1.DaemonSet {
			ds := base("mounts-and-volumes")
			spec := &ds.Spec.Template.Spec
			for i := range n {
				name := fmt.Sprintf("v%d", i)
				spec.Volumes = append(spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/x"}}})
				spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: name, MountPath: "/m" + name})
			}
			return ds
		}),
		"tolerations-and-affinity": filled(t, func(n int) *appsv1.DaemonSet {
			ds := base("tolerations-and-affinity")
			spec := &ds.Spec.Template.Spec
			var terms []corev1.NodeSelectorTerm
			for i := range n {
				spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: fmt.Sprintf("k%d", i), Operator: corev1.TolerationOpExists})
				terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}}})
			}
			spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
			return ds
		}),
		// control-plane-toleration's placement check, which must read
		// every requirement: absent keys DoesNotExist (all hold), one term,
		// and last one that holds on the arm64 model node only.
		"affinity-requirements": filled(t, func(n int) *appsv1.DaemonSet {
			ds := base("affinity-requirements")
			affinity(ds, []corev1.NodeSelectorTerm{{MatchExpressions: append(absentLabels(n), onArm64)}})
			return ds
		}),
		// As many terms as the engine judges, each failing at its last
		// requirement only.
		"affinity-terms": filled(t, func(n int) *appsv1.DaemonSet {
			ds := base("affinity-terms")
			var terms []corev1.NodeSelectorTerm
			for i := range policy.MaxAffinityTerms {
				rs := []corev1.NodeSelectorRequirement{{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}}
				rs = append(rs, absentLabels(n)...)
				rs = append(rs, corev1.NodeSelectorRequirement{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{fmt.Sprint(i)}})
				terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: rs})
			}
			affinity(ds, terms)
			return ds
		}),
		// As many values as the engine judges, each one checked to be a
		// label value, then requirements that hold on both model nodes,
		// then one that holds on the arm64 one only: both are read to the end.
		"affinity-values": filled(t, func(n int) *appsv1.DaemonSet {
			ds := base("affinity-values")
			var values []string
			for i := range policy.MaxAffinityValues - 1 {
				values = append(values, fmt.Sprintf("%062d", i))
			}
			rs := []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpNotIn, Values: values}}
			affinity(ds, []corev1.NodeSelectorTerm{{MatchExpressions: append(append(rs, absentLabels(n)...), onArm64)}})
			return ds
		}),
		// Match fields that all hold, in one term.
		"affinity-fields": filled(t, func(n int) *appsv1.DaemonSet {
			ds := base("affinity-fields")
			var fs []corev1.NodeSelectorRequirement
			for i := range min(n, policy.MaxAffinityValues) {
				fs = append(fs, corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{fmt.Sprint(i)}})
			}
			affinity(ds, []corev1.NodeSelectorTerm{{MatchFields: fs, MatchExpressions: absentLabels(max(n-policy.MaxAffinityValues, 0))}})
			return ds
		}),
		// The API server allows 256 KiB of annotations in total.
		"annotations": func() *appsv1.DaemonSet {
			ds := base("annotations")
			ds.Annotations = map[string]string{}
			long := strings.Repeat("a;", 60<<10) + " expires=2099-01-01"
			for _, rule := range []string{"control-plane-toleration", "privileged"} {
				ds.Annotations["exempt.dsguard.io/"+rule] = long
			}
			for i := 0; i < 1500; i++ {
				ds.Annotations[fmt.Sprintf("exempt.dsguard.io/r%d", i)] = "; expires=2099-02-30"
			}
			return ds
		}(),
		"long-strings": func() *appsv1.DaemonSet {
			ds := base("long-strings")
			ds.Spec.Template.Spec.Containers[0].Image = strings.Repeat("r/", 700<<10) + "i"
			ds.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: strings.Repeat("/x", 350<<10)}}}}
			ds.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "v", MountPath: "/m"}}
			return ds
		}(),
	}
}

const costPolicy = `apiVersion: dsguard.io/v1alpha1
kind: PolicyConfig
namespaceEnforcement: [{namespaces: ["kube-*", "sandbox-?"], enforcement: warn}]
bypass: {users: [break-glass], groups: [oncall]}
exemptions: {allowedGroups: [platform-team, sre]}
rules:
  control-plane-toleration:
    parameters: {taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}, {key: node-role.kubernetes.io/master, effect: NoExecute}]}
    scope: {namespaces: {include: ["team-*", fixtures], exclude: ["team-x*"]}, selector: {matchExpressions: [{key: skip, operator: DoesNotExist}]}}
  surge-host-port: {action: deny}
  max-unavailable: {action: deny, parameters: {maxPercent: 10, maxCount: 2}}
  readiness-probe: {action: deny}
  host-path-read-only: {action: deny, parameters: {allowWritable: [/var/lib/agent, /etc/cni/net.d]}}
  privileged: {action: deny}
  image-pinned: {action: deny, parameters: {requireDigest: false}}
  update-strategy: {action: deny}
  invalid-annotation: {action: deny}
`

// costCases limits the measurement to the worst cases whose names match.
var costCases = flag.String("vap.cases", "", "with -vap.cost: measure only the worst cases matching this regular expression")

// costUpdate rewrites docs/modes.md's cost table from the measurement.
var costUpdate = flag.Bool("vap.update", false, "with -vap.cost: write the measured costs into docs/modes.md")

// costBudget is one of the API server's runtime CEL limits.
type costBudget struct {
	what  string
	limit int64
}

// costMargin is the share of each API server limit, in percent, above
// which the measurement fails: a change that brings a program near a limit
// fails the build before the API server would refuse a write.
const costMargin = 90

// allowed is the most the measurement lets a program or binding cost.
func (b costBudget) allowed() int64 { return b.limit * costMargin / 100 }

var (
	perProgram      = costBudget{"per expression (each variable, match condition, validation and message on its own)", celconfig.PerCallLimit}
	matchConditions = costBudget{"per binding, its match conditions together", celconfig.RuntimeCELCostBudgetMatchConditions}
	perBinding      = costBudget{"per binding, its validations and the messages of those that fail, with the variables they read", celconfig.RuntimeCELCostBudget}
)

// measured is the worst cost seen of an expression and where.
type measured struct {
	cost  int64
	where string
}

func (m *measured) add(cost int64, where string) {
	if cost > m.cost {
		m.cost, m.where = cost, where
	}
}

// TestRender_CostStaysUnderTheAPIServersLimits evaluates every generated
// policy, as CREATE and as UPDATE, on DaemonSets at the API server's size
// limit, with the API server's own cost accounting, and requires every
// program (variable, match condition, validation, message) to stay under
// the per-expression limit and each policy under the budgets per binding.
// With -vap.update it writes the measured costs into docs/modes.md.
func TestRender_CostStaysUnderTheAPIServersLimits(t *testing.T) {
	if !*costTest {
		t.Skip("takes minutes on DaemonSets of 1.5 MiB: run with -timeout 60m -args -vap.cost (docs/modes.md)")
	}
	cases := worstCases(t)
	if *costCases != "" {
		if *costUpdate {
			t.Fatal("-vap.update needs every worst case: drop -vap.cases")
		}
		only := regexp.MustCompile(*costCases)
		maps.DeleteFunc(cases, func(name string, _ *appsv1.DaemonSet) bool { return !only.MatchString(name) })
	}
	for name, ds := range cases {
		data, _ := json.Marshal(ds)
		t.Logf("worst case %s: %d bytes", name, len(data))
	}
	res := costPolicies(t)
	policies := compileResult(t, res)
	worst := map[[2]string]*measured{} // by policy and field
	totals := map[costBudget]*measured{matchConditions: {}, perBinding: {}}
	// Each request is measured on its own goroutine (the evaluations are
	// independent and each takes seconds, single-threaded, on a 1.5 MiB
	// object); the results are then taken in this fixed order, so that the
	// worst case named for a tie does not depend on which finished first.
	type job struct {
		where string
		r     request
		costs []cost // by policy
	}
	var jobs []*job
	for _, caseName := range slices.Sorted(maps.Keys(cases)) {
		ds := cases[caseName]
		jobs = append(jobs,
			&job{where: caseName + " (CREATE)", r: request{namespace: "fixtures", object: ds}},
			&job{where: caseName + " (UPDATE)", r: request{namespace: "fixtures", object: ds, old: changedCopy(ds)}})
	}
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for _, j := range jobs {
		g.Go(func() error {
			start := time.Now()
			attrs := j.r.attributes()
			cache := map[string]*evaluated{}
			for i := range policies {
				j.costs = append(j.costs, measure(t, &policies[i], j.r, attrs, cache))
			}
			t.Logf("%s: %s", j.where, time.Since(start).Round(time.Millisecond))
			return nil
		})
	}
	_ = g.Wait()
	for _, j := range jobs {
		for i, got := range j.costs {
			c := &policies[i]
			for field, v := range got.programs {
				key := [2]string{c.policy.Name, field}
				if worst[key] == nil {
					worst[key] = &measured{}
				}
				worst[key].add(v, j.where)
				if v > perProgram.allowed() {
					t.Errorf("%s %s on %s: %d, above %d%% of the API server's limit %s: %d", c.policy.Name, field, j.where, v, costMargin, perProgram.what, perProgram.limit)
				}
			}
			for b, v := range map[costBudget]int64{matchConditions: got.matchConditions, perBinding: got.validations} {
				totals[b].add(v, c.policy.Name+" on "+j.where)
				if v > b.allowed() {
					t.Errorf("%s on %s: %d, above %d%% of the API server's budget %s: %d", c.policy.Name, j.where, v, costMargin, b.what, b.limit)
				}
			}
		}
	}
	table := costTable(res, worst, totals)
	t.Logf("measured:\n%s", table)
	if *costUpdate {
		if err := replaceBetween(modesDoc, costBegin, costEnd, table); err != nil {
			t.Fatal(err)
		}
	}
}

// changedCopy is ds with a changed spec, so that an UPDATE runs the
// ratcheting comparison with the old object (an unchanged spec skips it).
func changedCopy(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	old := ds.DeepCopy()
	old.Spec.MinReadySeconds++
	return old
}

// costPolicies are the policies the cost test measures: every rule denies,
// with every parameter set (the costliest form of each check; the deny
// policies carry the ratcheting comparison), some namespaces warn, and the
// exemption gate refuses, or warns in a fail-open namespace.
func costPolicies(t testing.TB) *Result {
	t.Helper()
	cfg, err := rules.Builtin().ParseConfig([]byte(costPolicy))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Render(cfg, Options{Namespace: "dsguard-system", FailOpenNamespaces: []string{"kube-system"}, Today: testDay})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// costRow is one distinct expression of one rule's generated policies.
type costRow struct {
	rule, field, text string
	// policies are the generated policies that carry the expression.
	policies []string
}

// costRows lists the distinct expressions of each rule's policies, in the
// order they are rendered.
func costRows(res *Result) []*costRow {
	var rows []*costRow
	byText := map[[3]string]*costRow{}
	for _, p := range res.Policies {
		rule := p.Labels[RuleLabel]
		add := func(field, text string) {
			key := [3]string{rule, field, text}
			if byText[key] == nil {
				byText[key] = &costRow{rule: rule, field: field, text: text}
				rows = append(rows, byText[key])
			}
			byText[key].policies = append(byText[key].policies, p.Name)
		}
		for _, m := range p.Spec.MatchConditions {
			add("matchConditions."+m.Name, m.Expression)
		}
		for _, v := range p.Spec.Variables {
			add("variables."+v.Name, v.Expression)
		}
		for i, v := range p.Spec.Validations {
			add(fmt.Sprintf("validations[%d].expression", i), v.Expression)
			add(fmt.Sprintf("validations[%d].messageExpression", i), v.MessageExpression)
		}
	}
	return rows
}

// costTable is the cost section of docs/modes.md: one row per distinct
// expression, with its worst measured cost (none when worst is nil), then
// the worst totals against the budgets per binding.
func costTable(res *Result, worst map[[2]string]*measured, totals map[costBudget]*measured) string {
	var b strings.Builder
	b.WriteString(expressionsDigest(res))
	b.WriteString("| Rule | Policies (`dsguard-<rule>-…`) | Expression | Worst cost | On |\n| --- | --- | --- | ---: | --- |\n")
	for _, r := range costRows(res) {
		var suffixes []string
		m := measured{}
		for _, p := range r.policies {
			suffixes = append(suffixes, strings.TrimPrefix(p, NamePrefix+r.rule+"-"))
			if w := worst[[2]string{p, r.field}]; w != nil {
				m.add(w.cost, w.where)
			}
		}
		cost, where := "not run", ""
		if m.where != "" {
			cost, where = formatCost(m.cost), m.where
		}
		if worst == nil {
			cost = ""
		}
		fmt.Fprintf(&b, "| %s | %s | `%s` | %s | %s |\n", r.rule, strings.Join(suffixes, ", "), r.field, cost, where)
	}
	if totals != nil {
		b.WriteString("\n")
		for _, budget := range []costBudget{matchConditions, perBinding} {
			m := totals[budget]
			fmt.Fprintf(&b, "- Worst %s: %s of %s, %s.\n", budget.what, formatCost(m.cost), formatCost(budget.limit), m.where)
		}
	}
	return b.String()
}

// expressionsDigest is the first line of the cost table: a digest of every
// expression the table was measured on, with its rule, field and policies,
// so that a change to any expression's text, not only to the list of
// fields, shows the table is stale.
func expressionsDigest(res *Result) string {
	h := sha256.New()
	for _, r := range costRows(res) {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", r.rule, r.field, strings.Join(r.policies, ","), r.text)
	}
	return fmt.Sprintf("<!-- expressions measured: sha256 %x -->\n", h.Sum(nil)[:12])
}

// formatCost writes a cost with thousands separators.
func formatCost(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// costTableKeys are the first three cells (rule, policies, expression) of
// each row of a cost table: what must not drift from the rendered policies.
func costTableKeys(table string) []string {
	var out []string
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| ") || len(cells) < 4 || strings.HasPrefix(line, "| Rule ") || strings.HasPrefix(line, "| ---") {
			continue
		}
		out = append(out, strings.Join(cells[:3], " | "))
	}
	return out
}

const (
	modesDoc  = "../docs/modes.md"
	costBegin = "<!-- cost table: generated by go test ./vap -run TestRender_CostStaysUnderTheAPIServersLimits -timeout 60m -args -vap.cost -vap.update -->\n"
	costEnd   = "<!-- end cost table -->"
)

// TestCostTable_ListsEveryExpression keeps docs/modes.md's cost table in
// step with the expressions the policies are rendered with: the same rows,
// measured on the same expression texts (the digest on the table's first
// line), and no documented cost above the margin. The costs themselves come
// from TestRender_CostStaysUnderTheAPIServersLimits, a stage of make test.
func TestCostTable_ListsEveryExpression(t *testing.T) {
	doc, err := between(modesDoc, costBegin, costEnd)
	if err != nil {
		t.Fatal(err)
	}
	res := costPolicies(t)
	remeasure := "measure again with\n  go test ./vap -run TestRender_CostStaysUnderTheAPIServersLimits -timeout 60m -args -vap.cost -vap.update"
	got, want := costTableKeys(doc), costTableKeys(costTable(res, nil, nil))
	if !slices.Equal(got, want) {
		t.Errorf("docs/modes.md's cost table lists other expressions than the policies have: %s\n"+
			"got:\n%s\nwant:\n%s", remeasure, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if digest := expressionsDigest(res); !strings.HasPrefix(doc, digest) {
		t.Errorf("docs/modes.md's cost table was measured on other expression texts than the policies have (want the first line %q): %s",
			strings.TrimSpace(digest), remeasure)
	}
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) < 5 || !strings.HasPrefix(line, "| ") {
			continue
		}
		cost, err := strconv.ParseInt(strings.ReplaceAll(cells[3], ",", ""), 10, 64)
		if err != nil {
			continue // the header, or not run
		}
		if cost > perProgram.allowed() {
			t.Errorf("docs/modes.md's cost table: %s costs %s, above %d%% of the API server's limit %s", strings.Join(cells[:3], " | "), cells[3], costMargin, formatCost(perProgram.limit))
		}
	}
}
