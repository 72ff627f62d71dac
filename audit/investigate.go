package audit

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dsguard/dsguard/coverage"
)

// InvestigateGap fills e.Investigation: it lists the Pods of that one
// DaemonSet through r (on demand; no cluster-wide Pod informer) and diagnoses
// each node the prediction on nodes says should run one but has no ready Pod.
// The in-cluster auditor and `dsguard audit` share it.
func InvestigateGap(ctx context.Context, r client.Reader, e *Entry, nodes *coverage.NodeSnapshot) error {
	sel, err := metav1.LabelSelectorAsSelector(e.DaemonSet.Spec.Selector)
	if err != nil {
		return fmt.Errorf("invalid selector of %s: %w", e.Key(), err)
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(e.DaemonSet.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("listing the Pods of %s: %w", e.Key(), err)
	}
	e.Investigation = coverage.InvestigateGap(e.DaemonSet, coverage.EligibleNodes(&e.Coverage, nodes), pods.Items)
	return nil
}
