package check

import (
	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/manifest"
	"github.com/dsguard/dsguard/policy/rules"
)

// Verdict summarises one DaemonSet.
type Verdict string

// The verdicts, by the strongest visible finding.
const (
	VerdictDeny Verdict = "deny"
	VerdictWarn Verdict = "warn"
	VerdictPass Verdict = "pass"
)

// Result is the evaluation of one DaemonSet.
type Result struct {
	Location  manifest.Location
	Namespace string
	Name      string
	Findings  []policy.Finding
	// Positions holds, for each finding, where its field is written in
	// Location.File; zero when unknown (rendered input).
	Positions []manifest.Position
	// Placement is the predicted placement; nil without a node set.
	Placement *coverage.Placement
	// Fit is what the scheduler will do with the Pods on the nodes the
	// placement covers; nil unless --nodes holds the cluster's Pods.
	Fit *fit.Report
}

// Verdict returns deny when any finding denies, warn when any warns, else pass.
func (r *Result) Verdict() Verdict {
	switch {
	case policy.Count(r.Findings, policy.ActionDeny) > 0:
		return VerdictDeny
	case policy.Count(r.Findings, policy.ActionWarn) > 0:
		return VerdictWarn
	}
	return VerdictPass
}

// eachVisible calls fn for each finding a person is shown (deny and warn,
// not audit), with the line its field is written on, 0 when unknown.
func (r *Result) eachVisible(fn func(f policy.Finding, line int)) {
	for i, f := range r.Findings {
		if f.Action != policy.ActionDeny && f.Action != policy.ActionWarn {
			continue
		}
		line := 0
		if i < len(r.Positions) {
			line = r.Positions[i].Line
		}
		fn(f, line)
	}
}

// Results is the outcome of checking a set of manifests.
type Results struct {
	Results []Result
	Errors  []*manifest.Error
	Files   int
	Skipped map[string]int
	// Notes are things the reader must know about what was not checked.
	Notes []string
	// FailOn is the weakest action that fails the check: deny (default) or warn.
	FailOn policy.Action
	// Stopped is the error that ended the run before the end of its input
	// (a path that cannot be read or rendered): the results are then those
	// of the DaemonSets judged until then.
	Stopped error

	// The outcome so far, kept as results arrive (add), so that a streamed
	// run, which keeps no Result, still has its summary and exit code.
	counts        Summary
	failed        bool
	auditFindings int
}

// add counts a result and keeps it unless it was streamed.
func (r *Results) add(res Result, keep bool) {
	r.counts.DaemonSets++
	switch res.Verdict() {
	case VerdictDeny:
		r.counts.Denied++
	case VerdictWarn:
		r.counts.Warned++
	default:
		r.counts.Passed++
	}
	for _, f := range res.Findings {
		if f.Action != policy.ActionDeny && f.Action != policy.ActionWarn {
			r.auditFindings++
		}
	}
	r.failed = r.failed || res.Fails(r.FailOn)
	if keep {
		r.Results = append(r.Results, res)
	}
}

// Exit codes of `dsguard check`.
const (
	ExitOK      = 0
	ExitDenied  = 1
	ExitInvalid = 2
)

// ExitCode is 2 when some document could not be read or the run stopped
// early (the verdict is then incomplete), 1 when any DaemonSet fails at
// FailOn (denied; with warn, also warned), else 0.
func (r *Results) ExitCode() int {
	if len(r.Errors) > 0 || r.Stopped != nil {
		return ExitInvalid
	}
	if r.failed {
		return ExitDenied
	}
	return ExitOK
}

// stoppedMessage says, in a report, that the run stopped early and why.
func (r *Results) stoppedMessage() string {
	return "check stopped before the end of its input, the results are incomplete: " + r.Stopped.Error()
}

// Summary counts the outcome.
type Summary struct {
	Files      int `json:"files"`
	DaemonSets int `json:"daemonSets"`
	Denied     int `json:"denied"`
	Warned     int `json:"warned"`
	Passed     int `json:"passed"`
	Skipped    int `json:"skippedObjects"`
	Errors     int `json:"errors"`
}

// Summary returns the counts of the report.
func (r *Results) Summary() Summary {
	s := r.counts
	s.Files, s.Errors = r.Files, len(r.Errors)
	for _, n := range r.Skipped {
		s.Skipped += n
	}
	return s
}

// needsNodes reports whether any rule of the catalogue needs the node set.
func needsNodes() bool {
	for _, rule := range rules.Builtin().Rules() {
		if rule.NeedsNodes {
			return true
		}
	}
	return false
}
