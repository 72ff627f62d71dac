package rules

import (
	"fmt"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/celform"
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

// Loosened implements policy.ParamLoosener: a directory added to
// allowWritable may be mounted writable unwarned.
func (p *HostPathReadOnlyParams) Loosened(old any) []string {
	o, ok := old.(*HostPathReadOnlyParams)
	if !ok {
		return nil
	}
	var out []string
	for _, d := range p.AllowWritable {
		if !o.allows(d) {
			out = append(out, "allowWritable adds "+d+": DaemonSets may mount it writable without a finding")
		}
	}
	return out
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
	CEL:     hostPathReadOnlyCEL,
	CELGaps: celform.Gaps("hostPath and allowWritable paths are compared as written, without cleaning '..' or '//'"),
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

// hostPathReadOnlyCEL is the rule's CEL form.
func hostPathReadOnlyCEL(in policy.CELInput) []policy.CELCheck {
	p := celform.Params[HostPathReadOnlyParams](in.Config, hostPathReadOnlyID)
	allowed := func(path string) string {
		var parts []string
		for _, d := range p.AllowWritable {
			d = strings.TrimSuffix(d, "/")
			if d == "" {
				return "true"
			}
			parts = append(parts, fmt.Sprintf("%[1]s == %[2]s || %[1]s == %[3]s || %[1]s.startsWith(%[3]s)", path, celform.Lit(d), celform.Lit(d+"/")))
		}
		if len(parts) == 0 {
			return "false"
		}
		return "(" + strings.Join(parts, " || ") + ")"
	}
	// The writable hostPath volumes as maps from name to path, built once
	// per object, so that judging a mount costs a few lookups, not a scan of
	// the volumes (quadratic in the object's size). A map entry costs about
	// 40 units to build; each map takes a slice of the volumes by index, so
	// that no single variable nears the per-expression limit on the largest
	// DaemonSet the API accepts.
	chunkVar := func(o string, i int) string { return fmt.Sprintf("%sWritableHostPaths%d", o, i) }
	var vars [][2]string
	for _, o := range []string{"object", "oldObject"} {
		s := celform.PodSpec(o)
		for i := range hostPathChunks {
			vars = append(vars, [2]string{chunkVar(o, i), fmt.Sprintf(
				"has(%[1]s.volumes) ? %[1]s.volumes.transformMapEntry(i, v, i >= %[2]d && i < %[3]d && has(v.hostPath) && !%[4]s, {v.name: v.hostPath.path}) : {}",
				s, i*hostPathChunk, (i+1)*hostPathChunk, allowed("v.hostPath.path"))})
		}
	}
	// lookup is the path of a writable hostPath volume named name, for messages.
	lookup := func(o, name string) string {
		expr := "''"
		for i := hostPathChunks - 1; i >= 0; i-- {
			expr = fmt.Sprintf("%[1]s in variables.%[2]s ? variables.%[2]s[%[1]s] : %[3]s", name, chunkVar(o, i), expr)
		}
		return "(" + expr + ")"
	}
	writableHostPath := func(m, o string) string {
		var in []string
		for i := range hostPathChunks {
			in = append(in, fmt.Sprintf("%s.name in variables.%s", m, chunkVar(o, i)))
		}
		return fmt.Sprintf("(!(has(%[1]s.readOnly) && %[1]s.readOnly) && (%[2]s))", m, strings.Join(in, " || "))
	}
	var out []policy.CELCheck
	for _, l := range celform.ContainerLists {
		list := "spec.template.spec." + l
		// The first offending container and mount, each bound once (see
		// celform.ContainerCheck). The message reads only the first
		// HostPathMessageItems containers and mounts of each: judging a
		// mount costs up to eight lookups, and the message must stay under
		// the per-expression cost limit however many there are.
		body := fmt.Sprintf("'[host-path-read-only] %s[].volumeMounts[].readOnly: ' + %s + ' \"' + c.name + '\" mounts hostPath ' + %s + ' writable on every node it covers; fix: set readOnly: true on the \"' + m.name + '\" mount of ' + %s + ' \"' + c.name + '\".'",
			list, celform.Noun(l, "c"), celform.Truncated(lookup("object", "m.name"), 128), celform.Noun(l, "c"))
		beyond := fmt.Sprintf("'[host-path-read-only] %s[].volumeMounts[].readOnly: a container mounts a hostPath writable on every node it covers "+
			"(this message reads the first %d containers and their first %d mounts); fix: set readOnly: true on every hostPath mount outside the writable paths the policy allows.'",
			list, HostPathMessageItems, HostPathMessageItems)
		offends := fmt.Sprintf("j < %d && %s", HostPathMessageItems, writableHostPath("m", "object"))
		msg := fmt.Sprintf("[object.%[1]s.transformList(i, c, i < %[2]d && has(c.volumeMounts) && c.volumeMounts.exists(j, m, %[3]s), c)].map(cs, size(cs) == 0 ? %[4]s : "+
			"[cs[0]].map(c, [c.volumeMounts.transformList(j, m, %[3]s, m)[0]].map(m, %[5]s)[0])[0])[0]",
			list, HostPathMessageItems, offends, beyond, body)
		chk := celform.PerItem(policy.ActionDeny, []string{list, "volumeMounts"}, writableHostPath, msg)
		chk.Variables = vars
		out = append(out, chk)
	}
	return out
}

// hostPathChunks maps of hostPathChunk volumes each cover more hostPath
// volumes than a 3 MiB request can hold (each takes at least 40 bytes).
const (
	hostPathChunk  = 12500
	hostPathChunks = 8
)

// HostPathMessageItems is how many containers, and mounts of each, the
// host-path-read-only message reads to name the first offender.
const HostPathMessageItems = 1000
