package check

import "errors"

// Tee is a Writer that hands every result, and the end of the report, to
// each of its writers in turn: one run of the check, several formats (the
// GitHub annotations on stdout and a SARIF file, say).
type Tee []Writer

// Result writes r with every writer; a writer that fails does not keep
// the others from writing.
func (t Tee) Result(r *Result) error {
	var errs []error
	for _, w := range t {
		errs = append(errs, w.Result(r))
	}
	return errors.Join(errs...)
}

// Finish ends every writer's report.
func (t Tee) Finish(r *Results) error {
	var errs []error
	for _, w := range t {
		errs = append(errs, w.Finish(r))
	}
	return errors.Join(errs...)
}
