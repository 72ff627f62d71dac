package policy

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/coverage"
)

// lifecycleReason is the reason of the policy's lifecycle taints.
const lifecycleReason = "declared by the policy"

// lifecycleTaintOf reads an entry of the policy's lifecycleTaints: a taint
// key, or a prefix of keys ending in *.
func lifecycleTaintOf(entry string) coverage.LifecycleTaint {
	if prefix, ok := strings.CutSuffix(entry, "*"); ok {
		return coverage.LifecycleTaint{Key: prefix, Prefix: true, Reason: lifecycleReason}
	}
	return coverage.LifecycleTaint{Key: entry, Reason: lifecycleReason}
}

// validateLifecycleTaints checks the policy's lifecycleTaints: each a valid
// taint key, or the start of one followed by a single trailing *, and none
// twice.
func validateLifecycleTaints(entries []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, e := range entries {
		ip := p.Index(i)
		t := lifecycleTaintOf(e)
		switch {
		case e == "":
			errs = append(errs, field.Invalid(ip, e, "must not be empty: a taint key (example.com/agent-not-ready) or a prefix ending in * (example.com/*)"))
			continue
		case t.Prefix && t.Key == "":
			errs = append(errs, field.Invalid(ip, e, "a lone * would make every taint a lifecycle taint: name a prefix (example.com/*)"))
			continue
		case strings.Contains(t.Key, "*"):
			errs = append(errs, field.Invalid(ip, e, "* may only end an entry, making it a prefix (example.com/*)"))
			continue
		}
		// A prefix must be the start of a key some taint can have.
		key := t.Key
		if t.Prefix {
			key += "x"
		}
		if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
			what := "not a valid taint key: "
			if t.Prefix {
				what = "no valid taint key starts with it: "
			}
			errs = append(errs, field.Invalid(ip, e, what+strings.Join(msgs, "; ")))
			continue
		}
		if seen[e] {
			errs = append(errs, field.Duplicate(ip, e))
		}
		seen[e] = true
	}
	return errs
}

// compileLifecycle returns the catalogue of the policy's lifecycleTaints, nil
// when it names none.
func compileLifecycle(entries []string) *coverage.Lifecycle {
	if len(entries) == 0 {
		return nil
	}
	taints := make([]coverage.LifecycleTaint, len(entries))
	for i, e := range entries {
		taints[i] = lifecycleTaintOf(e)
	}
	return coverage.NewLifecycle(taints)
}

// LifecycleTaints returns the policy's own lifecycle taints (its
// lifecycleTaints), nil when it names none. Predictions made through Env
// mark skips for them as they do for the built-in catalogue's.
func (p *Policy) LifecycleTaints() *coverage.Lifecycle { return p.lifecycle }
