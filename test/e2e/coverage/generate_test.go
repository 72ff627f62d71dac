package coverage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Labels every generated object carries, so that scenarios share one cluster.
const (
	// scenarioLabel is on every node of a scenario and in its DaemonSet's
	// nodeSelector: the other scenarios' nodes are selector-skipped.
	scenarioLabel = "dsguard.io/scenario"
	// batchLabel groups the DaemonSets (and so their Pods) of one batch.
	batchLabel = "dsguard.io/batch"
	// appLabel names the DaemonSet in its selector and Pod template.
	appLabel = "app"
)

// Label keys the generator draws from, with the values nodes may carry.
const (
	keyOS       = corev1.LabelOSStable
	keyArch     = corev1.LabelArchStable
	keyBetaOS   = "beta.kubernetes.io/os"
	keyBetaArch = "beta.kubernetes.io/arch"
	keyZone     = corev1.LabelTopologyZone
	keyHostname = corev1.LabelHostname
	keyPool     = "dsguard.io/pool"
	keyGPU      = "dsguard.io/gpu"
	keyCores    = "dsguard.io/cores"
	keyCP       = "node-role.kubernetes.io/control-plane"
	keyAbsent   = "dsguard.io/absent" // no node ever carries it
)

// labelValues are each key's value domain (hostnames come from the nodes).
var labelValues = map[string][]string{
	keyOS:       {"linux", "windows"},
	keyArch:     {"amd64", "arm64"},
	keyBetaOS:   {"linux", "windows"},
	keyBetaArch: {"amd64", "arm64"},
	keyZone:     {"zone-a", "zone-b", "zone-c"},
	keyPool:     {"system", "general", "gpu", "infra"},
	keyGPU:      {"true", "false"},
	keyCores:    {"007", "0", "1", "2", "4", "8", "16", "32", "many"},
	keyCP:       {""},
	keyAbsent:   {"x"},
}

// selectorKeys are the keys a DaemonSet's nodeSelector or affinity may use.
var selectorKeys = []string{keyOS, keyArch, keyBetaOS, keyBetaArch, keyZone, keyPool, keyGPU, keyCores, keyCP, keyAbsent, keyHostname}

// taintKind is a taint the generator may put on a node.
type taintKind struct {
	key     string
	values  []string // "" is "no value"
	effects []corev1.TaintEffect
}

var (
	noSchedule       = corev1.TaintEffectNoSchedule
	noExecute        = corev1.TaintEffectNoExecute
	preferNoSchedule = corev1.TaintEffectPreferNoSchedule
	allEffects       = []corev1.TaintEffect{noSchedule, noExecute, preferNoSchedule}
)

// taintKinds covers the control-plane taint, every taint the DaemonSet
// controller tolerates on its own (and the same keys with the other
// effects), the transient ones, and custom taints, with and without values.
var taintKinds = []taintKind{
	{keyCP, []string{"", "", "true"}, []corev1.TaintEffect{noSchedule, noSchedule, noExecute, preferNoSchedule}},
	{"node-role.kubernetes.io/master", []string{""}, []corev1.TaintEffect{noSchedule}},
	{corev1.TaintNodeNotReady, []string{"", "true"}, allEffects},
	{corev1.TaintNodeUnreachable, []string{"", "true"}, allEffects},
	{corev1.TaintNodeDiskPressure, []string{"", "true"}, allEffects},
	{corev1.TaintNodeMemoryPressure, []string{""}, allEffects},
	{corev1.TaintNodePIDPressure, []string{""}, allEffects},
	{corev1.TaintNodeUnschedulable, []string{"", "true"}, allEffects},
	{corev1.TaintNodeNetworkUnavailable, []string{"", "true"}, allEffects},
	// The ones the controller tolerates by itself, once more with their own
	// effect, so that the added tolerations are exercised often.
	{corev1.TaintNodeNotReady, []string{""}, []corev1.TaintEffect{noExecute}},
	{corev1.TaintNodeUnreachable, []string{""}, []corev1.TaintEffect{noExecute}},
	{corev1.TaintNodeNetworkUnavailable, []string{""}, []corev1.TaintEffect{noSchedule}},
	{corev1.TaintNodeNetworkUnavailable, []string{""}, []corev1.TaintEffect{noSchedule}},
	{corev1.TaintNodeUnschedulable, []string{""}, []corev1.TaintEffect{noSchedule}},
	{corev1.TaintNodeDiskPressure, []string{""}, []corev1.TaintEffect{noSchedule}},
	{"node.cloudprovider.kubernetes.io/uninitialized", []string{"true"}, []corev1.TaintEffect{noSchedule}},
	{"ToBeDeletedByClusterAutoscaler", []string{"1767225600"}, []corev1.TaintEffect{noSchedule}},
	{"dedicated", []string{"gpu", "infra", "monitoring", ""}, allEffects},
	{keyGPU, []string{"true", ""}, []corev1.TaintEffect{noSchedule, preferNoSchedule}},
	{"example.com/maintenance", []string{"", "planned"}, []corev1.TaintEffect{noExecute, noSchedule}},
}

// scenario is one node set and one DaemonSet selecting only it.
type scenario struct {
	id    int
	nodes []*corev1.Node // as generated; the API server adds to them
	ds    *appsv1.DaemonSet
}

func scenarioName(id int) string { return fmt.Sprintf("s%04d", id) }

// generate builds scenario id from its own stream of the seed, so that a
// scenario comes out the same whatever the number of scenarios in the run.
func generate(seed uint64, id, batch int, namespace string) *scenario {
	g := &gen{r: rand.New(rand.NewPCG(seed, uint64(id))), id: id}
	s := &scenario{id: id}
	s.nodes = g.nodes()
	s.ds = g.daemonSet(s.nodes, batch, namespace)
	return s
}

type gen struct {
	r  *rand.Rand
	id int
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g *gen, xs []T) T { return xs[g.r.IntN(len(xs))] }

// pool is what the nodes of one node pool share.
type pool struct {
	labels        map[string]string
	taints        []corev1.Taint
	unschedulable bool
}

func (g *gen) pool() pool {
	p := pool{labels: map[string]string{}}
	controlPlane := g.chance(0.2)
	switch x := g.r.Float64(); {
	case x < 0.75:
		p.labels[keyOS] = "linux"
	case x < 0.95:
		p.labels[keyOS] = "windows"
	} // else: no OS label at all
	switch x := g.r.Float64(); {
	case x < 0.6:
		p.labels[keyArch] = "amd64"
	case x < 0.95:
		p.labels[keyArch] = "arm64"
	}
	if g.chance(0.3) { // legacy beta labels, not always agreeing
		if os, ok := p.labels[keyOS]; ok {
			p.labels[keyBetaOS] = os
		}
		if g.chance(0.7) {
			if arch, ok := p.labels[keyArch]; ok {
				p.labels[keyBetaArch] = arch
			}
		} else {
			p.labels[keyBetaArch] = pick(g, labelValues[keyBetaArch])
		}
	}
	if g.chance(0.8) {
		p.labels[keyZone] = pick(g, labelValues[keyZone])
	}
	if controlPlane {
		p.labels[keyCP] = ""
		p.labels[keyPool] = "system"
	} else if g.chance(0.8) {
		p.labels[keyPool] = pick(g, labelValues[keyPool])
	}
	if g.chance(0.5) {
		p.labels[keyGPU] = pick(g, labelValues[keyGPU])
	}
	if g.chance(0.7) {
		p.labels[keyCores] = pick(g, labelValues[keyCores])
	}

	if controlPlane && g.chance(0.85) {
		t := corev1.Taint{Key: keyCP, Effect: noSchedule}
		if g.chance(0.15) {
			t.Value = "true"
		}
		if g.chance(0.1) {
			t.Effect = noExecute
		}
		p.taints = append(p.taints, t)
	}
	n := 0
	switch x := g.r.Float64(); {
	case x < 0.45:
	case x < 0.75:
		n = 1
	case x < 0.9:
		n = 2
	default:
		n = 3
	}
	for range n {
		p.taints = g.addTaint(p.taints)
	}
	p.unschedulable = g.chance(0.15)
	return p
}

// addTaint adds a random taint whose key and effect are not taken yet (the
// API server requires them unique).
func (g *gen) addTaint(taints []corev1.Taint) []corev1.Taint {
	for range 10 {
		k := pick(g, taintKinds)
		t := corev1.Taint{Key: k.key, Value: pick(g, k.values), Effect: pick(g, k.effects)}
		if !slices.ContainsFunc(taints, func(o corev1.Taint) bool { return o.Key == t.Key && o.Effect == t.Effect }) {
			// Insert at a random place: the first untolerated taint is
			// what a Skip reports, so order matters to the model.
			i := g.r.IntN(len(taints) + 1)
			return slices.Insert(slices.Clone(taints), i, t)
		}
	}
	return taints
}

func (g *gen) nodes() []*corev1.Node {
	pools := make([]pool, 1+g.r.IntN(3))
	for i := range pools {
		pools[i] = g.pool()
	}
	n := 3 + g.r.IntN(6)
	nodes := make([]*corev1.Node, n)
	for i := range nodes {
		p := pools[g.r.IntN(len(pools))]
		name := fmt.Sprintf("%s-n%d", scenarioName(g.id), i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{scenarioLabel: strconv.Itoa(g.id)}},
			Spec:       corev1.NodeSpec{Unschedulable: p.unschedulable, Taints: slices.Clone(p.taints)},
		}
		for k, v := range p.labels {
			node.Labels[k] = v
		}
		switch x := g.r.Float64(); {
		case x < 0.8:
			node.Labels[keyHostname] = name
		case x < 0.9:
			node.Labels[keyHostname] = fmt.Sprintf("host-%d", g.r.IntN(n))
		} // else: no hostname label
		// Now and then a node strays from its pool.
		if g.chance(0.15) {
			node.Spec.Taints = g.addTaint(node.Spec.Taints)
		}
		if g.chance(0.1) && len(node.Spec.Taints) > 0 {
			i := g.r.IntN(len(node.Spec.Taints))
			node.Spec.Taints = slices.Delete(node.Spec.Taints, i, i+1)
		}
		if g.chance(0.1) {
			k := pick(g, []string{keyZone, keyGPU, keyCores, keyPool, keyArch})
			node.Labels[k] = pick(g, labelValues[k])
		}
		if g.chance(0.05) {
			node.Spec.Unschedulable = !node.Spec.Unschedulable
		}
		if len(node.Spec.Taints) == 0 {
			node.Spec.Taints = nil
		}
		nodes[i] = node
	}
	return nodes
}

// values returns the values a selector on key may name: the nodes' values
// mostly, sometimes one no node has.
func (g *gen) values(key string, nodes []*corev1.Node, n int) []string {
	var domain []string
	for _, node := range nodes {
		if v, ok := node.Labels[key]; ok && !slices.Contains(domain, v) {
			domain = append(domain, v)
		}
	}
	if key == keyHostname {
		domain = append(domain, "host-0", "nobody")
	} else {
		for _, v := range labelValues[key] {
			if !slices.Contains(domain, v) && g.chance(0.15) {
				domain = append(domain, v)
			}
		}
	}
	if len(domain) == 0 {
		domain = []string{"none"}
	}
	var out []string
	for range n {
		v := pick(g, domain)
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func (g *gen) requirement(nodes []*corev1.Node) corev1.NodeSelectorRequirement {
	key := g.selectorKey(nodes)
	ops := []corev1.NodeSelectorOperator{
		corev1.NodeSelectorOpIn, corev1.NodeSelectorOpIn, corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn,
		corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist,
		corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt,
	}
	op := pick(g, ops)
	if (op == corev1.NodeSelectorOpGt || op == corev1.NodeSelectorOpLt) && g.chance(0.7) {
		key = keyCores // mostly on the numeric label; elsewhere they match nothing
	}
	req := corev1.NodeSelectorRequirement{Key: key, Operator: op}
	switch op {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		req.Values = g.values(key, nodes, 1+g.r.IntN(3))
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		req.Values = []string{strconv.Itoa(pick(g, []int{0, 1, 3, 4, 7, 8, 20}))}
	}
	return req
}

// anchoredRequirement builds a requirement the anchor node meets, so that
// terms select some nodes, not mostly none.
func (g *gen) anchoredRequirement(anchor *corev1.Node, nodes []*corev1.Node) corev1.NodeSelectorRequirement {
	key := g.selectorKey(nodes)
	v, has := anchor.Labels[key]
	if !has {
		if g.chance(0.5) {
			return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpDoesNotExist}
		}
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpNotIn, Values: g.values(key, nodes, 1+g.r.IntN(2))}
	}
	if n, err := strconv.Atoi(v); err == nil && g.chance(0.5) {
		if n > 0 && g.chance(0.5) {
			return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpGt, Values: []string{strconv.Itoa(g.r.IntN(n))}}
		}
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpLt, Values: []string{strconv.Itoa(n + 1 + g.r.IntN(8))}}
	}
	switch x := g.r.Float64(); {
	case x < 0.55:
		values := g.values(key, nodes, g.r.IntN(3))
		if !slices.Contains(values, v) {
			values = append(values, v)
		}
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
	case x < 0.75:
		values := slices.DeleteFunc(g.values(key, nodes, 1+g.r.IntN(2)), func(o string) bool { return o == v })
		if len(values) == 0 {
			values = []string{"none"}
		}
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpNotIn, Values: values}
	default:
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpExists}
	}
}

// selectorKey picks a label key, mostly one some node of the scenario has.
func (g *gen) selectorKey(nodes []*corev1.Node) string {
	if g.chance(0.3) {
		return pick(g, selectorKeys)
	}
	var keys []string
	for _, n := range nodes {
		for k := range n.Labels {
			if k != scenarioLabel && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return pick(g, selectorKeys)
	}
	slices.Sort(keys) // map order is random; the stream must not be
	return pick(g, keys)
}

// fieldRequirement selects by node name: mostly the anchor In, another
// node NotIn.
func (g *gen) fieldRequirement(anchor *corev1.Node, nodes []*corev1.Node) corev1.NodeSelectorRequirement {
	op := corev1.NodeSelectorOpIn
	if g.chance(0.4) {
		op = corev1.NodeSelectorOpNotIn
	}
	name := "no-such-node"
	switch {
	case g.chance(0.1):
	case op == corev1.NodeSelectorOpIn && g.chance(0.8):
		name = anchor.Name
	default:
		name = pick(g, nodes).Name
	}
	return corev1.NodeSelectorRequirement{Key: metav1.ObjectNameField, Operator: op, Values: []string{name}}
}

func (g *gen) affinity(nodes []*corev1.Node) *corev1.Affinity {
	if !g.chance(0.5) {
		return nil
	}
	na := &corev1.NodeAffinity{}
	if g.chance(0.15) { // preferred terms never change placement
		na.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{{
			Weight:     10,
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{g.requirement(nodes)}},
		}}
	}
	if g.chance(0.9) {
		terms := make([]corev1.NodeSelectorTerm, 1+g.r.IntN(3))
		for i := range terms {
			if g.chance(0.04) {
				continue // an empty term matches no node
			}
			anchor := pick(g, nodes)
			requirement := func() corev1.NodeSelectorRequirement {
				if g.chance(0.7) {
					return g.anchoredRequirement(anchor, nodes)
				}
				return g.requirement(nodes)
			}
			n := 1 + g.r.IntN(2)
			if g.chance(0.15) {
				n = 0
			}
			for range n {
				terms[i].MatchExpressions = append(terms[i].MatchExpressions, requirement())
			}
			if g.chance(0.3) || len(terms[i].MatchExpressions) == 0 && g.chance(0.5) {
				terms[i].MatchFields = append(terms[i].MatchFields, g.fieldRequirement(anchor, nodes))
			}
			if len(terms[i].MatchExpressions) == 0 && len(terms[i].MatchFields) == 0 && g.chance(0.7) {
				terms[i].MatchExpressions = append(terms[i].MatchExpressions, requirement())
			}
		}
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: terms}
	}
	return &corev1.Affinity{NodeAffinity: na}
}

// toleration builds one toleration, usually aimed at a taint some node of
// the scenario carries.
func (g *gen) toleration(nodes []*corev1.Node) corev1.Toleration {
	var taint corev1.Taint
	var onNodes []corev1.Taint
	for _, n := range nodes {
		onNodes = append(onNodes, n.Spec.Taints...)
	}
	if len(onNodes) > 0 && g.chance(0.85) {
		taint = pick(g, onNodes)
	} else {
		k := pick(g, taintKinds)
		taint = corev1.Taint{Key: k.key, Value: pick(g, k.values), Effect: pick(g, k.effects)}
	}
	effect := taint.Effect
	switch x := g.r.Float64(); {
	case x < 0.25:
		effect = "" // every effect
	case x < 0.4:
		effect = pick(g, allEffects)
	}
	var t corev1.Toleration
	switch x := g.r.Float64(); {
	case x < 0.06: // everything
		t = corev1.Toleration{Operator: corev1.TolerationOpExists}
		if g.chance(0.4) {
			t.Effect = effect
		}
	case x < 0.5:
		t = corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpExists, Effect: effect}
	case x < 0.75:
		t = corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: effect}
		if g.chance(0.2) {
			t.Value = "other"
		}
	case x < 0.85:
		t = corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpEqual, Effect: effect} // no value
	default:
		t = corev1.Toleration{Key: taint.Key, Value: taint.Value, Effect: effect} // operator defaults to Equal
	}
	if t.Effect == noExecute && g.chance(0.4) {
		t.TolerationSeconds = ptr.To(int64(pick(g, []int{0, 30, 300})))
	}
	return t
}

func (g *gen) daemonSet(nodes []*corev1.Node, batch int, namespace string) *appsv1.DaemonSet {
	name := "ds-" + scenarioName(g.id)
	spec := corev1.PodSpec{
		NodeSelector: map[string]string{scenarioLabel: strconv.Itoa(g.id)},
		Containers:   []corev1.Container{{Name: "agent", Image: "registry.example/dsguard/agent:1.0"}},
	}
	anchor := pick(g, nodes)
	for range max(0, g.r.IntN(4)-1) {
		key := g.selectorKey(nodes)
		if key == keyAbsent && g.chance(0.7) {
			continue
		}
		if v, ok := anchor.Labels[key]; ok && g.chance(0.8) {
			spec.NodeSelector[key] = v
		} else {
			spec.NodeSelector[key] = g.values(key, nodes, 1)[0]
		}
	}
	spec.Affinity = g.affinity(nodes)
	n := 0
	switch x := g.r.Float64(); {
	case x < 0.25:
	case x < 0.55:
		n = 1
	case x < 0.8:
		n = 2
	default:
		n = 3 + g.r.IntN(3)
	}
	for range n {
		spec.Tolerations = append(spec.Tolerations, g.toleration(nodes))
	}
	spec.HostNetwork = g.chance(0.4)
	if g.chance(0.06) {
		if g.chance(0.75) {
			spec.NodeName = pick(g, nodes).Name
		} else {
			spec.NodeName = "no-such-node"
		}
	}
	labels := map[string]string{appLabel: name, batchLabel: strconv.Itoa(batch)}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{batchLabel: strconv.Itoa(batch)}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{appLabel: name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}
