// Package vap renders dsguard's node-independent rules as Kubernetes
// ValidatingAdmissionPolicies and bindings, so that the API server enforces
// them in-process, with no webhook on the request path and no outage when
// dsguard is down.
//
// It is pure: a parsed policy document in, admissionregistration/v1 objects
// and a list of what CEL cannot express out. The webhook's engine (package
// policy) stays the reference; a differential test through a real
// kube-apiserver keeps the two verdicts equal.
package vap
