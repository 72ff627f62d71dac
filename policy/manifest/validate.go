package manifest

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateDaemonSet refuses what the API server would refuse before any
// webhook sees it, and what would make a verdict meaningless: a DaemonSet
// without a name, without a selector, or whose selector does not select its
// own Pods. Judging such a manifest would pass something that cannot be
// applied. Every problem is reported, with its field path.
func validateDaemonSet(ds *appsv1.DaemonSet) error {
	var errs field.ErrorList
	if ds.Name == "" && ds.GenerateName == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "name"), ""))
	}
	selPath := field.NewPath("spec", "selector")
	switch sel := ds.Spec.Selector; {
	case sel == nil:
		errs = append(errs, field.Required(selPath, "apps/v1 DaemonSets must name the labels of their Pods"))
	case len(sel.MatchLabels)+len(sel.MatchExpressions) == 0:
		errs = append(errs, field.Invalid(selPath, "{}", "empty selector is invalid for a DaemonSet"))
	default:
		selector, err := metav1.LabelSelectorAsSelector(sel)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(selPath, sel.String(), err.Error()))
		case !selector.Matches(labels.Set(ds.Spec.Template.Labels)):
			errs = append(errs, field.Invalid(field.NewPath("spec", "template", "metadata", "labels"),
				ds.Spec.Template.Labels, "`selector` does not match template `labels`"))
		}
	}
	return errs.ToAggregate()
}

// displayName names a DaemonSet in an error, also when it has no name.
func displayName(ds *appsv1.DaemonSet) string {
	name := ds.Name
	if name == "" {
		name = "<no name>"
	}
	if ds.Namespace != "" {
		return ds.Namespace + "/" + name
	}
	return name
}
