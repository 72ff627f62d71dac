package vaptest

import "testing"

// TestGenerate_NoTwoContainersShareAHostPort: the API server refuses a Pod
// whose containers share a host port (under hostNetwork a container port
// without one is one), and a refused DaemonSet gives the differential no
// verdict to compare.
func TestGenerate_NoTwoContainersShareAHostPort(t *testing.T) {
	withPorts := 0
	for seed := range uint64(200) {
		for _, ds := range Generate(seed, 100) {
			spec := &ds.Spec.Template.Spec
			held := map[int32]string{}
			for _, c := range append(append(spec.InitContainers[:0:0], spec.InitContainers...), spec.Containers...) {
				for _, p := range c.Ports {
					port := p.HostPort
					if port == 0 && spec.HostNetwork {
						port = p.ContainerPort
					}
					if port == 0 {
						continue
					}
					withPorts++
					if other, ok := held[port]; ok {
						t.Fatalf("seed %d, %s: containers %s and %s both hold host port %d", seed, ds.Name, other, c.Name, port)
					}
					held[port] = c.Name
				}
			}
		}
	}
	if withPorts < 1000 {
		t.Errorf("only %d host ports in 20,000 DaemonSets: the generator no longer draws them", withPorts)
	}
}
