package rules

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/dsguard/dsguard/policy"
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
