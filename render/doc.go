// Package render turns a Helm chart or a kustomization directory into the
// manifests it produces, in process, with the libraries the helm and
// kustomize commands are built on (Helm 4's Go SDK, sigs.k8s.io/kustomize/api),
// so that `dsguard check` judges what would be applied, with no helm or
// kustomize binary on the machine.
//
// Built with the norender tag (the container image's binary), Helm's SDK is
// left out and Chart refuses with ErrNoCharts: the webhook never renders a
// chart, and Helm's packages cost every replica memory at start-up.
// Kustomizations are built either way.
package render
