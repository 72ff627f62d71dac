package clusterview

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/coverage/fit"
)

// TestDigest_ChangesWheneverTheRecordDoes is what lets the view skip making
// the record of an update whose digest is the held one's. Every spot of a
// Pod, found from its type (each field at any depth, each slice's
// elements, each map whole or one entry), is changed at random in several
// random Pods; wherever the view's record changes, the digest must too.
// The spots are not chosen from what the digest reads, so a field the
// record comes to read and the digest leaves out fails it.
func TestDigest_ChangesWheneverTheRecordDoes(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed>>1))
	var pods []*corev1.Pod
	for range 128 {
		pods = append(pods, digestTestPod(r))
	}
	var spots []spot
	spotsOf(reflect.TypeFor[corev1.Pod](), nil, "", false, map[reflect.Type]bool{}, &spots)
	// The record reads a few dozen of the Pod's spots: the changes must
	// reach them, or the test proves nothing. They are tried more often
	// (a random change of one seldom changes the record: a status for a
	// container the Pod does not have, a word that is not a phase).
	want := []string{"name", "namespace", "labels", "ownerReferences[].controller", "ownerReferences[].kind",
		"ownerReferences[].name", "spec.nodeName", "spec.priority", "spec.hostNetwork", "spec.overhead",
		"spec.resources.requests", "spec.containers[].name", "spec.containers[].resources.requests",
		"spec.containers[].ports[].hostPort", "spec.containers[].ports[].containerPort",
		"spec.containers[].ports[].protocol", "spec.containers[].ports[].hostIP",
		"spec.initContainers[].restartPolicy", "spec.initContainers[].resources.requests",
		"spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[].topologyKey",
		"status.phase", "status.nominatedNodeName", "status.startTime", "status.conditions[].type",
		"status.conditions[].reason", "status.containerStatuses[].name", "status.containerStatuses[].allocatedResources",
		"status.containerStatuses[].resources.requests", "status.initContainerStatuses[].allocatedResources",
		"status.allocatedResources", "status.resources.requests"}
	const tries, wantTries = 16, 240
	changed := map[string]int{}
	for _, s := range spots {
		n := tries
		if slices.Contains(want, s.path) {
			n = wantTries
		}
		for range n {
			pod := pods[r.IntN(len(pods))]
			next := pod.DeepCopy()
			s.change(r, reflect.ValueOf(next).Elem())
			if before, after := viewedRecord(pod), viewedRecord(next); before != after {
				changed[s.path]++
				if fit.Digest(digestSeed, pod) == fit.Digest(digestSeed, next) {
					t.Fatalf("changing %s changed the record (%s → %s) but not the digest", s.path, before, after)
				}
			}
		}
	}
	for _, path := range want {
		if changed[path] == 0 {
			t.Errorf("no change of %s changed the record in %d tries: the Pods do not reach it", path, wantTries)
		}
	}
	t.Logf("%d spots, %d tries each (%d for the %d above); %d spots changed the record: %v",
		len(spots), tries, wantTries, len(want), len(changed), slices.Sorted(maps.Keys(changed)))
}

// digestTestPod is a random Pod the view keeps: bound (or nominated),
// running, its anti-affinity valid, its container statuses named after its
// containers (where the request reads them), often with a sidecar, a
// controller and an infeasible resize, so that changes show in the record.
func digestTestPod(r *rand.Rand) *corev1.Pod {
	pod := &corev1.Pod{}
	randomFill(r, reflect.ValueOf(pod).Elem(), 0)
	pod.Spec.NodeName, pod.Status.Phase = "node-1", corev1.PodRunning
	if r.IntN(4) == 0 {
		pod.Spec.NodeName, pod.Status.NominatedNodeName = "", "node-2"
	}
	if _, err := fit.PodOf(pod); err != nil {
		pod.Spec.Affinity = nil
	}
	if len(pod.Spec.Containers) == 0 {
		pod.Spec.Containers = make([]corev1.Container, 1)
		randomFill(r, reflect.ValueOf(&pod.Spec.Containers[0]).Elem(), 0)
	}
	if r.IntN(2) == 0 {
		sidecar := corev1.Container{RestartPolicy: new(corev1.ContainerRestartPolicyAlways)}
		randomFill(r, reflect.ValueOf(&sidecar.Resources.Requests).Elem(), 0)
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, sidecar)
	}
	// Half the Pods have no pod-level status resources, which would
	// stand for their containers' statuses; some have a controller, some a
	// resize the kubelet found infeasible.
	if r.IntN(2) == 0 {
		pod.Status.Resources, pod.Status.AllocatedResources = nil, nil
	}
	if r.IntN(2) == 0 {
		pod.OwnerReferences = append(pod.OwnerReferences, metav1.OwnerReference{Kind: "DaemonSet", Name: "a",
			Controller: new(true)})
	}
	if r.IntN(2) == 0 {
		pod.Status.Conditions = append(pod.Status.Conditions,
			corev1.PodCondition{Type: corev1.PodResizePending, Reason: corev1.PodReasonInfeasible})
	}
	for _, list := range []struct {
		specs    []corev1.Container
		statuses []corev1.ContainerStatus
	}{{pod.Spec.Containers, pod.Status.ContainerStatuses}, {pod.Spec.InitContainers, pod.Status.InitContainerStatuses}} {
		for i := range list.statuses {
			if len(list.specs) > 0 {
				list.statuses[i].Name = list.specs[i%len(list.specs)].Name
			}
		}
	}
	return pod
}

// spot is one place of a Pod, found from its type: the steps that lead
// there from the Pod.
type spot struct {
	path  string
	steps []step
}

// step goes one level down: into a field, a pointer's target, or a slice's
// element.
type step struct {
	field []int
	kind  reflect.Kind
}

// change walks to the spot in v, making what is missing on the way (a
// pointer's target, a slice's element) empty, so that the change is the
// spot's alone, and gives the spot a new random value.
func (s spot) change(r *rand.Rand, v reflect.Value) {
	for _, st := range s.steps {
		switch st.kind {
		case reflect.Struct:
			v = v.FieldByIndex(st.field)
		case reflect.Pointer:
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		case reflect.Slice:
			if v.Len() == 0 {
				v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
			}
			v = v.Index(r.IntN(v.Len()))
		}
	}
	mutate(r, v)
}

// spotsOf lists the spots under a value of type t, reached by steps; the
// value itself is one unless self is false (a pointer's target, an
// embedded struct: the spot that holds them stands for them).
func spotsOf(t reflect.Type, steps []step, path string, self bool, seen map[reflect.Type]bool, out *[]spot) {
	if self {
		*out = append(*out, spot{path: path, steps: slices.Clone(steps)})
	}
	if leaf(t) || seen[t] {
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		spotsOf(t.Elem(), append(steps, step{kind: reflect.Pointer}), path, false, seen, out)
	case reflect.Slice:
		if t.Elem().Kind() != reflect.Uint8 {
			spotsOf(t.Elem(), append(steps, step{kind: reflect.Slice}), path+"[]", true, seen, out)
		}
	case reflect.Struct:
		seen[t] = true
		defer delete(seen, t)
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := path
			if !f.Anonymous {
				if name != "" {
					name += "."
				}
				name += jsonName(f)
			}
			spotsOf(f.Type, append(steps, step{field: f.Index, kind: reflect.Struct}), name, !f.Anonymous, seen, out)
		}
	}
}

// viewedRecord is everything the view keeps of a Pod, as text to compare.
func viewedRecord(pod *corev1.Pod) string {
	r, err := recordOf(pod)
	if err != nil {
		return "error: " + err.Error()
	}
	r.make()
	if r.err != nil {
		return fmt.Sprintf("%s %v: error", r.node, r.nominated)
	}
	p := &r.rec
	if p.Shape == nil {
		return fmt.Sprintf("%s/%s not kept", r.Namespace, r.Name)
	}
	return fmt.Sprintf("%s nominated=%v %s start=%d priority=%d requests=%+v ports=%v labels=%v owner=%q terms=%d %s",
		r.node, r.nominated, p.Key(), p.StartTime, p.Priority, p.Requests, p.Ports, sortedLabels(p.Labels), p.Owner,
		len(p.AntiAffinity), termsText(p.AntiAffinity))
}

func sortedLabels(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

func termsText(terms []fit.Term) string {
	s := ""
	for _, t := range terms {
		// A selector's type too: Nothing and Everything both print empty.
		s += fmt.Sprintf("%s %v ns=%T(%s) sel=%T(%s);", t.TopologyKey, t.Namespaces, t.NamespaceSelector, t.NamespaceSelector,
			t.Selector, t.Selector)
	}
	return s
}

// mutate gives v a new random value; a map gets either a new whole or one
// entry set.
func mutate(r *rand.Rand, v reflect.Value) {
	if v.Kind() == reflect.Map && r.IntN(2) == 0 {
		m := reflect.MakeMap(v.Type())
		for _, k := range v.MapKeys() {
			m.SetMapIndex(k, v.MapIndex(k))
		}
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		randomFill(r, k, 0)
		randomFill(r, e, 0)
		m.SetMapIndex(k, e)
		v.Set(m)
		return
	}
	fresh := reflect.New(v.Type()).Elem()
	randomFill(r, fresh, 0)
	v.Set(fresh)
}

func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	for i := range len(tag) {
		if tag[i] == ',' {
			tag = tag[:i]
			break
		}
	}
	if tag == "" || tag == "-" {
		return f.Name
	}
	return tag
}

var (
	quantityType = reflect.TypeFor[resource.Quantity]()
	timeType     = reflect.TypeFor[metav1.Time]()
	microType    = reflect.TypeFor[metav1.MicroTime]()
)

// leaf reports whether a type is filled whole: it keeps its value in
// unexported fields.
func leaf(t reflect.Type) bool { return t == quantityType || t == timeType || t == microType }

// words are the strings the generator writes: the names and values the
// record reads (resource names, restart policies, phases, condition types
// and reasons, owner kinds, operators, topology keys), so that random Pods
// meet them, and a few others.
var words = []string{"", "a", "b", "app", "Always", "Never", "TCP", "UDP", "cpu", "memory", "ephemeral-storage",
	"example.com/gpu", "pods", "DaemonSet", "ReplicaSet", "PodResizePending", "Infeasible", "Deferred", "Running",
	"Succeeded", "Failed", "In", "NotIn", "Exists", "kubernetes.io/hostname", "topology.kubernetes.io/zone",
	"10.0.0.1", "0.0.0.0", "node-1", "node-2", "True", "False"}

// typedWords are the values of the API's named string types the record
// reads: a random one is one of these, or one of the words.
var typedWords = map[reflect.Type][]string{
	reflect.TypeFor[corev1.ResourceName](): {"cpu", "memory", "ephemeral-storage", "pods", "example.com/gpu",
		"hugepages-2Mi"},
	reflect.TypeFor[corev1.Protocol]():               {"TCP", "UDP", "SCTP"},
	reflect.TypeFor[corev1.PodPhase]():               {"Pending", "Running", "Succeeded", "Failed"},
	reflect.TypeFor[corev1.ContainerRestartPolicy](): {"Always", "OnFailure", "Never"},
	reflect.TypeFor[corev1.PodConditionType]():       {"Ready", "PodResizePending", "PodResizeInProgress"},
	reflect.TypeFor[metav1.LabelSelectorOperator]():  {"In", "NotIn", "Exists", "DoesNotExist"},
}

var quantities = []string{"0", "1", "2", "100m", "250m", "0.5", "500m", "1000m", "64Mi", "1Gi", "1024Mi", "1k", "3"}

// randomFill gives v a random value: small, from the words above for
// strings, nil or empty as often as not for pointers, slices and maps.
func randomFill(r *rand.Rand, v reflect.Value, depth int) {
	t := v.Type()
	switch {
	case t == quantityType:
		v.Set(reflect.ValueOf(resource.MustParse(quantities[r.IntN(len(quantities))])))
		return
	case t == timeType:
		v.Set(reflect.ValueOf(metav1.NewTime(time.Unix(1_700_000_000+r.Int64N(3), r.Int64N(2)*500_000_000))))
		return
	case t == microType:
		v.Set(reflect.ValueOf(metav1.NewMicroTime(time.Unix(1_700_000_000+r.Int64N(3), 0))))
		return
	}
	const deepest = 14
	switch v.Kind() {
	case reflect.String:
		pool := words
		if typed := typedWords[t]; typed != nil && r.IntN(4) != 0 {
			pool = typed
		}
		v.SetString(pool[r.IntN(len(pool))])
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt([]int64{0, 1, 2, 80, 443, 1000}[r.IntN(6)])
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(r.IntN(3)))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(r.IntN(3)))
	case reflect.Pointer:
		if depth >= deepest || r.IntN(5) < 2 {
			v.SetZero()
			return
		}
		p := reflect.New(t.Elem())
		randomFill(r, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		n := 0
		if depth < deepest {
			n = r.IntN(3)
		}
		if t.Elem().Kind() == reflect.Uint8 {
			v.SetBytes(make([]byte, n))
			return
		}
		s := reflect.MakeSlice(t, n, n)
		for i := range n {
			randomFill(r, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		if depth >= deepest || r.IntN(3) == 0 {
			v.SetZero()
			return
		}
		m := reflect.MakeMap(t)
		for range r.IntN(3) {
			k, e := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
			randomFill(r, k, depth+1)
			randomFill(r, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if t.Field(i).IsExported() {
				randomFill(r, v.Field(i), depth+1)
			}
		}
	}
}
