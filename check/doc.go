// Package check is the offline `dsguard check`: it judges the DaemonSets read
// from manifests with the same engine as the webhook, gives each a verdict and
// the run an exit code, and writes the results as text, JSON, SARIF, JUnit or
// GitHub annotations. Every format is a Writer that writes each DaemonSet as
// soon as it is judged, so memory follows the largest document, not the input.
package check
