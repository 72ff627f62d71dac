package fit

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingcorev1 "k8s.io/component-helpers/scheduling/corev1"
)

// DefaultBindAllHostIP is the host IP a port binds to when none is given:
// it conflicts with the same port and protocol on every address.
const DefaultBindAllHostIP = "0.0.0.0"

// HostPort is one host port in use or wanted, normalised as the scheduler
// keeps it: an empty host IP is 0.0.0.0, an empty protocol TCP.
type HostPort struct {
	HostIP   string          `json:"hostIP"`
	Protocol corev1.Protocol `json:"protocol"`
	Port     int32           `json:"port"`
}

func (p HostPort) String() string { return fmt.Sprintf("%s/%d on %s", p.Protocol, p.Port, p.HostIP) }

// HostPorts returns the host ports a Pod made from spec holds, as the
// scheduler's GetHostPorts: those of restartable init containers (sidecars,
// which run for the Pod's life) and of the containers; plain init
// containers' ports are not held. Under hostNetwork a container port
// without a hostPort holds its own number: the API server defaults the
// hostPort of a Pod (not of a template) so when it is created.
func HostPorts(spec *corev1.PodSpec) []HostPort {
	var out []HostPort
	add := func(ports []corev1.ContainerPort) {
		for _, p := range ports {
			port := p.HostPort
			if port == 0 && spec.HostNetwork {
				port = p.ContainerPort
			}
			if port <= 0 {
				continue
			}
			hp := HostPort{HostIP: p.HostIP, Protocol: p.Protocol, Port: port}
			if hp.HostIP == "" {
				hp.HostIP = DefaultBindAllHostIP
			}
			if hp.Protocol == "" {
				hp.Protocol = corev1.ProtocolTCP
			}
			out = append(out, hp)
		}
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c.Ports)
		}
	}
	for i := range spec.Containers {
		add(spec.Containers[i].Ports)
	}
	return out
}

// conflicts reports whether want collides with a port in use: the same
// protocol and port, and the same host IP or 0.0.0.0 on either side
// (HostPortInfo.CheckConflict).
func conflicts(want HostPort, used []HostPort) bool {
	for _, u := range used {
		if u.Port != want.Port || u.Protocol != want.Protocol {
			continue
		}
		if want.HostIP == DefaultBindAllHostIP || u.HostIP == DefaultBindAllHostIP || u.HostIP == want.HostIP {
			return true
		}
	}
	return false
}

// Pod is what fit keeps of a Pod bound to a node: enough to count it, to
// weigh it as a preemption victim and to match anti-affinity both ways.
// What the Pods of a workload hold alike is in their Shape, which a
// Builder shares between them; a Pod itself is its Shape, the end of its
// name and its start time, 24 bytes: a dump of two million Pods holds
// about 50 MB of them.
type Pod struct {
	*Shape
	// StartTime is status.startTime in Unix seconds (the API carries
	// whole seconds), 0 when the Pod has not started: the scheduler then
	// takes "now", so such a Pod counts as the youngest (least important
	// among its priority).
	StartTime uint32
	// suffix is the Pod's name after Shape.Prefix.
	suffix nameSuffix
}

// Shape is what a Pod's record holds that the other Pods of its workload
// hold alike. A Shape is shared: change none of it in place.
type Shape struct {
	// Prefix is namespace/ and the Pod's name up to its last dash (the
	// whole name when what follows the dash does not fit a nameSuffix):
	// the Pods a ReplicaSet, a Job or a DaemonSet makes differ only after it.
	Prefix    string
	Namespace string
	Priority  int32
	Requests  Resources
	Ports     []HostPort
	// Labels are the Pod's labels, for anti-affinity terms to match.
	Labels map[string]string
	// AntiAffinity are the Pod's required anti-affinity terms.
	AntiAffinity []Term
	// Owner is namespace/name of the DaemonSet that controls the Pod, if
	// one does: its own old Pod makes way for a new one on an update.
	Owner string
}

// appendKey appends what tells the Shape from another (its anti-affinity
// terms left out), strings NUL-terminated and numbers in binary.
func (s *Shape) appendKey(b []byte) []byte {
	str := func(v string) { b = append(append(b, v...), 0) }
	num := func(v int64) { b = binary.AppendVarint(b, v) }
	str(s.Prefix)
	str(s.Owner)
	num(int64(s.Priority))
	num(s.Requests.MilliCPU)
	num(s.Requests.Memory)
	num(s.Requests.EphemeralStorage)
	for _, name := range slices.Sorted(maps.Keys(s.Requests.Scalar)) {
		str(string(name))
		num(s.Requests.Scalar[name])
	}
	b = append(b, 0)
	for _, p := range s.Ports {
		str(p.HostIP)
		str(string(p.Protocol))
		num(int64(p.Port))
	}
	b = append(b, 0)
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		str(k)
		str(s.Labels[k])
	}
	return b
}

// nameSuffix holds the end of a Pod's name in the record itself, without
// a string (and its allocation) of its own: the five characters a
// ReplicaSet, a DaemonSet or a Job adds, a StatefulSet's ordinal.
type nameSuffix struct {
	n uint8
	b [11]byte
}

func (s *nameSuffix) String() string { return string(s.b[:s.n]) }

// NewPod makes the record of the Pod namespace/name from its shape, whose
// Prefix and Namespace it sets (the whole key: see Split); the caller
// fills in the rest.
func NewPod(namespace, name string, startTime uint32, shape *Shape) Pod {
	shape.Prefix = namespace + "/" + name
	shape.Namespace = shape.Prefix[:len(namespace)]
	return Pod{Shape: shape, StartTime: startTime}
}

// Split moves the end of the name, after its last dash, from the Shape's
// Prefix into the record, so that the Pods of a workload can share one
// Shape (Builder); an end longer than a nameSuffix holds stays. The Prefix
// becomes a part of the old one: a caller that keeps the Shape clones it.
func (p Pod) Split() Pod {
	name := p.Prefix[len(p.Namespace)+1:]
	cut := strings.LastIndexByte(name, '-') + 1
	if p.suffix.n > 0 || cut == len(name) || len(name)-cut > len(p.suffix.b) {
		return p
	}
	s := *p.Shape
	s.Prefix = p.Prefix[:len(p.Prefix)-len(name)+cut]
	p.Shape, p.suffix.n = &s, uint8(copy(p.suffix.b[:], name[cut:]))
	return p
}

// Key is namespace/name, to name victims.
func (p *Pod) Key() string { return p.Prefix + p.suffix.String() }

// HasKey reports whether the Pod is namespace/name key, without making
// its Key.
func (p *Pod) HasKey(key string) bool {
	return len(key) == len(p.Prefix)+int(p.suffix.n) && strings.HasPrefix(key, p.Prefix) &&
		key[len(p.Prefix):] == string(p.suffix.b[:p.suffix.n])
}

// compareKeys orders Pods as their Keys order, without making them.
func compareKeys(a, b *Pod) int {
	return compareJoined(a.Prefix, string(a.suffix.b[:a.suffix.n]), b.Prefix, string(b.suffix.b[:b.suffix.n]))
}

// compareJoined compares a1+a2 with b1+b2.
func compareJoined(a1, a2, b1, b2 string) int {
	for {
		if a1 == "" {
			a1, a2 = a2, ""
		}
		if b1 == "" {
			b1, b2 = b2, ""
		}
		if a1 == "" || b1 == "" {
			return cmp.Compare(len(a1), len(b1))
		}
		n := min(len(a1), len(b1))
		if c := strings.Compare(a1[:n], b1[:n]); c != 0 {
			return c
		}
		a1, b1 = a1[n:], b1[n:]
	}
}

// PodOf builds the record of a Pod, with a Shape of its own that holds its
// whole key (Split shares it).
func PodOf(pod *corev1.Pod) (Pod, error) {
	terms, err := NewTerms(pod.Namespace, RequiredAntiAffinity(&pod.Spec))
	if err != nil {
		return Pod{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var start uint32
	if t := pod.Status.StartTime; t != nil {
		start = uint32(min(max(t.Unix(), 1), math.MaxUint32))
	}
	p := NewPod(pod.Namespace, pod.Name, start, &Shape{
		Priority:     schedulingcorev1.PodPriority(pod),
		Requests:     PodRequests(pod),
		Ports:        HostPorts(&pod.Spec),
		Labels:       pod.Labels,
		AntiAffinity: terms,
	})
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && ref.Kind == "DaemonSet" {
		p.Owner = pod.Namespace + "/" + ref.Name
	}
	return p, nil
}

// moreImportant orders Pods as the scheduler's MoreImportantPod: higher
// priority first, then the earlier start; Pods not started come last.
func moreImportant(a, b *Pod) int {
	if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
		return c
	}
	switch {
	case a.StartTime == b.StartTime:
		return compareKeys(a, b)
	case a.StartTime == 0:
		return 1
	case b.StartTime == 0:
		return -1
	}
	return cmp.Compare(a.StartTime, b.StartTime)
}

// Node is one node as the scheduler weighs it: what it offers and what the
// Pods bound to it hold.
type Node struct {
	Name string
	// Labels are the node's labels, read through Label. A caller that
	// keeps many nodes may leave kubernetes.io/hostname out of them and
	// set Hostname instead, so that nodes alike share one map.
	Labels   map[string]string
	Hostname string
	// Allocatable is status.allocatable; AllowedPods its pods entry.
	Allocatable Resources
	AllowedPods int64
	// Pods are the non-terminal Pods bound to the node, most important
	// first.
	Pods []Pod
	// Nominated are Pods not bound yet that the scheduler has nominated
	// for this node (status.nominatedNodeName) after preempting for them:
	// the scheduler counts those of at least the incoming Pod's priority
	// as already there.
	Nominated []Pod
	// workload is the most important of Pods that no DaemonSet controls,
	// below the system classes (Cluster.WorkloadPriority); set by Sort.
	workload *Pod
	// used is the sum of the Pods' requests, set (summed) by Sort: a
	// prediction checks it first, as the scheduler would, and looks at
	// the Pods one by one only where the Pod does not fit outright.
	used   Resources
	summed bool
	// ports is set by Sort when a Pod holds a host port; terms when a Pod
	// has required anti-affinity terms.
	ports, terms bool
	// owners are the DaemonSets (namespace/name) whose Pods the node
	// holds, set by Sort: a prediction for one DaemonSet sets its own
	// Pods aside, and on a node that holds none it need not look at the
	// Pods (each of which is a look at memory of its own) to know.
	owners []string
}

// holdsTerms reports whether a Pod on the node has required anti-affinity
// terms: by what Sort noted, without looking at the Pods (each a look at
// memory of its own, on every node, each time a cluster is made).
func (n *Node) holdsTerms() bool {
	if n.summed {
		return n.terms
	}
	return slices.ContainsFunc(n.Pods, func(p Pod) bool { return len(p.AntiAffinity) > 0 })
}

// mayHold reports whether the node may hold Pods of the DaemonSet owner.
func (n *Node) mayHold(owner string) bool {
	return owner != "" && (!n.summed || slices.Contains(n.owners, owner))
}

// fitsOutright reports whether a Pod asking for want fits on the node
// without the Pods of owner (a DaemonSet's own old Pods, which make way),
// by NodeResourcesFit's sums alone: true only when the node has no
// nominated Pods and the sums leave room for every resource asked for.
// False means "look closer", not "does not fit".
func (n *Node) fitsOutright(want *Resources, owner string) bool {
	if !n.summed || len(n.Nominated) > 0 {
		return false
	}
	count := int64(len(n.Pods))
	var own Resources
	if n.mayHold(owner) {
		for i := range n.Pods {
			if p := &n.Pods[i]; p.Owner == owner {
				count--
				own.Add(p.Requests)
			}
		}
	}
	if count+1 > n.AllowedPods {
		return false
	}
	free := func(have, used, mine int64) int64 { return have - used + mine }
	if want.MilliCPU > 0 && want.MilliCPU > free(n.Allocatable.MilliCPU, n.used.MilliCPU, own.MilliCPU) ||
		want.Memory > 0 && want.Memory > free(n.Allocatable.Memory, n.used.Memory, own.Memory) ||
		want.EphemeralStorage > 0 && want.EphemeralStorage > free(n.Allocatable.EphemeralStorage, n.used.EphemeralStorage, own.EphemeralStorage) {
		return false
	}
	if len(want.Scalar) == 0 {
		return true
	}
	for name, v := range want.Scalar {
		if v > 0 && v > free(n.Allocatable.Scalar[name], n.used.Scalar[name], own.Scalar[name]) {
			return false
		}
	}
	return true
}

// Label returns the value of the node's label key.
func (n *Node) Label(key string) (string, bool) {
	if v, ok := n.Labels[key]; ok {
		return v, true
	}
	if key == corev1.LabelHostname && n.Hostname != "" {
		return n.Hostname, true
	}
	return "", false
}

// Band is the sum of the requests of the Pods of one priority on a node.
type Band struct {
	Priority int32
	Pods     int
	Requests Resources
}

// Bands returns the node's requests summed per priority, highest first.
func (n *Node) Bands() []Band {
	var out []Band
	for i := range n.Pods {
		p := &n.Pods[i]
		if len(out) == 0 || out[len(out)-1].Priority != p.Priority {
			out = append(out, Band{Priority: p.Priority})
		}
		b := &out[len(out)-1]
		b.Pods++
		b.Requests.Add(p.Requests)
	}
	return out
}

// Requested returns the sum of the requests of the Pods on the node.
func (n *Node) Requested() Resources {
	var r Resources
	for i := range n.Pods {
		r.Add(n.Pods[i].Requests)
	}
	return r
}

// NodeOf builds a Node with no Pods from a Node object. Scalar resources
// the node has none of are left out: a missing one counts as zero, and
// most nodes list hugepages they do not have, a map per node otherwise.
func NodeOf(node *corev1.Node) *Node {
	alloc := node.Status.Allocatable
	n := &Node{
		Name:        node.Name,
		Labels:      node.Labels,
		Allocatable: ResourcesOf(alloc),
		AllowedPods: alloc.Pods().Value(),
	}
	maps.DeleteFunc(n.Allocatable.Scalar, func(_ corev1.ResourceName, v int64) bool { return v == 0 })
	if len(n.Allocatable.Scalar) == 0 {
		n.Allocatable.Scalar = nil
	}
	return n
}

// Aggregate builds the Nodes from Node and Pod objects as the scheduler's
// cache sees them: Pods in phase Succeeded or Failed are left out (the
// scheduler does not even watch them), Pods being deleted still count until
// they are gone, Pods bound to a node not listed are dropped, and Pods not
// bound but nominated for a node are kept as its nominated Pods.
func Aggregate(nodes []corev1.Node, pods []corev1.Pod) (map[string]*Node, error) {
	b := NewBuilder()
	for i := range nodes {
		b.AddNode(&nodes[i])
	}
	for i := range pods {
		if err := b.AddPod(&pods[i]); err != nil {
			return nil, err
		}
	}
	out := make(map[string]*Node, len(nodes))
	for _, n := range b.Build().list {
		out[n.Name] = n
	}
	return out, nil
}

// Sort puts the node's Pods in the order Predict expects, most important
// first, and notes the node's most important workload Pod.
func (n *Node) Sort() {
	SortPods(n.Pods)
	n.Sorted()
}

// SortPods puts Pods in the order Predict expects, most important first.
func SortPods(pods []Pod) { slices.SortFunc(pods, func(a, b Pod) int { return moreImportant(&a, &b) }) }

// Sorted notes the most important workload Pod of a node whose Pods are
// already in order (SortPods), without writing them: a caller that shares
// them between Clusters publishes them so.
func (n *Node) Sorted() {
	n.workload, n.used, n.summed, n.ports, n.terms, n.owners = nil, Resources{}, true, false, false, nil
	for i := range n.Pods {
		p := &n.Pods[i]
		n.used.Add(p.Requests)
		n.ports = n.ports || len(p.Ports) > 0
		n.terms = n.terms || len(p.AntiAffinity) > 0
		if p.Owner != "" && !slices.Contains(n.owners, p.Owner) {
			n.owners = append(n.owners, p.Owner)
		}
		if p.Owner == "" && p.Priority <= HighestUserDefinablePriority &&
			(n.workload == nil || p.Priority > n.workload.Priority ||
				p.Priority == n.workload.Priority && compareKeys(p, n.workload) < 0) {
			n.workload = p
		}
	}
}

// Same reports whether p and o are the same record: a Pod update that
// changes none of it (most are status reports) changes no prediction. The
// anti-affinity terms are left out: a Pod's affinity cannot change once it
// is created, and a Pod made again under the same name is a new record
// (its UID differs, which the caller compares).
func (p *Pod) Same(o *Pod) bool {
	if p.suffix != o.suffix || p.StartTime != o.StartTime {
		return false
	}
	return p.Shape == o.Shape || p.Prefix == o.Prefix && p.Priority == o.Priority && p.Owner == o.Owner &&
		p.Requests.Equal(o.Requests) && slices.Equal(p.Ports, o.Ports) && maps.Equal(p.Labels, o.Labels) &&
		len(p.AntiAffinity) == len(o.AntiAffinity)
}
