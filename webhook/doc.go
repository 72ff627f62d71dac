// Package webhook adapts the policy engine to Kubernetes admission.
//
// The request path is: decode the AdmissionReview → policy.Evaluate with the
// current policy → deny (HTTP 200, allowed=false, code 403, one message listing
// every deny finding), warnings (one line per finding) and audit annotations.
// Nothing on that path calls the API server: the policy comes from an
// in-memory policy (clusterview.PolicySource) kept current by a ConfigMap
// informer restricted to the one policy object, and the nodes from
// clusterview.NodeView. The auditor lives in package audit: admission never
// depends on it.
//
// A second handler validates the policy ConfigMap itself, so that `kubectl
// apply` of a broken policy is refused with its line and field.
package webhook
