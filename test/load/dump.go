package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dsguard/dsguard/policy/manifest"
)

// dumpCommand writes what `kubectl get nodes,pods,priorityclasses -A -o
// yaml` (or -o json) prints for the harness's fleet with Pods bound to every node, for
// measuring `dsguard check --nodes` on a dump of that size.
const dumpCommand = "dump"

func runDump(args []string) error {
	fs := flag.NewFlagSet(dumpCommand, flag.ExitOnError)
	nodes := fs.Int("nodes", 65000, "Nodes in the dump")
	perNode := fs.Int("pods-per-node", 30, "Pods bound to each node")
	out := fs.String("o", "", "file to write (default standard output)")
	format := fs.String("format", "yaml", "yaml (kubectl get -o yaml) or json (kubectl get -o json)")
	as := fs.String("as", "kubectl", "kubectl (as -format says), api (the NodeList the API server returns: "+
		"one line of JSON, items without apiVersion and kind, managedFields kept) or stripped (nodes with names, labels and taints only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodes < 10 {
		return fmt.Errorf("-nodes must be at least 10")
	}
	if *as != "kubectl" && *perNode != 0 {
		return fmt.Errorf("-as %s writes nodes only: give -pods-per-node 0", *as)
	}
	w := io.Writer(os.Stdout)
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	f := newFleet(*nodes, 0)
	switch *as {
	case "api":
		return writeAPINodeList(w, f.nodes)
	case "stripped":
		lw, err := manifest.NewListWriter(w, *format)
		if err != nil {
			return err
		}
		for _, n := range f.nodes {
			stripped := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
				ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}, Spec: corev1.NodeSpec{Taints: n.Spec.Taints}}
			if err := lw.Write(stripped); err != nil {
				return err
			}
		}
		return lw.Close()
	case "kubectl":
	default:
		return fmt.Errorf("unknown -as %q (want kubectl, api or stripped)", *as)
	}
	lw, err := manifest.NewListWriter(w, *format)
	if err != nil {
		return err
	}
	for i, n := range f.nodes {
		if err := lw.Write(dumpNode(n, i)); err != nil {
			return err
		}
	}
	for _, pc := range dumpPriorityClasses() {
		if err := lw.Write(pc); err != nil {
			return err
		}
	}
	pod := 0
	for _, n := range f.nodes {
		for range *perNode {
			if err := lw.Write(dumpPod(pod, n.Name)); err != nil {
				return err
			}
			pod++
		}
	}
	return lw.Close()
}

var dumpEpoch = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// dumpNode is a Node as a cloud cluster's API server returns it: labels,
// addresses, capacity and allocatable, conditions, node info and the
// images the kubelet reports.
func dumpNode(n *corev1.Node, i int) *corev1.Node {
	node := n.DeepCopy()
	node.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
	node.UID = types.UID(fmt.Sprintf("6b1f6a2e-0000-4000-8000-%012d", i))
	node.ResourceVersion = fmt.Sprint(100000 + i)
	node.CreationTimestamp = metav1.NewTime(dumpEpoch)
	node.Annotations = map[string]string{
		"node.alpha.kubernetes.io/ttl":                           "0",
		"volumes.kubernetes.io/controller-managed-attach-detach": "true",
		"csi.volume.kubernetes.io/nodeid":                        fmt.Sprintf(`{"ebs.csi.aws.com":"i-%017x"}`, i),
	}
	node.Spec.PodCIDR = fmt.Sprintf("10.%d.%d.0/24", 64+i/65536%64, i/256%256)
	node.Spec.PodCIDRs = []string{node.Spec.PodCIDR}
	node.Spec.ProviderID = fmt.Sprintf("aws:///zone-a/i-%017x", i)
	res := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("8"),
		corev1.ResourceMemory:           resource.MustParse("32475712Ki"),
		corev1.ResourceEphemeralStorage: resource.MustParse("95551679124"),
		corev1.ResourcePods:             resource.MustParse("110"),
		"hugepages-1Gi":                 resource.MustParse("0"),
		"hugepages-2Mi":                 resource.MustParse("0"),
	}
	node.Status.Capacity = res
	alloc := res.DeepCopy()
	alloc[corev1.ResourceCPU] = resource.MustParse("7910m")
	alloc[corev1.ResourceMemory] = resource.MustParse("31458880Ki")
	node.Status.Allocatable = alloc
	beat := metav1.NewTime(dumpEpoch.Add(time.Hour))
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady} {
		status, reason := corev1.ConditionFalse, "KubeletHasSufficient"+string(c)
		if c == corev1.NodeReady {
			status, reason = corev1.ConditionTrue, "KubeletReady"
		}
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: c, Status: status,
			LastHeartbeatTime: beat, LastTransitionTime: metav1.NewTime(dumpEpoch), Reason: reason, Message: "kubelet is posting ready status"})
	}
	node.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.%d.%d", i/256%256, i%256)},
		{Type: corev1.NodeHostName, Address: n.Name},
		{Type: corev1.NodeInternalDNS, Address: n.Name + ".ec2.internal"},
	}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	node.Status.NodeInfo = corev1.NodeSystemInfo{MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("ec2%029x", i),
		BootID: fmt.Sprintf("%032x", i+1), KernelVersion: "6.1.112-124.190.amzn2023.x86_64", OSImage: "Amazon Linux 2023",
		ContainerRuntimeVersion: "containerd://1.7.22", KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64"}
	for j := range 12 {
		node.Status.Images = append(node.Status.Images, corev1.ContainerImage{
			Names: []string{fmt.Sprintf("registry.example.com/team-%d/image-%d@sha256:%064x", j%4, j, j),
				fmt.Sprintf("registry.example.com/team-%d/image-%d:v1.%d.0", j%4, j, j)},
			SizeBytes: int64(20_000_000 + j*1_000_000)})
	}
	return node
}

// writeAPINodeList writes nodes as the API server answers a LIST of them
// (kubectl get --raw /api/v1/nodes): one line of JSON, the List's kind
// before its items, the items without apiVersion and kind, and each Node
// with the managedFields that kubectl get leaves out.
func writeAPINodeList(w io.Writer, nodes []*corev1.Node) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	bw.WriteString(`{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1000000"},"items":[`)
	for i, n := range nodes {
		node := dumpNode(n, i)
		node.TypeMeta = metav1.TypeMeta{}
		node.ManagedFields = dumpManagedFields()
		b, err := json.Marshal(node)
		if err != nil {
			return err
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.Write(b)
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

// dumpManagedFields are the entries a cloud node carries: the kubelet's
// status, the node controller's podCIDR, the cloud controller's labels.
func dumpManagedFields() []metav1.ManagedFieldsEntry {
	at := metav1.NewTime(dumpEpoch)
	entry := func(manager, op, sub, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationType(op), APIVersion: "v1",
			Time: &at, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields), Subresource: sub}
	}
	return []metav1.ManagedFieldsEntry{
		entry("kubelet", "Update", "", `{"f:metadata":{"f:annotations":{".":{},"f:node.alpha.kubernetes.io/ttl":{},"f:volumes.kubernetes.io/controller-managed-attach-detach":{}},`+
			`"f:labels":{".":{},"f:beta.kubernetes.io/arch":{},"f:beta.kubernetes.io/os":{},"f:kubernetes.io/arch":{},"f:kubernetes.io/hostname":{},"f:kubernetes.io/os":{}}},"f:spec":{"f:providerID":{}}}`),
		entry("kube-controller-manager", "Update", "", `{"f:spec":{"f:podCIDR":{},"f:podCIDRs":{".":{},"v:\"10.64.0.0/24\"":{}}}}`),
		entry("kubelet", "Update", "status", `{"f:status":{"f:allocatable":{"f:cpu":{},"f:ephemeral-storage":{},"f:memory":{}},"f:capacity":{"f:cpu":{},"f:ephemeral-storage":{},"f:memory":{}},`+
			`"f:conditions":{"k:{\"type\":\"DiskPressure\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}},`+
			`"k:{\"type\":\"MemoryPressure\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}},`+
			`"k:{\"type\":\"PIDPressure\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}},`+
			`"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}}},"f:images":{},"f:nodeInfo":{"f:bootID":{},"f:machineID":{},"f:systemUUID":{}}}}`),
	}
}

// dumpPriorityClasses are those of a cluster with a priority for node
// agents and one for business workloads.
func dumpPriorityClasses() []*schedulingv1.PriorityClass {
	pc := func(name string, value int32) *schedulingv1.PriorityClass {
		return &schedulingv1.PriorityClass{TypeMeta: metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"},
			ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority)}
	}
	return []*schedulingv1.PriorityClass{pc("system-node-critical", 2000001000), pc("system-cluster-critical", 2000000000),
		pc("business-high", 100000), pc("batch-low", -10)}
}

// dumpPod is a running Pod of a ReplicaSet as the API server returns it
// (kubectl leaves out managedFields): two containers, the service account
// token volume, default tolerations, five conditions and container
// statuses. Its requests, priority and labels vary with i.
func dumpPod(i int, node string) *corev1.Pod {
	workload := fmt.Sprintf("workload-%d", i%200)
	start := metav1.NewTime(dumpEpoch.Add(time.Duration(i) * time.Second))
	priority := []int32{0, 0, 100000, -10}[i%4]
	className := []string{"", "", "business-high", "batch-low"}[i%4]
	container := func(name string, cpu, mem int64) corev1.Container {
		return corev1.Container{Name: name, Image: "registry.example.com/team/" + workload + ":v2.3.1",
			ImagePullPolicy: corev1.PullIfNotPresent,
			Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Env:             []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI), corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI)},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(2*mem, resource.BinarySI)}},
			VolumeMounts:             []corev1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		}
	}
	hash := fmt.Sprintf("%x", 0x5f7d8c9b6+i%200)
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%05x", workload, hash, i), GenerateName: workload + "-" + hash + "-",
			Namespace: fmt.Sprintf("team-%02d", i%200%40), UID: types.UID(fmt.Sprintf("9c4e2b1a-0000-4000-8000-%012d", i)),
			ResourceVersion: fmt.Sprint(500000 + i), CreationTimestamp: start,
			Labels:      map[string]string{"app.kubernetes.io/name": workload, "pod-template-hash": hash, "team": fmt.Sprintf("team-%02d", i%200%40)},
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-10-30T12:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: workload + "-" + hash,
				UID: types.UID(fmt.Sprintf("1d2c3b4a-0000-4000-8000-%012d", i%200)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{container("app", int64(50*(1+i%8)), int64(64<<20)*int64(1+i%4)), container("proxy", 10, 32<<20)},
			Volumes: []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](420),
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
						FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}}}}}}},
			DNSPolicy: corev1.DNSClusterFirst, EnableServiceLinks: ptr.To(true), NodeName: node,
			PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority), Priority: &priority, PriorityClassName: className,
			RestartPolicy: corev1.RestartPolicyAlways, SchedulerName: corev1.DefaultSchedulerName,
			SecurityContext: &corev1.PodSecurityContext{}, ServiceAccountName: "default", DeprecatedServiceAccount: "default",
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "10.0.0.1", HostIPs: []corev1.HostIP{{IP: "10.0.0.1"}},
			PodIP: fmt.Sprintf("10.%d.%d.%d", 64+i>>16&63, i>>8&255, i&255), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.%d.%d.%d", 64+i>>16&63, i>>8&255, i&255)}},
			QOSClass: corev1.PodQOSBurstable, StartTime: &start},
	}
	for _, c := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: start})
	}
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Ready: true, Started: ptr.To(true),
			Image: c.Image, ImageID: fmt.Sprintf("registry.example.com/team/%s@sha256:%064x", workload, i%200),
			ContainerID: fmt.Sprintf("containerd://%064x", i), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}})
	}
	return pod
}

// parseCommand reads a file with the decoder dsguard's manifest reader
// uses for it and builds nothing: the floor that dsguard check --nodes on
// the same file is compared with. JSON is read token by token with
// jsontext, as the reader streams it; YAML is split into documents and
// List items and converted to JSON by the reader itself, with no callback
// set, so nothing is decoded into objects.
const parseCommand = "parse"

func runParse(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: load parse FILE")
	}
	start := time.Now()
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	if first, err := br.Peek(1); err == nil && (first[0] == '{' || first[0] == '[') {
		dec := jsontext.NewDecoder(br)
		tokens := 0
		for {
			if _, err := dec.ReadToken(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return err
			}
			tokens++
		}
		fmt.Printf("parsed %d JSON tokens in %s\n", tokens, time.Since(start).Round(time.Millisecond))
		return nil
	}
	rd := &manifest.Reader{}
	rd.Decode(args[0], br)
	if len(rd.Errors) > 0 {
		return rd.Errors[0]
	}
	fmt.Printf("parsed %d objects in %s\n", rd.Objects, time.Since(start).Round(time.Millisecond))
	return nil
}
