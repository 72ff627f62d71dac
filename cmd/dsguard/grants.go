package main

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/dsguard/dsguard/metricsauth"
	"github.com/dsguard/dsguard/policy"
)

// exemptionGrants asks the API server who may grant exemptions
// (exemptions.grantedByRBAC): whoever may create policy.GrantResource
// named by the DaemonSet's namespace in dsguard's own namespace.
type exemptionGrants struct {
	reviews authorizationclient.SubjectAccessReviewInterface
	// namespace is dsguard's own.
	namespace string
	// clusterRole is the ClusterRole that gives the permission (the
	// chart's), named in refusals; "" when there is none.
	clusterRole string
}

// mayGrant reports whether user may grant exemptions to DaemonSets in
// namespace. The answer is not remembered: it is asked only when someone
// writes an exemption, and a RoleBinding removed must count at once.
func (g exemptionGrants) mayGrant(ctx context.Context, user authenticationv1.UserInfo, namespace string) (bool, error) {
	spec := metricsauth.ReviewSpec(user)
	spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
		Namespace: g.namespace, Verb: policy.GrantVerb, Group: policy.GrantGroup, Resource: policy.GrantResource, Name: namespace,
	}
	r, err := g.reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("subject access review: %w", err)
	}
	return r.Status.Allowed && !r.Status.Denied, nil
}

// grantors says who may grant exemptions in namespace, for a refusal.
func (g exemptionGrants) grantors(namespace string) string {
	return policy.GrantorsPhrase(g.namespace, namespace, g.clusterRole)
}
