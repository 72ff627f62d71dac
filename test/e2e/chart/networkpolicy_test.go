package chart

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestInstallTimeLookups renders the chart against the API server (helm
// install --dry-run=server, so Helm's lookup sees the cluster) and checks
// what the chart learns there: with networkPolicy.webhookFromAPIServer the
// NetworkPolicy admits the addresses of Service default/kubernetes, and the
// notes name the fail-open namespaces, a well-known one only when it exists.
func TestInstallTimeLookups(t *testing.T) {
	const ns = "dsguard-lookups"
	mustKubectl(t, "", "create", "namespace", ns)
	t.Cleanup(func() { kubectl(t, "", "delete", "namespace", ns, "--wait=false") })
	kubectl(t, "", "create", "namespace", "rook-ceph") // it may exist (terminating) from an earlier test
	t.Cleanup(func() { kubectl(t, "", "delete", "namespace", "rook-ceph", "--wait=false") })

	var want []string
	for _, a := range strings.Fields(mustKubectl(t, "", "get", "endpointslices", "-n", "default", "-l", "kubernetes.io/service-name=kubernetes",
		"-o", "jsonpath={.items[*].endpoints[*].addresses[*]}")) {
		if strings.Contains(a, ":") {
			want = append(want, a+"/128")
		} else {
			want = append(want, a+"/32")
		}
	}
	if len(want) == 0 {
		t.Fatal("the API server published no EndpointSlice for Service default/kubernetes")
	}

	for _, h := range helms() {
		t.Run(h.name, func(t *testing.T) {
			r := helm(t, h, "install", "lookups", "charts/dsguard", "--namespace", ns, "--dry-run=server",
				"--set", "networkPolicy.webhookFromAPIServer=true", "--set", "tls.mode=selfManaged")
			if r.Err != nil {
				t.Fatal(r.Error())
			}
			var got []string
			for _, doc := range strings.Split(r.Stdout, "\n---\n") {
				if !strings.Contains(doc, "kind: NetworkPolicy") {
					continue
				}
				var np struct {
					Spec struct {
						Ingress []struct {
							Ports []struct{ Port any }
							From  []struct {
								IPBlock *struct{ CIDR string } `json:"ipBlock"`
							}
						}
					}
				}
				if err := yaml.Unmarshal([]byte(doc[strings.Index(doc, "apiVersion:"):]), &np); err != nil {
					t.Fatalf("NetworkPolicy: %v\n%s", err, doc)
				}
				for _, in := range np.Spec.Ingress {
					if len(in.Ports) == 1 && in.Ports[0].Port == "webhook" {
						for _, f := range in.From {
							if f.IPBlock != nil {
								got = append(got, f.IPBlock.CIDR)
							}
						}
					}
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("the webhook port admits %v, want the API server's addresses %v", got, want)
			}
			// The same lookup gives dsguard the API server's addresses,
			// whose calls keep their reserved share without client
			// authentication.
			args := regexp.MustCompile(`--api-server-addresses=(\S+)`).FindStringSubmatch(r.Stdout)
			var reserved []string
			if args != nil {
				for _, a := range strings.Split(args[1], ",") {
					reserved = append(reserved, a+map[bool]string{true: "/128", false: "/32"}[strings.Contains(a, ":")])
				}
			}
			slices.Sort(reserved)
			if !slices.Equal(reserved, want) {
				t.Errorf("dsguard's --api-server-addresses are %v, want the API server's addresses %v", reserved, want)
			}
			notes := r.Stdout[strings.Index(r.Stdout, "NOTES:"):]
			// Other tests may create other well-known namespaces (and leave
			// them terminating): rook-ceph, created here, must fail open, and
			// longhorn-system, which no test creates, must be left out.
			failOpen := regexp.MustCompile(`(?m)^\s*Fail-open namespaces.*\n\s*(.*)\.$`).FindStringSubmatch(notes)
			missing := regexp.MustCompile(`(?m)Not found at install, so judged like any other namespace: (.*)\.$`).FindStringSubmatch(notes)
			if failOpen == nil || missing == nil || !slices.Contains(strings.Split(failOpen[1], ", "), "kube-system") ||
				!slices.Contains(strings.Split(failOpen[1], ", "), "rook-ceph") || !slices.Contains(strings.Split(missing[1], ", "), "longhorn-system") {
				t.Errorf("the notes must name kube-system and rook-ceph as fail-open and the missing ones apart:\n%s", notes)
			}
		})
	}
}
