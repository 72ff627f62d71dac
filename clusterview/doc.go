// Package clusterview is what a running dsguard knows of its cluster, kept
// current by watches and shared by the admission webhook and the auditor:
// the nodes (NodeView, one coverage.NodeSnapshot at a time, with change
// notifications and readiness) and the policy in force (PolicySource, fed from
// its ConfigMap by PolicyLoader).
package clusterview
