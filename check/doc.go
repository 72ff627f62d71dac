// Package check is the offline `dsguard check`: it judges the DaemonSets read
// from manifests with the same engine as the webhook, gives each a verdict and
// the run an exit code, and renders the results as text or JSON.
package check
