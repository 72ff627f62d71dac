package clusterview

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// maxInterned bounds a stringTable. Past it the table starts afresh: values
// met on one node only (hostnames, instance IDs) would otherwise keep every
// node that ever joined in memory, while the shared ones are back in the
// table after the next few nodes.
const maxInterned = 4096

// stringTable makes equal strings share one copy. Every decoded Node carries
// its own copy of each label key and value, yet nearly all of them are the
// same across the fleet (kubernetes.io/os=linux, the zones, the instance
// types): shared, they cost nothing per node, which at 65,000 nodes is tens
// of megabytes.
type stringTable struct {
	mu sync.Mutex
	m  map[string]string
}

func (t *stringTable) intern(s string) string {
	if c, ok := t.m[s]; ok {
		return c
	}
	if t.m == nil || len(t.m) >= maxInterned {
		t.m = make(map[string]string, 256)
	}
	t.m[s] = s
	return s
}

// internNode makes n's label keys and values and its taints' strings the
// table's copies. n must be the caller's own (a freshly decoded object).
func (t *stringTable) internNode(n *corev1.Node) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(n.Labels) > 0 {
		labels := make(map[string]string, len(n.Labels))
		for k, v := range n.Labels {
			labels[t.intern(k)] = t.intern(v)
		}
		n.Labels = labels
	}
	for i := range n.Spec.Taints {
		taint := &n.Spec.Taints[i]
		taint.Key, taint.Value = t.intern(taint.Key), t.intern(taint.Value)
		taint.Effect = corev1.TaintEffect(t.intern(string(taint.Effect)))
	}
}
