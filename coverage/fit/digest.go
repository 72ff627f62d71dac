package fit

import (
	"encoding/binary"
	"hash/maphash"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Digest hashes everything a Pod's record is made from (PodOf) and what a
// view keeps beside it: the key, the node it is bound or nominated to, the
// phase, the start, the priority, every input of the request
// (containers' and init containers' requests and restart policies, the
// resources the kubelet reports in the status, a pending resize's reason,
// pod-level resources, the overhead), the host ports, the labels, the
// required anti-affinity terms and the controller.
//
// Most of a cluster's Pod events are the kubelet's status updates (ready,
// restarts, probes, messages), which change none of these: a view that
// keeps the digest of the version it holds knows such an update changes
// nothing without making the record again, whose request is most of its
// cost. Two versions with the same digest have the same record, but for a
// chance of 2^-64 per update under a seed the process chose at random. A
// change that leaves the record as it was may still change the digest (a
// quantity written another way, a field the record does not use): the
// record is then made again, and found the same.
func Digest(seed maphash.Seed, pod *corev1.Pod) uint64 {
	d := digester{seed: seed}
	d.h.SetSeed(seed)
	d.str(pod.Namespace)
	d.str(pod.Name)
	d.str(string(pod.Status.Phase))
	d.str(pod.Spec.NodeName)
	d.str(pod.Status.NominatedNodeName)
	start := int64(math.MinInt64)
	if t := pod.Status.StartTime; t != nil {
		start = t.Unix()
	}
	d.num(uint64(start))
	priority := int64(math.MinInt64)
	if p := pod.Spec.Priority; p != nil {
		priority = int64(*p)
	}
	d.num(uint64(priority))
	d.num(unordered(&d, pod.Labels, func(v string) string { return v }))
	for i := range pod.OwnerReferences {
		if ref := &pod.OwnerReferences[i]; ref.Controller != nil && *ref.Controller {
			d.str(ref.Kind)
			d.str(ref.Name)
			break
		}
	}

	d.num(uint64(len(pod.Spec.Containers)))
	for i := range pod.Spec.Containers {
		d.container(&pod.Spec.Containers[i])
	}
	d.num(uint64(len(pod.Spec.InitContainers)))
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		d.container(c)
		policy := "-"
		if c.RestartPolicy != nil {
			policy = string(*c.RestartPolicy)
		}
		d.str(policy)
	}
	d.flag(pod.Spec.HostNetwork)

	d.num(uint64(len(pod.Status.ContainerStatuses)))
	for i := range pod.Status.ContainerStatuses {
		d.containerStatus(&pod.Status.ContainerStatuses[i])
	}
	d.num(uint64(len(pod.Status.InitContainerStatuses)))
	for i := range pod.Status.InitContainerStatuses {
		d.containerStatus(&pod.Status.InitContainerStatuses[i])
	}
	resize := "-"
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == corev1.PodResizePending {
			resize = c.Reason
			break
		}
	}
	d.str(resize)
	d.num(d.resources(pod.Spec.Overhead))
	d.flag(pod.Spec.Resources != nil)
	if r := pod.Spec.Resources; r != nil {
		d.num(d.resources(r.Requests))
	}
	d.flag(pod.Status.Resources != nil)
	if r := pod.Status.Resources; r != nil {
		d.num(d.resources(r.Requests))
	}
	d.num(d.resources(pod.Status.AllocatedResources))

	// Required anti-affinity terms are rare and elaborate (selectors,
	// namespaces, namespace selectors, label keys): their wire form covers
	// every field, and is deterministic (map keys sorted).
	terms := RequiredAntiAffinity(&pod.Spec)
	d.num(uint64(len(terms)))
	for _, term := range terms {
		b, err := term.Marshal()
		if err != nil {
			// Not for a decoded term; an error no other version
			// shares makes the record be made again.
			b = []byte(err.Error())
		}
		d.num(uint64(len(b)))
		d.h.Write(b)
	}
	return d.h.Sum64()
}

// digester writes a Pod's fields into one hash.
type digester struct {
	seed maphash.Seed
	h    maphash.Hash
}

// str writes s and a separator, so that "ab","c" and "a","bc" differ.
func (d *digester) str(s string) {
	d.h.WriteString(s)
	d.h.WriteByte(0)
}

func (d *digester) num(v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	d.h.Write(b[:])
}

func (d *digester) flag(set bool) {
	if set {
		d.h.WriteByte(1)
	} else {
		d.h.WriteByte(2)
	}
}

// container writes what the record reads of a container: its name (to find
// its status), its requests and its ports.
func (d *digester) container(c *corev1.Container) {
	d.str(c.Name)
	d.num(d.resources(c.Resources.Requests))
	d.num(uint64(len(c.Ports)))
	for i := range c.Ports {
		p := &c.Ports[i]
		d.num(uint64(uint32(p.HostPort))<<32 | uint64(uint32(p.ContainerPort)))
		d.str(p.HostIP)
		d.str(string(p.Protocol))
	}
}

// containerStatus writes the resources the kubelet reports for a container
// (in-place resize), which the request reads.
func (d *digester) containerStatus(s *corev1.ContainerStatus) {
	d.str(s.Name)
	d.num(d.resources(s.AllocatedResources))
	set := s.Resources != nil && s.Resources.Requests != nil
	d.flag(set)
	if set {
		d.num(d.resources(s.Resources.Requests))
	}
}

// resources hashes a resource list; a quantity in its canonical form, so
// that equal values written alike hash alike.
func (d *digester) resources(list corev1.ResourceList) uint64 { return unordered(d, list, canonical) }

// unordered hashes a map whatever the order of its entries, each entry on
// its own and the hashes summed, telling a nil map from an empty one (the
// request reads a status list only when it is set).
func unordered[K ~string, V any](d *digester, m map[K]V, value func(V) string) uint64 {
	if m == nil {
		return 0
	}
	sum := uint64(len(m)) + 1
	for k, v := range m {
		sum += d.pair(string(k), value(v))
	}
	return sum
}

// pair hashes one entry of a map on its own, so that the entries can be
// summed in any order.
func (d *digester) pair(k, v string) uint64 {
	var h maphash.Hash
	h.SetSeed(d.seed)
	h.WriteString(k)
	h.WriteByte(0)
	h.WriteString(v)
	return h.Sum64()
}

// canonical is q's canonical form. q is a copy: String caches the form it
// makes in the Quantity, and the Pod may be read by others meanwhile.
func canonical(q resource.Quantity) string { return q.String() }
