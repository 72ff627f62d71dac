// Package chart tests the Helm chart in charts/dsguard without a cluster:
// `helm lint --strict` and `helm template` golden files with both Helm 3 and
// Helm 4 (built by hack/tools.sh), the values schema against the values and
// the policy types, and the Dockerfile's build stage. Rendering against a real
// API server is in test/e2e/chart.
//
// Regenerate the golden files with
//
//	make chart-test UPDATE=1
package chart
