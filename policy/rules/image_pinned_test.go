package rules

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/internal/testobj"
)

func TestCheckImagePinned(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("0123456789abcdef", 4)
	const (
		untagged = "has no tag (so :latest)"
		latest   = "uses :latest"
		byTag    = "is pinned by tag, not digest"
	)
	tests := []struct {
		image         string
		requireDigest bool
		want          string // the problem named in the message, "" for none
	}{
		{image: "img", want: untagged},
		{image: "img:latest", want: latest},
		{image: "img:v1.2.3"},
		{image: "docker.io/library/nginx", want: untagged},
		{image: "docker.io/library/nginx:1.27"},
		{image: "registry:5000/img", want: untagged},
		{image: "registry:5000/img:v1"},
		{image: "registry:5000/img:latest", want: latest},
		{image: "registry:5000/team/img", want: untagged},
		{image: "img" + digest},
		{image: "img:v1" + digest},
		{image: "registry:5000/img" + digest},
		{image: "img:v1", requireDigest: true, want: byTag},
		{image: "registry:5000/img:v1", requireDigest: true, want: byTag},
		{image: "img", requireDigest: true, want: untagged},
		{image: "img:latest", requireDigest: true, want: latest},
		{image: "img" + digest, requireDigest: true},
		{image: "registry:5000/img:v1" + digest, requireDigest: true},
	}
	for _, tt := range tests {
		name := tt.image
		if tt.requireDigest {
			name += " requireDigest"
		}
		t.Run(name, func(t *testing.T) {
			ds := testobj.DS(testobj.WithAgent(func(c *corev1.Container) { c.Image = tt.image }))
			var want []wantFinding
			if tt.want != "" {
				want = []wantFinding{{field: "spec.template.spec.containers[0].image",
					prefix: `container "agent" image "` + tt.image + `" ` + tt.want, msg: []string{"nodes may run different builds"}}}
			}
			assertFindings(t, checkImagePinned(ds, testEnv(), &ImagePinnedParams{RequireDigest: tt.requireDigest}), want)
		})
	}

	t.Run("every container list, init containers first", func(t *testing.T) {
		ds := testobj.DS(
			testobj.WithAgent(func(c *corev1.Container) { c.Image = "example/agent:latest" }),
			testobj.WithContainer(corev1.Container{Name: "exporter", Image: "example/exporter:v1"}),
			testobj.WithInitContainer(corev1.Container{Name: "setup", Image: "example/setup"}),
			testobj.WithInitContainer(testobj.Sidecar(corev1.Container{Name: "proxy", Image: "example/proxy:latest"})),
		)
		assertFindings(t, checkImagePinned(ds, testEnv(), &ImagePinnedParams{}), []wantFinding{
			{field: "spec.template.spec.initContainers[0].image", prefix: `init container "setup"`, msg: []string{untagged}},
			{field: "spec.template.spec.initContainers[1].image", prefix: `sidecar "proxy"`, msg: []string{latest}},
			{field: "spec.template.spec.containers[0].image", prefix: `container "agent"`, msg: []string{latest}},
		})
	})
}
