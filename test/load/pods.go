package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dsguard/dsguard/clusterview"
	"github.com/dsguard/dsguard/test/e2e/framework"
)

// podWatcherCommand runs the harness binary as the floor of the Pod phase:
// a process that watches the Pods as dsguard's fit view does (the same
// lister-watcher and field selector, protobuf, a streamed list) and keeps
// nothing. What dsguard costs beside it under Pod status updates is what
// reducing each Pod to its record and comparing it adds.
const podWatcherCommand = "pod-watcher"

func runPodWatcher(args []string) error {
	fs := flag.NewFlagSet(podWatcherCommand, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the API server")
	pprofAddr := fs.String("pprof", "", "address of Go's profiling endpoints (none when empty)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	servePprof(*pprofAddr, podWatcherCommand)
	if *kubeconfig == "" {
		return errors.New("-kubeconfig is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cfg.DisableCompression = true
	client, err := kubernetes.NewForConfig(clusterview.NodeClientConfig(cfg))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	_, pods, _, _ := clusterview.FitListerWatchers(client)
	toolscache.NewReflectorWithOptions(pods, &corev1.Pod{}, discardStore{},
		toolscache.ReflectorOptions{Name: "pods"}).RunWithContext(ctx)
	return nil
}

// nsPods holds the Pods of the Pod phase; no webhook matches it.
const nsPods = "load-pods"

// podPhase is what the Pod phase measured.
type podPhase struct {
	pods    int
	created time.Duration
	// seen is how long after the last create dsguard's fit view held them
	// all.
	seen          time.Duration
	before, after memoryPoint
	// watcherRSS is the bare Pod watcher's RSS at rest with the Pods.
	watcherRSS int64
	load       paced
	use        usage
	// floor is the bare Pod watcher's use in the same window, nodeFloor
	// the Node watcher's (dsguard watches both).
	floor, nodeFloor usage
	// idle and idleFloor are dsguard's and the bare Pod watcher's use in a
	// window as long without updates, just before: what each spends with
	// nothing to do (dsguard's lease, certificate and audit timers), so
	// that the cost of the updates themselves can be told apart.
	idle, idleFloor usage
}

// measurePods creates podsPerNode Pods bound to each node (as the scheduler
// binds them: spec.nodeName), then measures what dsguard holds for them at
// rest and what 50 Pod status updates a second that change nothing it
// keeps (a status message) cost it, beside a bare Pod watcher.
func measurePods(ctx context.Context, env *environment, r *report) error {
	n := len(env.fleet.nodes) * r.opts.podsPerNode
	if n == 0 {
		return nil
	}
	ph := podPhase{pods: n, before: env.memoryNow("before the Pods", r.opts.profile)}
	watcherArgs := []string{podWatcherCommand, "--kubeconfig", env.kubeconfig}
	// With -profile the watcher is profiled beside dsguard in both
	// windows: what dsguard spends beyond it shows as the difference.
	var watcherPprof string
	if r.opts.profile != "" && env.dsguardPprof != "" {
		port, err := framework.FreePort()
		if err != nil {
			return err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		watcherArgs, watcherPprof = append(watcherArgs, "--pprof", addr), "http://"+addr
	}
	watcher, err := startProcess(env.dir, podWatcherCommand, nil, env.noopBin, watcherArgs...)
	if err != nil {
		return err
	}
	defer func() { _ = watcher.stop() }()
	if _, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsPods}},
		metav1.CreateOptions{}); err != nil {
		return err
	}
	logf("creating %d Pods, %d bound to each node", n, r.opts.podsPerNode)
	start := time.Now()
	if err := parallel(ctx, n, 64, func(ctx context.Context, i int) error {
		_, err := env.kube.CoreV1().Pods(nsPods).Create(ctx, loadPod(i, env.fleet.nodes[i%len(env.fleet.nodes)].Name),
			metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating Pods: %w", err)
	}
	ph.created = time.Since(start)
	logf("created %d Pods in %s (%.0f/s)", n, ph.created.Round(time.Second), float64(n)/ph.created.Seconds())
	start = time.Now()
	for {
		held, err := env.scrapeGauge("dsguard_fit_pods")
		if err != nil {
			return err
		}
		if int(held) >= n {
			break
		}
		if time.Since(start) > 5*time.Minute {
			return fmt.Errorf("dsguard's fit view holds %.0f of %d Pods after 5 minutes", held, n)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	ph.seen = time.Since(start)
	// At rest means after a collection: until then the heap still holds
	// the garbage of the creates (the Go runtime collects at least every
	// two minutes).
	if err := env.waitGC(ctx, 3*time.Minute); err != nil {
		return err
	}
	ph.after = env.memoryNow(fmt.Sprintf("at rest with %d Pods", n), r.opts.profile)
	ph.watcherRSS, _ = watcher.rss()

	logf("Pod phase: no updates for %s", r.opts.window)
	idleProfs := profileBoth(r.opts, env.dsguardPprof, watcherPprof, "idle")
	ph.idle, ph.idleFloor, err = idleUse(ctx, r.opts.window, env.dsguard, watcher)
	if err = errors.Join(err, idleProfs.wait()); err != nil {
		return err
	}
	logf("  dsguard %.2f %% of a core, a bare Pod watcher %.2f %%", ph.idle.cpu*100, ph.idleFloor.cpu*100)
	logf("Pod phase: 50 status updates/s for %s", r.opts.window)
	s, err := env.dsguard.sample()
	if err != nil {
		return err
	}
	fs, err := watcher.sample()
	if err != nil {
		_, _ = s.done()
		return err
	}
	ns, err := env.nodeWatcher.sample()
	if err != nil {
		_, _ = s.done()
		_, _ = fs.done()
		return err
	}
	profs := profileBoth(r.opts, env.dsguardPprof, watcherPprof, "pod-updates")
	ph.load = pace(ctx, 50, r.opts.window, 64, func(ctx context.Context, i int) error {
		patch := fmt.Sprintf(`{"status":{"message":"probe %d"}}`, i)
		_, err := env.kube.CoreV1().Pods(nsPods).Patch(ctx, fmt.Sprintf("p-%d", i%n), types.MergePatchType,
			[]byte(patch), metav1.PatchOptions{}, "status")
		return err
	})
	var uerr, ferr, nerr error
	ph.use, uerr = s.done()
	ph.floor, ferr = fs.done()
	ph.nodeFloor, nerr = ns.done()
	uerr = errors.Join(uerr, profs.wait())
	if err := errors.Join(ctx.Err(), uerr, ferr, nerr); err != nil {
		return err
	}
	if ph.load.failed > 0 {
		logf("  %d of %d updates failed, first: %v", ph.load.failed, ph.load.done+ph.load.failed, ph.load.firstErr)
	}
	logf("  dsguard %.2f %% of a core, a bare Pod watcher %.2f %%, the Node watcher %.2f %%; %.1f updates/s achieved",
		ph.use.cpu*100, ph.floor.cpu*100, ph.nodeFloor.cpu*100, ph.load.rate)
	r.pods = &ph
	return nil
}

// profiles are CPU profiles taken side by side.
type profiles []*profiler

// profileBoth profiles dsguard and the bare Pod watcher for the next
// window, into dsguard-WHAT.pprof and pod-watcher-WHAT.pprof, when the
// run profiles (an empty URL is a process not profiled).
func profileBoth(o options, dsguardURL, watcherURL, what string) profiles {
	var ps profiles
	if o.profile == "" {
		return nil
	}
	for _, p := range []struct{ url, name string }{{dsguardURL, "dsguard"}, {watcherURL, podWatcherCommand}} {
		if p.url != "" {
			pr := &profiler{url: p.url, path: filepath.Join(o.profile, p.name+"-"+what+".pprof")}
			pr.start(o.window)
			ps = append(ps, pr)
		}
	}
	return ps
}

func (ps profiles) wait() error {
	var err error
	for _, p := range ps {
		err = errors.Join(err, p.wait())
	}
	return err
}

// idleUse measures two processes side by side for window, with nothing
// asked of them.
func idleUse(ctx context.Context, window time.Duration, a, b *process) (usage, usage, error) {
	sa, err := a.sample()
	if err != nil {
		return usage{}, usage{}, err
	}
	sb, err := b.sample()
	if err != nil {
		_, _ = sa.done()
		return usage{}, usage{}, err
	}
	werr := sleep(ctx, window)
	ua, aerr := sa.done()
	ub, berr := sb.done()
	return ua, ub, errors.Join(werr, aerr, berr)
}

// loadPod is the i-th Pod of the phase: one container with a request that
// varies, a label from a few, on node.
func loadPod(i int, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: nsPods,
			Labels: map[string]string{"app": fmt.Sprintf("workload-%d", i%20)}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(50*(1+i%8)), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(int64(64<<20)*int64(1+i%4), resource.BinarySI),
			}}}}},
	}
}

// waitGC waits until dsguard's Go runtime has completed a collection that
// started after this call, at most limit.
func (e *environment) waitGC(ctx context.Context, limit time.Duration) error {
	before, err := e.scrapeGauge("go_gc_duration_seconds_count")
	if err != nil {
		return err
	}
	start := time.Now()
	for {
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
		// The first count may have caught a collection already under way.
		n, err := e.scrapeGauge("go_gc_duration_seconds_count")
		if err != nil {
			return err
		}
		if n >= before+2 || n > before && time.Since(start) > 10*time.Second {
			logf("  dsguard's Go runtime collected %.0f times in %s", n-before, time.Since(start).Round(time.Second))
			return nil
		}
		if time.Since(start) > limit {
			return fmt.Errorf("no collection in dsguard within %s", limit)
		}
	}
}

// scrapeGauge returns the sum of a metric on dsguard's metrics endpoint.
func (e *environment) scrapeGauge(name string) (float64, error) {
	req, err := http.NewRequest(http.MethodGet, e.metricsURL, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+e.metricsToken)
	resp, err := e.metricsClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scraping %s: HTTP %d", e.metricsURL, resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return framework.SumMetric(body, name)
}

// writePods prints the Pod phase.
func (r *report) writePods(w io.Writer) {
	p := r.pods
	fmt.Fprintf(w, "### Pods: %d bound, %d per node\n\n", p.pods, r.opts.podsPerNode)
	fmt.Fprintf(w, "- created in %s (%.0f/s); dsguard's fit view held them all %s after the last create\n",
		p.created.Round(time.Second), float64(p.pods)/p.created.Seconds(), p.seen.Round(10*time.Millisecond))
	perPod := func(a, b int64) string { return fmt.Sprintf("%.0f B", float64(b-a)/float64(p.pods)) }
	fmt.Fprintf(w, "- dsguard at rest: RSS %s before the Pods, %s with them (target ≤ 128 MiB at 5,000 nodes and 50,000 Pods); "+
		"per Pod: RSS %s, anonymous memory %s, Go heap in use %s (so 30 Pods per node on 5,000 nodes would add about %s of heap)\n",
		mib(p.before.rss), mib(p.after.rss), perPod(p.before.rss, p.after.rss), perPod(p.before.anon, p.after.anon),
		perPod(p.before.heap.inuse, p.after.heap.inuse),
		mib((p.after.heap.inuse-p.before.heap.inuse)*int64(30*5000)/int64(p.pods)))
	fmt.Fprintf(w, "- the bare Pod watcher (keeps nothing) at rest: RSS %s\n", mib(p.watcherRSS))
	fmt.Fprintf(w, "- under %.1f Pod status updates/s (a status message: no request, port, label or priority changes), %s each: "+
		"dsguard %.2f %% of a core, the bare Pod watcher %.2f %% (%s; target ≤ 1.2×), the Node watcher %.2f %% "+
		"(dsguard watches the Nodes too: against both watchers together, %s)\n",
		p.load.rate, r.opts.window, p.use.cpu*100, p.floor.cpu*100, ratio(p.use.cpu, p.floor.cpu), p.nodeFloor.cpu*100,
		ratio(p.use.cpu, p.floor.cpu+p.nodeFloor.cpu))
	fmt.Fprintf(w, "- without updates, %s just before: dsguard %.2f %% of a core, the bare Pod watcher %.2f %%; "+
		"so the updates themselves cost dsguard %.2f points and the watcher %.2f (%s)\n\n",
		r.opts.window, p.idle.cpu*100, p.idleFloor.cpu*100, (p.use.cpu-p.idle.cpu)*100, (p.floor.cpu-p.idleFloor.cpu)*100,
		ratio(p.use.cpu-p.idle.cpu, p.floor.cpu-p.idleFloor.cpu))
}
