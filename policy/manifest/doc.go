// Package manifest reads Kubernetes manifests for the offline `dsguard check`:
// files, directories and standard input; multi-document YAML, JSON and List
// objects. It returns typed DaemonSets and Nodes and a clear error for every
// document it cannot use, naming the file and the document.
package manifest
