package rules

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/celform"
)

const imagePinnedID = "image-pinned"

// ImagePinnedParams are the image-pinned parameters.
type ImagePinnedParams struct {
	// RequireDigest also flags images pinned by tag only.
	RequireDigest bool `yaml:"requireDigest"`
}

var imagePinnedRule = policy.NewRule(policy.Rule{
	ID:    imagePinnedID,
	Title: "Images are pinned to a version",
	Why: "Nodes pull images at different times. With :latest or no tag, nodes that joined or " +
		"restarted later run a different build than the rest, a rollout cannot tell old Pods from new, " +
		"and \"every node is ready\" no longer means \"every node runs the same agent\".",
	Remediation:   "Use an explicit version tag (image:v1.2.3) or a digest (image@sha256:...).",
	DefaultAction: policy.ActionWarn,
	Exemptible:    true,
	Params: []policy.ParamDoc{{
		Name: "requireDigest", Type: "boolean", Default: "false",
		Description: "Also flag images pinned by tag only; require a digest.",
	}},
	CEL:     imagePinnedCEL,
	CELGaps: celform.Gaps(),
}, nil, checkImagePinned)

func checkImagePinned(ds *appsv1.DaemonSet, _ *policy.Env, p *ImagePinnedParams) []policy.Finding {
	var out []policy.Finding
	for _, list := range containerLists {
		for i, c := range list.containers(&ds.Spec.Template.Spec) {
			problem := imagePinProblem(c.Image, p.RequireDigest)
			if problem == "" {
				continue
			}
			out = append(out, policy.Finding{
				Field:       list.fieldPath(i, fieldImage),
				Message:     sprintf("%s %q image %q %s: nodes may run different builds", list.noun(&c), c.Name, c.Image, problem),
				Remediation: sprintf("pin %s %q to a version tag or a digest.", list.noun(&c), c.Name),
			})
		}
	}
	return out
}

// imagePinProblem returns what is wrong with an image reference, or "".
// The tag is what follows the last colon after the last slash, so that a
// registry port (registry:5000/img) is not mistaken for a tag.
func imagePinProblem(image string, requireDigest bool) string {
	if image == "" || strings.Contains(image, "@") {
		return ""
	}
	tag := ""
	name := image[strings.LastIndexByte(image, '/')+1:]
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		tag = name[i+1:]
	}
	switch {
	case tag == "":
		return "has no tag (so :latest)"
	case tag == "latest":
		return "uses :latest"
	case requireDigest:
		return "is pinned by tag, not digest"
	}
	return ""
}

// imagePinnedCEL is the rule's CEL form.
func imagePinnedCEL(in policy.CELInput) []policy.CELCheck {
	requireDigest := celform.Params[ImagePinnedParams](in.Config, imagePinnedID).RequireDigest
	// The tag follows the last ':' after the last '/'; a registry port
	// (registry:5000/img) is no tag.
	problem := func(c string) string {
		unpinned := fmt.Sprintf(`!%[1]s.image.matches(':[^/:]+$') || %[1]s.image.matches(':latest$')`, c)
		if requireDigest {
			unpinned = "true"
		}
		return fmt.Sprintf("(%[1]s.image != '' && !%[1]s.image.contains('@') && (%[2]s))", c, unpinned)
	}
	var out []policy.CELCheck
	for _, l := range celform.ContainerLists {
		out = append(out, celform.ContainerCheck(imagePinnedID, l, ".image",
			func(c, _ string) string { return problem(c) },
			func(c string) string {
				// The tag is at the end: judge the last characters only.
				tail := celform.Truncated(c+".image", 128)
				return fmt.Sprintf(`'image "' + %[1]s + '" ' + (!%[1]s.matches(':[^/:]+$') ? 'has no tag (so :latest)' : %[1]s.matches(':latest$') ? 'uses :latest' : 'is pinned by tag, not digest') + ': nodes may run different builds'`, tail)
			},
			func(c string) string {
				return "'pin ' + " + celform.Noun(l, c) + " + ' \"' + " + c + ".name + '\" to a version tag or a digest.'"
			}))
	}
	return out
}
