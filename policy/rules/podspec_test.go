package rules

import (
	"strconv"
	"testing"
)

// TestContainerPaths: cached and freshly built paths read the same, inside
// and beyond the cache.
func TestContainerPaths(t *testing.T) {
	for _, list := range containerLists {
		for _, i := range []int{0, cachedContainers - 1, cachedContainers, 12} {
			base := "spec.template.spec." + list.name + "[" + strconv.Itoa(i) + "]"
			for f, want := range map[containerField]string{
				fieldImage: base + ".image", fieldReadinessProbe: base + ".readinessProbe",
				fieldPrivileged: base + ".securityContext.privileged",
			} {
				if got := list.fieldPath(i, f).String(); got != want {
					t.Errorf("fieldPath(%d, %d) = %s, want %s", i, f, got, want)
				}
			}
			for _, j := range []int{0, cachedMounts - 1, cachedMounts, 20} {
				want := base + ".volumeMounts[" + strconv.Itoa(j) + "].readOnly"
				if got := list.mountReadOnlyPath(i, j).String(); got != want {
					t.Errorf("mountReadOnlyPath(%d, %d) = %s, want %s", i, j, got, want)
				}
			}
		}
	}
}
