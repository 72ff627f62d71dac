package fit

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Term is one required pod anti-affinity term, resolved as the scheduler
// resolves it: the label selector parsed, and the namespaces it covers
// either listed or selected by namespace labels.
type Term struct {
	// TopologyKey names the node label whose value draws the domain:
	// kubernetes.io/hostname for the node alone.
	TopologyKey string
	// Namespaces the term covers by name. Without names and without a
	// namespace selector, the namespace of the Pod that declares it.
	Namespaces []string
	// NamespaceSelector covers namespaces by their labels; labels.Nothing()
	// when the term has none, labels.Everything() for the empty selector.
	NamespaceSelector labels.Selector
	// Selector is the term's label selector on Pods; a nil label selector
	// matches no Pod.
	Selector labels.Selector
}

// NewTerms resolves the required anti-affinity terms of a Pod in namespace.
func NewTerms(namespace string, terms []corev1.PodAffinityTerm) ([]Term, error) {
	if len(terms) == 0 {
		return nil, nil
	}
	out := make([]Term, 0, len(terms))
	for i := range terms {
		t := &terms[i]
		sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("podAntiAffinity term %d: labelSelector: %w", i, err)
		}
		nsSel, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector)
		if err != nil {
			return nil, fmt.Errorf("podAntiAffinity term %d: namespaceSelector: %w", i, err)
		}
		ns := slices.Clone(t.Namespaces)
		if len(ns) == 0 && t.NamespaceSelector == nil {
			ns = []string{namespace}
		}
		out = append(out, Term{TopologyKey: t.TopologyKey, Namespaces: ns, NamespaceSelector: nsSel, Selector: sel})
	}
	return out, nil
}

// RequiredAntiAffinity returns the required anti-affinity terms of a Pod
// spec (the scheduler ignores the preferred ones when filtering).
func RequiredAntiAffinity(spec *corev1.PodSpec) []corev1.PodAffinityTerm {
	if spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil {
		return nil
	}
	return spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
}

// matches reports whether the term selects a Pod with these labels in
// namespace ns, whose namespace carries nsLabels (the scheduler's
// AffinityTerm.Matches).
func (t *Term) matches(ns string, podLabels map[string]string, nsLabels labels.Set) bool {
	if !slices.Contains(t.Namespaces, ns) && !t.NamespaceSelector.Matches(nsLabels) {
		return false
	}
	return t.Selector.Matches(labels.Set(podLabels))
}

// resolveNamespaces turns the incoming Pod's namespace selectors into names,
// as the scheduler's PreFilter does with its namespace lister: it then
// matches the Pods already on nodes without their namespaces' labels. An
// empty selector (every namespace) stays as it is.
func resolveNamespaces(terms []Term, namespaces map[string]map[string]string) []Term {
	out := slices.Clone(terms)
	for i := range out {
		t := &out[i]
		if t.NamespaceSelector.Empty() {
			continue
		}
		ns := slices.Clone(t.Namespaces)
		for name, l := range namespaces {
			if t.NamespaceSelector.Matches(labels.Set(l)) && !slices.Contains(ns, name) {
				ns = append(ns, name)
			}
		}
		t.Namespaces, t.NamespaceSelector = ns, labels.Nothing()
	}
	return out
}
