// Package framework starts a real Kubernetes control plane (etcd and
// kube-apiserver through controller-runtime's envtest, with binaries built by
// hack/tools.sh), the real dsguard binary as a child process, and drives both
// through the real kubectl and helm binaries. The e2e tests and `make demo`
// share it.
package framework
