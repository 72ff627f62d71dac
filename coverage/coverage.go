package coverage

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// SkipKind says why the DaemonSet controller leaves a node out.
type SkipKind string

// The reasons a node does not count toward desiredNumberScheduled, in the
// order the controller checks them.
const (
	// SkipNodeName: the template's nodeName names another node.
	SkipNodeName SkipKind = "nodeName"
	// SkipOSArch: the nodeSelector or required node affinity excludes the
	// node by OS or architecture alone (a Linux agent on a Windows node):
	// normal, counted as intended.
	SkipOSArch SkipKind = "os-arch"
	// SkipSelector: the nodeSelector or required node affinity excludes it.
	SkipSelector SkipKind = "selector"
	// SkipTaint: a NoSchedule or NoExecute taint is not tolerated.
	SkipTaint SkipKind = "taint"
)

// Skip is a group of nodes skipped for the same reason.
type Skip struct {
	Kind SkipKind
	// Taint is the first untolerated taint, for SkipTaint.
	Taint corev1.Taint
	// Transient marks a lifecycle taint (see Lifecycle), which a node carries
	// while it joins, bootstraps, fails, is disrupted or shuts down: it
	// counts in predictions but never raises a finding.
	Transient bool
	// Lifecycle says why nodes carry that taint, for a lifecycle taint.
	Lifecycle string
	// Count is the number of nodes skipped.
	Count int
	// runs name the skipped nodes as runs of class members, merged into
	// sorted names only when a caller asks (Nodes, FirstNodes): a
	// prediction that skips most of a 65,000-node fleet costs its classes,
	// not 65,000 names. names holds them outright instead (WithNodes).
	runs  []nameRun
	names []string
}

// WithNodes returns s naming exactly these nodes (sorted by the caller):
// for skips made by hand rather than by Predict.
func (s Skip) WithNodes(names ...string) Skip {
	s.runs, s.names, s.Count = nil, names, len(names)
	return s
}

// Nodes returns the skipped nodes' names, sorted. Each call builds the
// whole list: a caller that shows only some names asks FirstNodes.
func (s Skip) Nodes() []string { return s.FirstNodes(s.Count) }

// FirstNodes returns the first n of the skipped nodes' names in order (all
// of them when there are fewer), at the cost of those n.
func (s Skip) FirstNodes(n int) []string {
	n = max(min(n, s.Count), 0)
	if s.runs == nil {
		return slices.Clone(s.names[:min(n, len(s.names))])
	}
	return mergeRuns(s.runs, n)
}

// Reason describes the skip in words.
func (s Skip) Reason() string {
	switch s.Kind {
	case SkipNodeName:
		return "spec.template.spec.nodeName names another node"
	case SkipOSArch:
		return "operating system or architecture not selected"
	case SkipSelector:
		return "nodeSelector or node affinity does not match"
	default:
		return "taint " + taintString(&s.Taint) + " not tolerated"
	}
}

// taintString is corev1.Taint's ToString (key=value:effect, key:effect
// without a value, key alone without either) in one allocation instead of
// fmt's three: every warning about a taint says it.
func taintString(t *corev1.Taint) string {
	switch {
	case t.Value == "" && t.Effect == "":
		return t.Key
	case t.Value == "":
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// Describe is the reason followed by the nodes, at most limit of them named.
func (s Skip) Describe(limit int) string {
	names := s.FirstNodes(limit)
	more := ""
	if s.Count > len(names) {
		more = fmt.Sprintf(" and %d more", s.Count-len(names))
	}
	return fmt.Sprintf("%s (%s%s)", s.Reason(), strings.Join(names, ", "), more)
}

// Coverage is the predicted placement of a DaemonSet on a node set.
type Coverage struct {
	// Total is the number of nodes in the snapshot.
	Total int
	// Eligible is what the DaemonSet controller will report as
	// desiredNumberScheduled.
	Eligible int
	// Skips groups every node left out, largest group first.
	Skips []Skip
}

// Skipped returns the number of nodes skipped for the given kinds (all when none given).
func (c *Coverage) Skipped(kinds ...SkipKind) int {
	n := 0
	for _, s := range c.Skips {
		if len(kinds) == 0 || slices.Contains(kinds, s.Kind) {
			n += s.Count
		}
	}
	return n
}

// Gaps returns the skips that count as coverage gaps: nodes left out by an
// untolerated taint that is not a lifecycle taint. The rules, the audit and
// the auditor's Events all mean these when they speak of a gap.
func (c *Coverage) Gaps() []Skip {
	var out []Skip
	for _, s := range c.Skips {
		if s.Kind == SkipTaint && !s.Transient {
			out = append(out, s)
		}
	}
	return out
}

// GapNodes returns how many nodes Gaps covers.
func (c *Coverage) GapNodes() int { return NodesIn(c.Gaps()) }

// NodesIn counts the nodes of skips.
func NodesIn(skips []Skip) int {
	n := 0
	for _, s := range skips {
		n += s.Count
	}
	return n
}

// Predict reproduces the DaemonSet controller's placement decision
// (nodeShouldRunDaemonPod in pkg/controller/daemon): a node counts when the
// template's nodeName is empty or names it, the required node affinity
// (nodeSelector included) matches, and no NoSchedule or NoExecute taint is
// left untolerated by the template's tolerations plus those the controller
// adds. spec.unschedulable (cordon) plays no part: daemon Pods tolerate it.
// A skip for a taint of the snapshot's lifecycle catalogue is marked so.
func Predict(ds *appsv1.DaemonSet, nodes *NodeSnapshot) Coverage {
	cov := Coverage{Total: nodes.Len()}
	spec := &ds.Spec.Template.Spec
	p := predictor{spec: spec, tolerations: daemonTolerations(spec), lifecycle: nodes.Lifecycle()}
	switch {
	case spec.NodeName != "" || nodes.looksAtNodeIdentity(spec):
		p.affinity = nodeaffinity.NewRequiredNodeAffinity(spec.NodeSelector, spec.Affinity)
		q := nodes.identityQuery(spec)
		for _, class := range nodes.classes {
			cov.Eligible += p.perNode(nodes, class, q)
		}
	case requiredNodeSelector(spec) == nil:
		cov.Eligible = p.bySelector(nodes)
	default:
		cov.Eligible = p.byClass(nodes)
	}
	cov.Skips = p.groups
	sort.Slice(cov.Skips, func(a, b int) bool {
		if cov.Skips[a].Count != cov.Skips[b].Count {
			return cov.Skips[a].Count > cov.Skips[b].Count
		}
		return cov.Skips[a].Reason() < cov.Skips[b].Reason()
	})
	return cov
}

// byClass judges each class on its own node (labels and taints) and
// returns how many nodes are eligible.
func (p *predictor) byClass(s *NodeSnapshot) int {
	p.affinity = nodeaffinity.NewRequiredNodeAffinity(p.spec.NodeSelector, p.spec.Affinity)
	eligible := 0
	for _, class := range s.classes {
		if kind, taint, ok := placeOn(&class.node, p.spec, p.affinity, &p.relaxed, p.tolerations); ok {
			eligible += len(class.members)
		} else {
			p.add(kind, taint, nameRun{members: class.members})
		}
	}
	return eligible
}

// bySelector decides as byClass does for a placement that selects by
// nodeSelector alone (no required node affinity, node name or per-node
// label), which is most DaemonSets: the snapshot's label index names the
// classes that carry every pair of the selector, and only the classes a
// DaemonSet may skip are visited. The decision is the same; what it saves is
// a label-map lookup per class and selector pair, each on a class's own
// memory, which at a few dozen classes was most of a prediction's time.
func (p *predictor) bySelector(s *NodeSnapshot) int {
	idx := s.labelIndex()
	selected := idx.selecting(p.spec.NodeSelector, false)
	// The classes an OS or architecture pair alone leaves out; none when
	// the selector has no such pair (nothing to relax).
	var relaxed []int32
	if selectsOSArch(p.spec) {
		relaxed = idx.selecting(p.spec.NodeSelector, true)
	}
	// untolerated[l] is the taint list l's decision, once decided[l]: the
	// taint that keeps daemon Pods off, or nil.
	var untolerated []*corev1.Taint
	var decided []bool
	eligible := 0
	// selected and relaxed are in class order: each is walked once.
	next, nextRelaxed := 0, 0
	for i, size := range idx.sizes {
		if next < len(selected) && int(selected[next]) == i {
			next++
			l := idx.taintList[i]
			if l < 0 {
				eligible += size
				continue
			}
			if decided == nil {
				untolerated, decided = make([]*corev1.Taint, len(idx.taintLists)), make([]bool, len(idx.taintLists))
			}
			if !decided[l] {
				untolerated[l], _ = untoleratedTaint(idx.taintLists[l], p.tolerations)
				decided[l] = true
			}
			if taint := untolerated[l]; taint != nil {
				p.add(SkipTaint, taint, nameRun{members: s.classes[i].members})
			} else {
				eligible += size
			}
			continue
		}
		kind := SkipSelector
		for nextRelaxed < len(relaxed) && int(relaxed[nextRelaxed]) < i {
			nextRelaxed++
		}
		if nextRelaxed < len(relaxed) && int(relaxed[nextRelaxed]) == i {
			kind = SkipOSArch
		}
		p.add(kind, nil, nameRun{members: s.classes[i].members})
	}
	return eligible
}

// requiredNodeSelector returns the template's required node affinity, nil
// when it has none (an empty one, which matches no node, is not nil).
func requiredNodeSelector(spec *corev1.PodSpec) *corev1.NodeSelector {
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil {
		return nil
	}
	return spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
}

// NodeDecision is the controller's decision for one DaemonSet on one node.
type NodeDecision struct {
	Eligible bool
	// Kind and Taint say why the node is skipped, when it is.
	Kind  SkipKind
	Taint corev1.Taint
}

// Decide decides ds on one node as Predict decides each node; a nil node
// (one that is not there) gets the zero NodeDecision. Comparing the decision
// for a node before and after a change tells whether the change can alter
// the DaemonSet's coverage.
func Decide(ds *appsv1.DaemonSet, node *corev1.Node) NodeDecision {
	if node == nil {
		return NodeDecision{}
	}
	spec := &ds.Spec.Template.Spec
	if spec.NodeName != "" && spec.NodeName != node.Name {
		return NodeDecision{Kind: SkipNodeName}
	}
	var relaxed *nodeaffinity.RequiredNodeAffinity
	kind, taint, ok := placeOn(node, spec, nodeaffinity.NewRequiredNodeAffinity(spec.NodeSelector, spec.Affinity), &relaxed,
		daemonTolerations(spec))
	if ok {
		return NodeDecision{Eligible: true}
	}
	p := NodeDecision{Kind: kind}
	if taint != nil {
		p.Taint = corev1.Taint{Key: taint.Key, Value: taint.Value, Effect: taint.Effect}
	}
	return p
}

// predictor gathers one prediction's skipped nodes by reason, as runs of
// class members that a Skip merges into sorted names when asked.
type predictor struct {
	spec        *corev1.PodSpec
	affinity    nodeaffinity.RequiredNodeAffinity
	relaxed     *nodeaffinity.RequiredNodeAffinity
	tolerations []corev1.Toleration
	lifecycle   *Lifecycle
	groups      []Skip
	// byReason finds a group once there are more than groupIndexFrom.
	byReason map[skipReason]int
}

// skipReason is what a group is found by: the kind, and the taint for a
// taint (zero for the others, which name none).
type skipReason struct {
	kind  SkipKind
	taint corev1.Taint
}

// groupIndexFrom is the number of groups past which group keeps an index.
// A prediction has a handful of reasons, where a linear search beats a map;
// a fleet whose classes carry taints of their own by the thousand would
// make it quadratic.
var groupIndexFrom = 16

// group returns the index of the group for this reason, adding it if new.
func (p *predictor) group(kind SkipKind, taint *corev1.Taint) int {
	reason := skipReason{kind: kind}
	if taint != nil {
		reason.taint = *taint
	}
	if p.byReason != nil {
		if i, ok := p.byReason[reason]; ok {
			return i
		}
	} else {
		for i := range p.groups {
			if s := &p.groups[i]; s.Kind == kind && s.Taint == reason.taint {
				return i
			}
		}
	}
	s := Skip{Kind: kind, Taint: reason.taint}
	if taint != nil {
		s.Lifecycle, s.Transient = p.lifecycle.Reason(taint.Key)
	}
	p.groups = append(p.groups, s)
	switch n := len(p.groups); {
	case p.byReason != nil:
		p.byReason[reason] = n - 1
	case n > groupIndexFrom:
		p.byReason = make(map[skipReason]int, 2*n)
		for i := range p.groups {
			p.byReason[skipReason{kind: p.groups[i].Kind, taint: p.groups[i].Taint}] = i
		}
	}
	return len(p.groups) - 1
}

func (p *predictor) add(kind SkipKind, taint *corev1.Taint, run nameRun) {
	p.addRun(p.group(kind, taint), run)
}

func (p *predictor) addRun(g int, run nameRun) {
	s := &p.groups[g]
	s.runs = append(s.runs, run)
	s.Count += run.len()
}

// identityQuery is what a DaemonSet that looks at node identity names: the
// nodes it names and the values of per-node labels it selects on. A class
// member carrying none of them behaves like any other such member, so a
// class is judged once for all of those, and once per member it names.
type identityQuery struct {
	names []string
	// values[j] and referenced[j] are about the per-node key j.
	values     [][]string
	referenced []bool
	// scan: some requirement (Gt, Lt, an unusual field) needs every node
	// judged on its own.
	scan bool
}

// placeholder is a name and label value no node has (the API server refuses
// it): the stand-in for the members a DaemonSet does not name.
const placeholder = "\x00"

func (s *NodeSnapshot) identityQuery(spec *corev1.PodSpec) *identityQuery {
	q := &identityQuery{values: make([][]string, len(s.perNodeKeys)), referenced: make([]bool, len(s.perNodeKeys))}
	keyIndex := func(k string) int {
		j, found := slices.BinarySearch(s.perNodeKeys, k)
		if !found {
			return -1
		}
		q.referenced[j] = true
		return j
	}
	if spec.NodeName != "" {
		q.names = append(q.names, spec.NodeName)
	}
	for k, v := range spec.NodeSelector {
		if j := keyIndex(k); j >= 0 {
			q.values[j] = append(q.values[j], v)
		}
	}
	if required := requiredNodeSelector(spec); required != nil {
		for _, t := range required.NodeSelectorTerms {
			for _, r := range t.MatchExpressions {
				j := keyIndex(r.Key)
				switch {
				case j < 0:
				case r.Operator == corev1.NodeSelectorOpIn || r.Operator == corev1.NodeSelectorOpNotIn:
					q.values[j] = append(q.values[j], r.Values...)
				case r.Operator != corev1.NodeSelectorOpExists && r.Operator != corev1.NodeSelectorOpDoesNotExist:
					q.scan = true
				}
			}
			for _, r := range t.MatchFields {
				if r.Key != metav1.ObjectNameField ||
					(r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpNotIn) {
					q.scan = true
				}
				q.names = append(q.names, r.Values...)
			}
		}
	}
	if slices.Contains(q.names, placeholder) || slices.ContainsFunc(q.values, func(vs []string) bool {
		return slices.Contains(vs, placeholder)
	}) {
		q.scan = true
	}
	return q
}

// perNode judges one class for a DaemonSet that looks at node identity and
// returns how many of its members are eligible.
func (p *predictor) perNode(s *NodeSnapshot, class *nodeClass, q *identityQuery) int {
	node := s.borrowMemberNode(class)
	defer class.giveBack(&node)
	// Taints belong to the class: decided once, on first need.
	taintGroup, taintDecided := -1, false
	decide := func(name string, values []perNodeValue) int {
		s.setMember(&node, name, values)
		if p.spec.NodeName != "" && p.spec.NodeName != name {
			return p.group(SkipNodeName, nil)
		}
		if kind, ok := matchAffinity(&node, p.spec, p.affinity, &p.relaxed); !ok {
			return p.group(kind, nil)
		}
		if !taintDecided {
			if taint, untolerated := untoleratedTaint(node.Spec.Taints, p.tolerations); untolerated {
				taintGroup = p.group(SkipTaint, taint)
			}
			taintDecided = true
		}
		return taintGroup
	}
	eligible := 0
	// only collects, per group, the members judged one by one, in order.
	var only map[int][]int32
	judge := func(i int32) {
		if g := decide(class.members[i].name, class.valuesOf(int(i))); g >= 0 {
			if only == nil {
				only = map[int][]int32{}
			}
			only[g] = append(only[g], i)
		} else {
			eligible++
		}
	}
	if specials, ok := q.named(s, class); ok {
		generic := make([]perNodeValue, len(s.perNodeKeys))
		for j := range generic {
			generic[j] = perNodeValue{value: placeholder, present: q.referenced[j]}
		}
		if rest := len(class.members) - len(specials); rest > 0 {
			if g := decide(placeholder, generic); g >= 0 {
				p.addRun(g, nameRun{members: class.members, except: specials})
			} else {
				eligible += rest
			}
		}
		for _, i := range specials {
			judge(i)
		}
	} else {
		for i := range class.members {
			judge(int32(i))
		}
	}
	for g, idx := range only {
		p.addRun(g, nameRun{members: class.members, only: idx})
	}
	return eligible
}

// named returns, sorted, the indices of the class's members that q names by
// name or by a per-node label value; false when the class must be judged
// member by member (q.scan, or a member lacks a label q reads, which the
// index cannot tell apart).
func (q *identityQuery) named(s *NodeSnapshot, class *nodeClass) ([]int32, bool) {
	if q.scan {
		return nil, false
	}
	var out []int32
	for j, ref := range q.referenced {
		if ref && len(class.byValue[j]) < len(class.members) {
			return nil, false
		}
	}
	for _, name := range q.names {
		if i, ok := class.find(name); ok {
			out = append(out, int32(i))
		}
	}
	for j, vs := range q.values {
		for _, v := range vs {
			out = append(out, class.withValue(j, v)...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), true
}

// placeOn decides one node: eligible, or why not. The relaxed affinity
// (without OS and architecture terms) is built on first need, to tell an
// OS/architecture mismatch from a deliberate selection.
func placeOn(node *corev1.Node, spec *corev1.PodSpec, affinity nodeaffinity.RequiredNodeAffinity,
	relaxed **nodeaffinity.RequiredNodeAffinity, tolerations []corev1.Toleration) (SkipKind, *corev1.Taint, bool) {
	if kind, ok := matchAffinity(node, spec, affinity, relaxed); !ok {
		return kind, nil, false
	}
	if taint, untolerated := untoleratedTaint(node.Spec.Taints, tolerations); untolerated {
		return SkipTaint, taint, false
	}
	return "", nil, true
}

// matchAffinity applies the required node affinity (nodeSelector included);
// on a mismatch it says whether OS or architecture alone was the reason.
func matchAffinity(node *corev1.Node, spec *corev1.PodSpec, affinity nodeaffinity.RequiredNodeAffinity,
	relaxed **nodeaffinity.RequiredNodeAffinity) (SkipKind, bool) {
	// Parsing errors count as no match, as in the controller.
	if ok, _ := affinity.Match(node); ok {
		return "", true
	}
	if *relaxed == nil {
		if selectsOSArch(spec) {
			r := withoutOSArch(spec)
			*relaxed = &r
		} else {
			*relaxed = &unrelaxed
		}
	}
	if *relaxed == &unrelaxed {
		// Nothing to relax: the relaxed affinity is the affinity, which
		// did not match. Half the tests of every class a selector skips.
		return SkipSelector, false
	}
	if ok, _ := (*relaxed).Match(node); ok {
		return SkipOSArch, false
	}
	return SkipSelector, false
}

// unrelaxed stands, by its address, for the relaxed affinity of a spec that
// selects by no OS or architecture label: the same as its affinity.
var unrelaxed nodeaffinity.RequiredNodeAffinity

// selectsOSArch reports whether the nodeSelector or a required node affinity
// term reads an OS or architecture label.
func selectsOSArch(spec *corev1.PodSpec) bool {
	for k := range spec.NodeSelector {
		if IsOSArchLabel(k) {
			return true
		}
	}
	required := requiredNodeSelector(spec)
	if required == nil {
		return false
	}
	for _, t := range required.NodeSelectorTerms {
		for _, r := range t.MatchExpressions {
			if IsOSArchLabel(r.Key) {
				return true
			}
		}
	}
	return false
}

// untoleratedTaint returns the first NoSchedule or NoExecute taint the
// tolerations leave untolerated, as the controller's predicate does.
func untoleratedTaint(taints []corev1.Taint, tolerations []corev1.Toleration) (*corev1.Taint, bool) {
	// The library copies the taints its filter keeps. Most nodes carry no
	// taint that excludes, and the others mostly only such taints: then
	// there is nothing to search, or nothing to filter.
	filter, n := excludes, 0
	for i := range taints {
		if excludes(&taints[i]) {
			n++
		}
	}
	switch n {
	case 0:
		return nil, false
	case len(taints):
		filter = nil
	}
	found, untolerated := schedulingcorev1.FindMatchingUntoleratedTaint(logr.Discard(), taints, tolerations,
		filter, comparisonOperatorsEnabled)
	if !untolerated {
		return nil, false
	}
	taint := found
	return &taint, true
}

// excludes reports whether a taint keeps daemon Pods off a node that does
// not tolerate it (PreferNoSchedule only discourages).
func excludes(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// daemonTolerations are the tolerations of the Pods the controller creates:
// the template's plus the ones it adds (AddOrUpdateDaemonPodTolerations).
func daemonTolerations(spec *corev1.PodSpec) []corev1.Toleration {
	out := make([]corev1.Toleration, 0, len(spec.Tolerations)+len(daemonPodTolerations)+1)
	out = append(out, spec.Tolerations...)
	out = append(out, daemonPodTolerations...)
	if spec.HostNetwork {
		out = append(out, hostNetworkToleration)
	}
	return out
}

// looksAtNodeIdentity reports whether the placement depends on a node's own
// name or on a per-node label, which classes do not share.
func (s *NodeSnapshot) looksAtNodeIdentity(spec *corev1.PodSpec) bool {
	for k := range spec.NodeSelector {
		if s.isPerNodeKey(k) {
			return true
		}
	}
	required := requiredNodeSelector(spec)
	if required == nil {
		return false
	}
	for _, t := range required.NodeSelectorTerms {
		if len(t.MatchFields) > 0 {
			return true
		}
		for _, r := range t.MatchExpressions {
			if s.isPerNodeKey(r.Key) {
				return true
			}
		}
	}
	return false
}

// osArchLabels select a node by its operating system or architecture alone,
// which is normal (a Linux agent skips Windows nodes) and not a deliberate
// subset of nodes.
var osArchLabels = map[string]bool{
	corev1.LabelOSStable:      true,
	corev1.LabelArchStable:    true,
	"beta.kubernetes.io/os":   true,
	"beta.kubernetes.io/arch": true,
}

// IsOSArchLabel reports whether a node label key selects by operating system
// or architecture alone.
func IsOSArchLabel(key string) bool { return osArchLabels[key] }

// OSArchLabels returns those label keys, sorted (for generated checks that
// must list them).
func OSArchLabels() []string { return slices.Sorted(maps.Keys(osArchLabels)) }

// withoutOSArch returns the required node affinity with every OS and
// architecture requirement dropped.
func withoutOSArch(spec *corev1.PodSpec) nodeaffinity.RequiredNodeAffinity {
	selector := map[string]string{}
	for k, v := range spec.NodeSelector {
		if !IsOSArchLabel(k) {
			selector[k] = v
		}
	}
	var affinity *corev1.Affinity
	if required := requiredNodeSelector(spec); required != nil {
		var terms []corev1.NodeSelectorTerm
		matchAll := false
		for _, t := range required.NodeSelectorTerms {
			if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
				continue // an empty term matches nothing, relaxed or not
			}
			nt := corev1.NodeSelectorTerm{MatchFields: t.MatchFields}
			for _, r := range t.MatchExpressions {
				if !IsOSArchLabel(r.Key) {
					nt.MatchExpressions = append(nt.MatchExpressions, r)
				}
			}
			if len(nt.MatchExpressions) == 0 && len(nt.MatchFields) == 0 {
				// Only OS and architecture: relaxed, the term
				// matches every node, and so do the ORed terms.
				matchAll = true
				break
			}
			terms = append(terms, nt)
		}
		if !matchAll {
			affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
			}}
		}
	}
	return nodeaffinity.NewRequiredNodeAffinity(selector, affinity)
}
