// Package policy is dsguard's engine: a DaemonSet and an environment in,
// sorted findings out.
//
// It is pure on purpose. Nothing here talks to an API server, opens a socket or
// keeps global mutable state, so the same verdicts come out of the admission
// webhook, the offline `dsguard check` and the audit. The environment carries
// everything that is not in the DaemonSet itself: the loaded Policy, the
// current time (for exemption expiry) and, when known, the cluster's nodes.
//
// A rule is a self-describing value (ID, title, why it matters, remediation,
// default action, typed parameters) in an explicit registry; see Rules. The
// policy document (apiVersion dsguard.io/v1alpha1, kind PolicyConfig) is
// decoded strictly and validated with every problem reported at once; see
// ParseConfig.
package policy
