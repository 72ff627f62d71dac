// Package audit is everything dsguard does after admission: it interprets a
// DaemonSet's status counters (AssessStatus), judges every DaemonSet against
// the policy and the predicted coverage in one pass (Run, with GapClock for how
// long a gap has lasted), renders the result for `dsguard audit` (WriteTable,
// WriteJSON), and, inside `dsguard serve`, runs the leader-elected Auditor that
// turns changes into Events and gauges and publishes OpenReports Reports.
//
// A gap found is investigated node by node (InvestigateGap): the Pods of that
// one DaemonSet are listed on demand, never through a cluster-wide informer.
package audit
