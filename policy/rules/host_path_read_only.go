package rules

import (
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/policy"
)

const hostPathReadOnlyID = "host-path-read-only"

// HostPathReadOnlyParams are the host-path-read-only parameters.
type HostPathReadOnlyParams struct {
	// AllowWritable lists host directories that may be mounted writable
	// (a CNI plugin writes /etc/cni/net.d). A path also allows what lies below it.
	AllowWritable []string `yaml:"allowWritable"`
}

// Validate implements policy.ParamValidator.
func (p *HostPathReadOnlyParams) Validate(fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, d := range p.AllowWritable {
		if !path.IsAbs(d) {
			errs = append(errs, field.Invalid(fp.Child("allowWritable").Index(i), d, "must be an absolute path"))
		}
	}
	return errs
}

func (p *HostPathReadOnlyParams) allows(hostPath string) bool {
	clean := path.Clean(hostPath)
	for _, d := range p.AllowWritable {
		d = path.Clean(d)
		if clean == d || d == "/" || strings.HasPrefix(clean, d+"/") {
			return true
		}
	}
	return false
}

var hostPathReadOnlyRule = policy.NewRule(policy.Rule{
	ID:    hostPathReadOnlyID,
	Title: "hostPath volumes are mounted read-only",
	Why: "A DaemonSet runs on every node, so a writable hostPath mount gives one image bug or one " +
		"compromised agent write access to the same host files on the whole fleet at once.",
	Remediation: "Set readOnly: true on every volumeMount of a hostPath volume, or list the directory in " +
		"the rule's allowWritable parameter when the agent must write there.",
	DefaultAction: policy.ActionWarn,
	Exemptible:    true,
	Params: []policy.ParamDoc{{
		Name: "allowWritable", Type: "list of absolute paths", Default: "[]",
		Description: "Host directories (and what lies below them) that may be mounted writable.",
	}},
}, nil, checkHostPathReadOnly)

func checkHostPathReadOnly(ds *appsv1.DaemonSet, _ *policy.Env, p *HostPathReadOnlyParams) []policy.Finding {
	spec := &ds.Spec.Template.Spec
	var out []policy.Finding
	for _, list := range containerLists {
		for i, c := range list.containers(spec) {
			for j := range c.VolumeMounts {
				m := &c.VolumeMounts[j]
				if m.ReadOnly {
					continue
				}
				hp := hostPathOf(spec.Volumes, m.Name)
				if hp == nil || p.allows(hp.Path) {
					continue
				}
				out = append(out, policy.Finding{
					Field: list.mountReadOnlyPath(i, j),
					Message: sprintf("%s %q mounts hostPath %s writable on every node it covers",
						list.noun(&c), c.Name, hp.Path),
					Remediation: sprintf("set readOnly: true on the %q mount of %s %q.", m.Name, list.noun(&c), c.Name),
				})
			}
		}
	}
	return out
}

func hostPathOf(volumes []corev1.Volume, name string) *corev1.HostPathVolumeSource {
	for i := range volumes {
		if volumes[i].Name == name {
			return volumes[i].HostPath
		}
	}
	return nil
}
