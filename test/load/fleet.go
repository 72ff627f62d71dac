package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

const (
	controlPlaneTaint = "node-role.kubernetes.io/control-plane"
	poolLabel         = "cloud.example.com/node-pool"
	// probeLabel marks the few nodes whose taints the harness flips to time
	// a change through to the verdict and the Event.
	probeLabel = "load.dsguard.io/probe"
	// relevantTaint is what the relevant node updates add and remove.
	relevantTaint = "load.dsguard.io/relevant"
	// heartbeatAnnotation is what the irrelevant node updates change.
	heartbeatAnnotation = "load.dsguard.io/heartbeat"
)

type pool struct {
	name, instanceType, arch, os string
	zones                        []string
	taint                        string
	// share is the pool's part of the workers, in thousandths.
	share int
	// cpu, memory and pods are what a node of the pool offers
	// (status.allocatable), as a kubelet of that instance type reports
	// it: the webhook weighs resource fit at every DaemonSet create.
	cpu, memory string
	pods        int
	gpus        int
}

var zones = []string{"zone-a", "zone-b", "zone-c"}

// pools shape the fleet like a large cloud cluster: node pools of zone ×
// instance type, a few tainted ones, and three control-plane nodes.
var pools = []pool{
	{name: "general", instanceType: "m6i.2xlarge", arch: "amd64", os: "linux", zones: zones, share: 500, cpu: "7910m", memory: "31196Mi", pods: 58},
	{name: "compute", instanceType: "c6i.4xlarge", arch: "amd64", os: "linux", zones: zones, share: 150, cpu: "15890m", memory: "30232Mi", pods: 234},
	{name: "memory", instanceType: "r6i.4xlarge", arch: "amd64", os: "linux", zones: zones, share: 100, cpu: "15890m", memory: "124564Mi", pods: 234},
	{name: "arm", instanceType: "m7g.4xlarge", arch: "arm64", os: "linux", zones: zones, share: 120, cpu: "15890m", memory: "61464Mi", pods: 234},
	{name: "gpu", instanceType: "g5.2xlarge", arch: "amd64", os: "linux", zones: zones[:2], share: 60, taint: "nvidia.com/gpu", cpu: "7910m", memory: "30232Mi", pods: 58, gpus: 1},
	{name: "infra", instanceType: "m6i.xlarge", arch: "amd64", os: "linux", zones: zones[:1], share: 40, taint: "dedicated", cpu: "3920m", memory: "15048Mi", pods: 58},
	{name: "windows", instanceType: "m6i.2xlarge", arch: "amd64", os: "windows", zones: zones[2:], share: 30, taint: "os", cpu: "7910m", memory: "31196Mi", pods: 58},
}

// fleet is the Nodes of the run.
type fleet struct {
	nodes []*corev1.Node
	// general are untainted workers, the targets of relevant updates.
	general []string
	// verdictProbe is the one node the verdict probe DaemonSet selects;
	// eventProbes[i] are the two nodes the i-th Event probe selects.
	verdictProbe string
	eventProbes  [][2]string
	classes      int
}

func newFleet(n, probes int) *fleet {
	f := &fleet{}
	classes := map[string]bool{}
	add := func(name string, p pool, zone string, extra map[string]string) *corev1.Node {
		labels := map[string]string{
			corev1.LabelHostname: name, corev1.LabelOSStable: p.os, corev1.LabelArchStable: p.arch,
			"beta.kubernetes.io/os": p.os, "beta.kubernetes.io/arch": p.arch,
			corev1.LabelInstanceTypeStable: p.instanceType, "beta.kubernetes.io/instance-type": p.instanceType,
			corev1.LabelTopologyRegion: "region-1", corev1.LabelTopologyZone: zone, poolLabel: p.name,
		}
		for k, v := range extra {
			labels[k] = v
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(p.cpu),
			corev1.ResourceMemory: resource.MustParse(p.memory), corev1.ResourcePods: *resource.NewQuantity(int64(p.pods), resource.DecimalSI)}
		if p.gpus > 0 {
			node.Status.Allocatable["nvidia.com/gpu"] = *resource.NewQuantity(int64(p.gpus), resource.DecimalSI)
		}
		node.Status.Capacity = node.Status.Allocatable
		if p.taint != "" {
			node.Spec.Taints = []corev1.Taint{{Key: p.taint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		}
		f.nodes = append(f.nodes, node)
		classes[fmt.Sprint(p.name, zone, p.taint, extra)] = true
		return node
	}
	cp := pool{name: "control-plane", instanceType: "m6i.2xlarge", arch: "amd64", os: "linux", taint: controlPlaneTaint,
		cpu: "7910m", memory: "31196Mi", pods: 58}
	for i := range 3 {
		add(fmt.Sprintf("cp-%d", i), cp, zones[i], map[string]string{controlPlaneTaint: ""})
	}
	f.verdictProbe = "probe-verdict"
	add(f.verdictProbe, pools[0], zones[0], map[string]string{probeLabel: "verdict"})
	for i := range probes {
		var pair [2]string
		for j, suffix := range []string{"a", "b"} {
			pair[j] = fmt.Sprintf("probe-event-%d-%s", i, suffix)
			add(pair[j], pools[0], zones[0], map[string]string{probeLabel: fmt.Sprintf("event-%d", i)})
		}
		f.eventProbes = append(f.eventProbes, pair)
	}
	workers := n - len(f.nodes)
	made := 0
	for pi, p := range pools {
		count := workers * p.share / 1000
		if pi == len(pools)-1 {
			count = workers - made
		}
		for i := range count {
			name := fmt.Sprintf("node-%05d", made)
			made++
			add(name, p, p.zones[i%len(p.zones)], nil)
			if p.taint == "" && p.name == "general" {
				f.general = append(f.general, name)
			}
		}
	}
	f.classes = len(classes)
	return f
}

func (f *fleet) create(ctx context.Context, kube *kubernetes.Clientset) error {
	return parallel(ctx, len(f.nodes), 32, func(ctx context.Context, i int) error {
		_, err := kube.CoreV1().Nodes().Create(ctx, f.nodes[i], metav1.CreateOptions{})
		return err
	})
}

// heartbeat changes an annotation of a node: an update the prediction
// cannot see, like kubelet's and controllers' writes all day.
func heartbeat(ctx context.Context, kube *kubernetes.Clientset, node string, i int) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, heartbeatAnnotation, i)
	_, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// setTaint sets or clears relevantTaint on an untainted node.
func setTaint(ctx context.Context, kube *kubernetes.Clientset, node, key string, on bool) error {
	patch := `{"spec":{"taints":null}}`
	if on {
		patch = fmt.Sprintf(`{"spec":{"taints":[{"key":%q,"value":"true","effect":"NoSchedule"}]}}`, key)
	}
	_, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// irrelevantUpdates returns a paced job that patches heartbeats round the
// fleet.
func (f *fleet) irrelevantUpdates(kube *kubernetes.Clientset) func(context.Context, int) error {
	return func(ctx context.Context, i int) error {
		return heartbeat(ctx, kube, f.nodes[(i*7919)%len(f.nodes)].Name, i)
	}
}

// relevantUpdates returns a paced job that taints a general node and, on
// the next call, lifts the taint again, moving round the pool. Calls i and
// i+1 touch the same node, so they must not run at once: a mutex orders them.
func (f *fleet) relevantUpdates(kube *kubernetes.Clientset) (job func(context.Context, int) error, cleanup func(context.Context) error) {
	var mu sync.Mutex
	tainted := map[string]bool{}
	job = func(ctx context.Context, i int) error {
		node := f.general[(i/2)%len(f.general)]
		mu.Lock()
		defer mu.Unlock()
		on := !tainted[node]
		if err := setTaint(ctx, kube, node, relevantTaint, on); err != nil {
			return err
		}
		tainted[node] = on
		return nil
	}
	cleanup = func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		for node, on := range tainted {
			if on {
				if err := setTaint(ctx, kube, node, relevantTaint, false); err != nil {
					return err
				}
				tainted[node] = false
			}
		}
		return nil
	}
	return job, cleanup
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func parallel(ctx context.Context, n, workers int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// paced is the outcome of a paced load.
type paced struct {
	done, failed, missed int
	rate                 float64
	firstErr             error
}

// pace calls job at rate per second for d (or until ctx ends), on up to
// workers goroutines. Calls that cannot start because every worker is busy
// are counted as missed, not queued, so the achieved rate is honest.
func pace(ctx context.Context, rate float64, d time.Duration, workers int, job func(context.Context, int) error) paced {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	deadline, _ := ctx.Deadline()
	jobs := make(chan int, workers)
	var done, failed atomic.Int64
	var errOnce sync.Once
	var firstErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if err := job(ctx, i); err != nil {
					if ctx.Err() != nil || time.Until(deadline) < time.Second {
						continue // cut off by the end of the window
					}
					failed.Add(1)
					errOnce.Do(func() { firstErr = err })
					continue
				}
				done.Add(1)
			}
		})
	}
	start := time.Now()
	issued, missed := 0, 0
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
		}
		due := int(time.Since(start).Seconds() * rate)
		for ; issued < due; issued++ {
			select {
			case jobs <- issued:
			default:
				missed++
			}
		}
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	return paced{done: int(done.Load()), failed: int(failed.Load()), missed: missed,
		rate: float64(done.Load()) / elapsed.Seconds(), firstErr: firstErr}
}

func intstrPort(p int) intstr.IntOrString { return intstr.FromInt32(int32(p)) }
