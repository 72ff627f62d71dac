package rules

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

// A fitCase is a cluster and a DaemonSet for the fit rules, each field an
// index into a palette of realistic values, so that every byte string the
// fuzzer makes decodes to a cluster the API server could hold: the search
// goes into the rules, not into their input's validation.
type fitCase struct {
	nodes []fitCaseNode
	pods  []fitCasePod
	ds    fitCaseDS
	// hide is Env.HideNodeNames; minValue indexes fitMinValues.
	hide, minValue uint8
}

type fitCaseNode struct{ cpu, memory, pods, pool, taint uint8 }

type fitCasePod struct{ node, cpu, memory, class, port, owner, app, anti, phase uint8 }

type fitCaseDS struct{ cpu, memory, class, never, port, pool, tolerate, anti uint8 }

// The palettes. A node whose cpu is "" has no allocatable at all (not yet
// reported): fit does not weigh it.
var (
	fitNodeCPU    = []string{"", "500m", "2", "4", "16"}
	fitNodeMemory = []string{"512Mi", "4Gi", "16Gi", "64Gi"}
	fitNodePods   = []string{"110", "3", "1", "0"}
	fitPools      = []string{"general", "infra"}
	fitTaints     = []*corev1.Taint{nil,
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule},
		{Key: testobj.ControlPlaneKey, Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/spot", Effect: corev1.TaintEffectPreferNoSchedule}}
	fitCPU    = []string{"", "100m", "500m", "1", "1500m", "3"}
	fitMemory = []string{"", "128Mi", "1Gi", "3Gi", "8Gi"}
	// fitClasses are the cluster's PriorityClasses by name; "missing",
	// last, is one a DaemonSet may name that the cluster lacks.
	fitClasses   = []string{"", "low", "high", "system-node-critical", "missing"}
	fitPriority  = map[string]int32{"low": 100, "high": 1000000, "system-node-critical": 2000001000}
	fitPorts     = []int32{0, 9100, 8080}
	fitApps      = []string{"web", "db", "agent"}
	fitPhases    = []corev1.PodPhase{corev1.PodRunning, corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed}
	fitMinValues = []*int{nil, new(0), new(500), new(1000001), new(systemNodeCritical)}
)

const (
	fitMaxNodes = 8
	fitMaxPods  = 16
	// fitNodePrefix and fitPodPrefix start every node's and Pod's name, so
	// that the names a message gives can be found in it.
	fitNodePrefix = "fz-node-"
	fitPodPrefix  = "fz-pod-"
)

// fitTape reads a fuzz input one palette index at a time; past its end,
// every index is 0.
type fitTape struct{ data []byte }

func (t *fitTape) next(n int) uint8 {
	if len(t.data) == 0 {
		return 0
	}
	b := t.data[0]
	t.data = t.data[1:]
	return uint8(int(b) % n)
}

func decodeFitCase(data []byte) fitCase {
	t := &fitTape{data}
	var c fitCase
	for range 1 + int(t.next(fitMaxNodes)) {
		c.nodes = append(c.nodes, fitCaseNode{t.next(len(fitNodeCPU)), t.next(len(fitNodeMemory)),
			t.next(len(fitNodePods)), t.next(len(fitPools)), t.next(len(fitTaints))})
	}
	for range t.next(fitMaxPods + 1) {
		c.pods = append(c.pods, fitCasePod{t.next(fitMaxNodes), t.next(len(fitCPU)), t.next(len(fitMemory)),
			t.next(len(fitClasses) - 1), t.next(len(fitPorts)), t.next(3), t.next(len(fitApps)), t.next(2), t.next(len(fitPhases))})
	}
	c.ds = fitCaseDS{t.next(len(fitCPU)), t.next(len(fitMemory)), t.next(len(fitClasses)), t.next(2),
		t.next(len(fitPorts)), t.next(len(fitPools) + 1), t.next(2), t.next(3)}
	c.hide, c.minValue = t.next(2), t.next(len(fitMinValues))
	return c
}

// encode is decodeFitCase's inverse, for the seeds.
func (c fitCase) encode() []byte {
	out := []byte{byte(len(c.nodes) - 1)}
	for _, n := range c.nodes {
		out = append(out, n.cpu, n.memory, n.pods, n.pool, n.taint)
	}
	out = append(out, byte(len(c.pods)))
	for _, p := range c.pods {
		out = append(out, p.node, p.cpu, p.memory, p.class, p.port, p.owner, p.app, p.anti, p.phase)
	}
	d := c.ds
	return append(out, d.cpu, d.memory, d.class, d.never, d.port, d.pool, d.tolerate, d.anti, c.hide, c.minValue)
}

func fitRequests(cpu, memory uint8) corev1.ResourceList {
	out := corev1.ResourceList{}
	if q := fitCPU[cpu]; q != "" {
		out[corev1.ResourceCPU] = resource.MustParse(q)
	}
	if q := fitMemory[memory]; q != "" {
		out[corev1.ResourceMemory] = resource.MustParse(q)
	}
	return out
}

// antiAffinity is a required anti-affinity against Pods labelled key=value
// on the same node.
func antiAffinity(key, value string) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
}

// build makes the case's objects anew: the DaemonSet agent in monitoring,
// and an Env with the nodes and what the scheduler weighs on them. Without
// own, the Pods the DaemonSet already runs are left out.
func (c fitCase) build(own bool) (*appsv1.DaemonSet, *policy.Env) {
	nodes := make([]*corev1.Node, len(c.nodes))
	b := fit.NewBuilder()
	for i, cn := range c.nodes {
		name := fmt.Sprintf("%s%d", fitNodePrefix, i)
		n := testobj.Node(name, testobj.NodeLabels("pool", fitPools[cn.pool]))
		if t := fitTaints[cn.taint]; t != nil {
			n.Spec.Taints = []corev1.Taint{*t}
		}
		if cpu := fitNodeCPU[cn.cpu]; cpu != "" {
			n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(fitNodeMemory[cn.memory]),
				corev1.ResourcePods:   resource.MustParse(fitNodePods[cn.pods])}
		}
		nodes[i] = n
		b.AddNode(n)
	}
	for name, value := range fitPriority {
		b.AddPriorityClass(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value})
	}
	for i, cp := range c.pods {
		if cp.owner == 1 && !own {
			continue
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%d", fitPodPrefix, i), Namespace: "apps",
				Labels: map[string]string{"app": fitApps[cp.app]}},
			Spec: corev1.PodSpec{
				NodeName: fmt.Sprintf("%s%d", fitNodePrefix, cp.node),
				Containers: []corev1.Container{{Name: "c", Image: "example/c:v1",
					Resources: corev1.ResourceRequirements{Requests: fitRequests(cp.cpu, cp.memory)}}},
			},
			Status: corev1.PodStatus{Phase: fitPhases[cp.phase]},
		}
		if class := fitClasses[cp.class]; class != "" {
			p.Spec.PriorityClassName, p.Spec.Priority = class, new(fitPriority[class])
		}
		if port := fitPorts[cp.port]; port != 0 {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port}}
		}
		if cp.anti == 1 {
			p.Spec.Affinity = antiAffinity("app.kubernetes.io/name", "agent")
		}
		switch cp.owner {
		case 1: // the DaemonSet's own old Pod
			p.Namespace, p.Labels = "monitoring", map[string]string{"app.kubernetes.io/name": "agent"}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "u1", Controller: new(true)}}
		case 2: // another DaemonSet's
			p.Namespace = "monitoring"
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "other-agent", UID: "u2", Controller: new(true)}}
		}
		if err := b.AddPod(p); err != nil {
			panic(fmt.Sprintf("a Pod the palettes make is refused: %v", err))
		}
	}

	d := c.ds
	ds := testobj.DS(testobj.WithAgent(func(ctr *corev1.Container) {
		ctr.Resources.Requests = fitRequests(d.cpu, d.memory)
		if port := fitPorts[d.port]; port != 0 {
			ctr.Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port}}
		}
	}))
	spec := &ds.Spec.Template.Spec
	spec.PriorityClassName = fitClasses[d.class]
	if d.never == 1 {
		spec.PreemptionPolicy = new(corev1.PreemptNever)
	}
	if d.pool > 0 {
		spec.NodeSelector = map[string]string{"pool": fitPools[d.pool-1]}
	}
	if d.tolerate == 1 {
		spec.Tolerations = nil
	}
	switch d.anti {
	case 1:
		spec.Affinity = antiAffinity("app", "web")
	case 2:
		spec.Affinity = antiAffinity("app.kubernetes.io/name", "agent")
	}
	env := nodeEnv(coverage.NewNodeSnapshot(nodes))
	env.Fit, env.HideNodeNames = b.Build(), c.hide == 1
	return ds, env
}

// findings are the fit rules' findings as their checks give them
// (resource-fit's, priority-class's) and as Evaluate gives both under pol.
func (c fitCase) findings(own bool, pol *policy.Policy) (fits, classes, evaluated []policy.Finding) {
	ds, env := c.build(own)
	fits = checkResourceFit(ds, env, nil)
	classes = checkPriorityClass(ds, env, &PriorityClassParams{MinValue: fitMinValues[c.minValue]})
	ds, env = c.build(own)
	env.Policy = pol
	for _, f := range policy.Evaluate(ds, *env) {
		if f.RuleID == resourceFitID || f.RuleID == priorityClassID {
			evaluated = append(evaluated, f)
		}
	}
	return fits, classes, evaluated
}

var (
	fitNodeName = regexp.MustCompile(fitNodePrefix + `[0-9]+`)
	fitPodName  = regexp.MustCompile(fitPodPrefix + `[0-9]+`)
)

// FuzzFitRules judges arbitrary clusters and DaemonSets with the fit rules
// (resource-fit and priority-class). Whatever the case: no panic; the same
// findings again from the same objects built anew; Evaluate gives the
// checks' findings; a finding names only nodes the Pod does not land on, and
// none (nor any Pod) when names are hidden; resource-fit speaks exactly when
// some covered node turns the Pod away, denies when it lands nowhere, and
// its details name each such node once; priority-class speaks exactly when
// the Pods' priority is below the floor; and the DaemonSet's own old Pods,
// which an update replaces, change nothing.
func FuzzFitRules(f *testing.F) {
	policies := make([]*policy.Policy, len(fitMinValues))
	for i, v := range fitMinValues {
		doc := configHeader
		if v != nil {
			doc += fmt.Sprintf("rules:\n  priority-class:\n    parameters:\n      minValue: %d\n", *v)
		}
		cfg, err := Builtin().ParseConfig([]byte(doc))
		if err != nil {
			f.Fatal(err)
		}
		if policies[i], err = policy.Compile(cfg); err != nil {
			f.Fatal(err)
		}
	}
	workers := func(n int, cpu, memory uint8) []fitCaseNode {
		out := make([]fitCaseNode, n)
		for i := range out {
			out[i] = fitCaseNode{cpu: cpu, memory: memory}
		}
		return out
	}
	for _, c := range []fitCase{
		// TestResourceFit's cluster: two workers nearly full, one with
		// room, one holding the agent's old Pod beside another.
		{nodes: workers(4, 2, 1), pods: []fitCasePod{
			{node: 0, cpu: 4, memory: 3}, {node: 1, cpu: 4, memory: 3}, {node: 2, cpu: 2, memory: 2},
			{node: 3, cpu: 3, memory: 2, owner: 1, app: 2}, {node: 3, cpu: 3, memory: 2},
		}, ds: fitCaseDS{cpu: 3, memory: 3}},
		// Node names hidden, and an agent too big for any node.
		{nodes: workers(4, 2, 1), pods: []fitCasePod{{node: 0, cpu: 4, memory: 3}}, ds: fitCaseDS{cpu: 5, memory: 1}, hide: 1},
		// node-exporter's host port, held on two nodes by another agent.
		{nodes: workers(3, 3, 2), pods: []fitCasePod{{node: 0, port: 1, owner: 2}, {node: 1, port: 1, owner: 2}},
			ds: fitCaseDS{cpu: 1, memory: 1, port: 1}},
		// A full node whose workload a high-priority agent preempts, and one
		// whose workload outranks it; preemptionPolicy Never.
		{nodes: workers(2, 2, 1), pods: []fitCasePod{{node: 0, cpu: 5, memory: 3, class: 1}, {node: 1, cpu: 5, memory: 3, class: 2}},
			ds: fitCaseDS{cpu: 3, memory: 2, class: 2}},
		{nodes: workers(2, 2, 1), pods: []fitCasePod{{node: 0, cpu: 5, memory: 3, class: 1}},
			ds: fitCaseDS{cpu: 3, memory: 2, class: 2, never: 1}},
		// A PriorityClass the cluster lacks; a floor from the policy.
		{nodes: workers(2, 3, 2), ds: fitCaseDS{class: 4}},
		{nodes: workers(2, 3, 2), pods: []fitCasePod{{node: 0, class: 2}}, ds: fitCaseDS{class: 1}, minValue: 3},
		// Pools, taints, a node not reporting allocatable, the pods limit,
		// a finished Pod.
		{nodes: []fitCaseNode{{cpu: 2, memory: 1}, {cpu: 0}, {cpu: 3, memory: 2, pool: 1, taint: 1},
			{cpu: 4, memory: 3, taint: 2}, {cpu: 2, memory: 1, pods: 3}, {cpu: 1, memory: 0, pods: 2, taint: 3}},
			pods: []fitCasePod{{node: 4, cpu: 1}, {node: 5, cpu: 2, memory: 1}, {node: 2, cpu: 5, memory: 4, phase: 3}},
			ds:   fitCaseDS{cpu: 2, memory: 1, pool: 1, tolerate: 1}},
		// Anti-affinity both ways.
		{nodes: workers(3, 3, 2), pods: []fitCasePod{{node: 0, app: 0}, {node: 1, anti: 1}, {node: 2, app: 2, owner: 1}},
			ds: fitCaseDS{cpu: 1, memory: 1, anti: 1}},
		{nodes: workers(8, 1, 0), pods: []fitCasePod{{node: 7, cpu: 1}}, ds: fitCaseDS{cpu: 2, memory: 2, anti: 2}},
	} {
		f.Add(c.encode())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := decodeFitCase(data)
		pol := policies[c.minValue]
		fits, classes, evaluated := c.findings(true, pol)
		checks := append(slices.Clone(fits), classes...)
		if f2, c2, _ := c.findings(true, pol); !reflect.DeepEqual(checks, append(f2, c2...)) {
			t.Fatalf("the same case judged twice:\n%s\nthen\n%s", describeFindings(checks), describeFindings(append(f2, c2...)))
		}
		if len(evaluated) != len(checks) {
			t.Fatalf("Evaluate gives\n%s\nthe checks\n%s", describeFindings(evaluated), describeFindings(checks))
		}
		// Evaluate orders findings strongest first.
		for _, e := range evaluated {
			if !slices.ContainsFunc(checks, func(c policy.Finding) bool {
				return c.Message == e.Message && c.FieldString() == e.FieldString()
			}) {
				t.Fatalf("Evaluate gives %s: %s, which no check gives:\n%s", e.FieldString(), e.Message, describeFindings(checks))
			}
		}
		if f2, c2, _ := c.findings(false, pol); !reflect.DeepEqual(checks, append(f2, c2...)) {
			t.Fatalf("the DaemonSet's own old Pods changed the findings:\n%s\nwithout them\n%s",
				describeFindings(checks), describeFindings(append(f2, c2...)))
		}
		for _, f := range checks {
			if strings.Contains(f.Message, "\n") {
				t.Fatalf("a message on two lines: %q", f.Message)
			}
		}
		ds, env := c.build(true)
		r := env.FitReport(ds)
		checkFitNames(t, env, r, checks)
		checkResourceFitFinding(t, r, fits)
		checkPriorityClassFinding(t, env, r, fitMinValues[c.minValue], classes)
	})
}

// checkFitNames: every node a finding names is covered and turns the Pod
// away; with names hidden, no node or Pod is named.
func checkFitNames(t *testing.T, env *policy.Env, r *fit.Report, fs []policy.Finding) {
	t.Helper()
	away := map[string]bool{}
	if r != nil {
		for name, o := range r.All() {
			away[name] = o.Kind == fit.DoesNotFit || o.Kind == fit.NeverFits
		}
	}
	for _, f := range fs {
		text := f.Message + "\n" + strings.Join(f.Details, "\n")
		if env.HideNodeNames {
			if names := append(fitNodeName.FindAllString(text, -1), fitPodName.FindAllString(text, -1)...); len(names) > 0 {
				t.Fatalf("node names hidden, yet %v named: %q", names, text)
			}
			continue
		}
		for _, name := range fitNodeName.FindAllString(text, -1) {
			if !away[name] {
				t.Fatalf("%s names node %s, which is no covered node the Pod misses: %q", f.FieldString(), name, text)
			}
		}
	}
}

// checkResourceFitFinding: a finding exactly when some covered node turns
// the Pod away (or no Pod can be made), the rule's own action (deny) when it
// lands nowhere, a warning counting the nodes otherwise, and details, when
// given, that name each node turning it away once.
func checkResourceFitFinding(t *testing.T, r *fit.Report, fs []policy.Finding) {
	t.Helper()
	switch {
	case r == nil:
		if len(fs) > 0 {
			t.Fatalf("no fit report, yet\n%s", describeFindings(fs))
		}
		return
	case r.Error != "":
		if len(fs) != 1 || fs[0].FieldString() != "spec.template.spec.priorityClassName" || fs[0].Message != "no Pod of it can be created: "+r.Error {
			t.Fatalf("no Pod can be made (%s), yet\n%s", r.Error, describeFindings(fs))
		}
		return
	}
	covered, lands := r.Covered(), r.Lands()
	if covered == 0 || lands == covered {
		if len(fs) > 0 {
			t.Fatalf("lands on %d of %d nodes, yet\n%s", lands, covered, describeFindings(fs))
		}
		return
	}
	if len(fs) != 1 || fs[0].FieldString() != "spec.template.spec" {
		t.Fatalf("lands on %d of %d nodes, want one finding at spec.template.spec, got\n%s", lands, covered, describeFindings(fs))
	}
	got := fs[0]
	want, action := fmt.Sprintf("stays Pending on %s it covers: ", ofNodes(covered-lands, covered)), policy.ActionWarn
	switch {
	case lands == 0 && covered == 1:
		want, action = "cannot land on the one node it covers: ", ""
	case lands == 0:
		want, action = fmt.Sprintf("lands on none of the %d nodes it covers: ", covered), ""
	}
	if !strings.HasPrefix(got.Message, want) || got.Action != action {
		t.Fatalf("lands on %d of %d nodes: want %q (action %q), got %q (action %q)", lands, covered, want, action, got.Message, got.Action)
	}
	if len(got.Details) == 0 {
		return
	}
	var named []string
	for _, d := range got.Details {
		named = append(named, fitNodeName.FindAllString(d, -1)...)
	}
	slices.Sort(named)
	var away []string
	for name, o := range r.All() {
		if o.Kind == fit.DoesNotFit || o.Kind == fit.NeverFits {
			away = append(away, name)
		}
	}
	if !slices.Equal(named, away) {
		t.Fatalf("the details name %v, the Pod is turned away from %v", named, away)
	}
}

// checkPriorityClassFinding: a finding exactly when the Pods' priority is
// below the floor (the policy's minValue, or one above the most important
// Pod no DaemonSet controls), which it names.
func checkPriorityClassFinding(t *testing.T, env *policy.Env, r *fit.Report, minValue *int, fs []policy.Finding) {
	t.Helper()
	if r == nil || r.Error != "" {
		if len(fs) > 0 {
			t.Fatalf("no Pod priority known, yet\n%s", describeFindings(fs))
		}
		return
	}
	floor, known := int32(0), true
	if minValue != nil {
		floor = int32(*minValue)
	} else {
		var value int32
		value, _, known = env.Fit.WorkloadPriority()
		floor = value + 1
	}
	if !known || r.Priority >= floor {
		if len(fs) > 0 {
			t.Fatalf("priority %d, floor %d (known %v), yet\n%s", r.Priority, floor, known, describeFindings(fs))
		}
		return
	}
	if len(fs) != 1 || fs[0].FieldString() != "spec.template.spec.priorityClassName" ||
		!strings.Contains(fs[0].Message, fmt.Sprintf("it needs %d or more", floor)) {
		t.Fatalf("priority %d below the floor %d, want one finding at priorityClassName naming the floor, got\n%s",
			r.Priority, floor, describeFindings(fs))
	}
}
