// Package testrun is `dsguard test`: it reads test files (dsguard-test.yaml)
// that name manifests, a node set, a policy and the verdict expected per
// DaemonSet and rule, judges the manifests exactly as `dsguard check` does
// (check.Run), and compares. Each expectation becomes a test case that
// passes or fails; the cases are written as a table, JSON or JUnit XML.
//
// The package reads no policy or node file itself: the caller hands in how
// (Runner.Prepare), so that a test is judged on the inputs check would build
// from the same files.
package testrun
