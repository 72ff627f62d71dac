package clusterview

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/internal/testobj"
)

// fullNodes are testobj.CloudNodes as the API server sends them: about 20
// labels (the fleet's dozen, a node group's, an instance ID per node),
// annotations, managed fields and a status with conditions and images.
func fullNodes(n int) []*corev1.Node {
	nodes := testobj.CloudNodes(n)
	for i, node := range nodes {
		pool := node.Labels["cloud.example.com/node-pool"]
		zone := node.Labels[corev1.LabelTopologyZone]
		for k, v := range map[string]string{
			"eks.amazonaws.com/nodegroup":       pool,
			"eks.amazonaws.com/capacityType":    "ON_DEMAND",
			"eks.amazonaws.com/nodegroup-image": "ami-0a1b2c3d4e5f60718",
			"node.kubernetes.io/lifecycle":      "normal",
			"topology.ebs.csi.aws.com/zone":     zone,
			"k8s.io/cloud-provider-aws":         "4c4f3b1d2e0a9f8e7d6c5b4a39281706",
			"example.com/team":                  "platform",
			"example.com/instance-id":           fmt.Sprintf("i-%017x", i),
		} {
			node.Labels[k] = v
		}
		node.Annotations = map[string]string{
			"alpha.kubernetes.io/provided-node-ip":                   "10.0.0.1",
			"csi.volume.kubernetes.io/nodeid":                        `{"ebs.csi.aws.com":"i-0123456789abcdef0"}`,
			"node.alpha.kubernetes.io/ttl":                           "0",
			"volumes.kubernetes.io/controller-managed-attach-detach": "true",
		}
		node.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1"},
			{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1"}}
		node.Spec.PodCIDR = "10.244.0.0/24"
		node.Spec.ProviderID = "aws:///" + zone + "/i-0123456789abcdef0"
		for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady} {
			node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: c, Status: corev1.ConditionFalse,
				Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"})
		}
		for j := range 8 {
			node.Status.Images = append(node.Status.Images, corev1.ContainerImage{
				Names: []string{fmt.Sprintf("registry.example.com/team/image-%d@sha256:%064x", j, j), fmt.Sprintf("registry.example.com/team/image-%d:v1.2.%d", j, j)}, SizeBytes: 1 << 27})
		}
		node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")}
		node.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Amazon Linux 2023", ContainerRuntimeVersion: "containerd://2.1.0"}
	}
	return nodes
}

// BenchmarkNodeViewHeap reports the heap a running dsguard holds for its
// nodes, per node, at 5,000 and 65,000 realistic nodes, each decoded from
// JSON on its own as a list hands them over (no two share a string):
// "informer-cache+set" is how the view was kept before, a node informer's
// store of nodes stripped as its transform stripped them (name, uid,
// resourceVersion, labels, taints) plus the node set built from them;
// "reflector-store" is the view as it is kept now, the node set alone, fed
// by the reflector's store. It measures memory: ns/op is suppressed.
func BenchmarkNodeViewHeap(b *testing.B) {
	for _, n := range []int{5000, 65000} {
		encoded := make([][]byte, n)
		for i, node := range fullNodes(n) {
			var err error
			if encoded[i], err = json.Marshal(node); err != nil {
				b.Fatal(err)
			}
		}
		decode := func(i int) *corev1.Node {
			node := &corev1.Node{}
			if err := json.Unmarshal(encoded[i], node); err != nil {
				b.Fatal(err)
			}
			return node
		}
		b.Run(fmt.Sprintf("nodes=%d/informer-cache+set", n), func(b *testing.B) {
			var perNode float64
			for b.Loop() {
				before := testobj.LiveHeap()
				store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
				cached := make([]*corev1.Node, n)
				for i := range encoded {
					full := decode(i)
					node := coverage.StripNode(full)
					node.UID, node.ResourceVersion = full.UID, full.ResourceVersion
					if err := store.Add(node); err != nil {
						b.Fatal(err)
					}
					cached[i] = node
				}
				set := coverage.NewNodeSet(cached)
				cached = nil
				after := testobj.LiveHeap()
				runtime.KeepAlive(store)
				runtime.KeepAlive(set)
				perNode += float64(int64(after)-int64(before)) / float64(n)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(perNode/float64(b.N), "B/node")
		})
		b.Run(fmt.Sprintf("nodes=%d/reflector-store", n), func(b *testing.B) {
			var perNode float64
			for b.Loop() {
				before := testobj.LiveHeap()
				v := &NodeView{Log: logr.Discard()}
				list := make([]any, n)
				for i := range encoded {
					list[i] = decode(i)
				}
				if err := (nodeStore{v}).Replace(list, "1"); err != nil {
					b.Fatal(err)
				}
				list = nil
				after := testobj.LiveHeap()
				runtime.KeepAlive(v)
				perNode += float64(int64(after)-int64(before)) / float64(n)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(perNode/float64(b.N), "B/node")
		})
	}
}
