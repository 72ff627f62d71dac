// Command load is dsguard's load harness: it starts a real etcd and
// kube-apiserver, creates a fleet of Nodes (5,000 by default), runs `dsguard
// serve` and a no-op controller-runtime webhook side by side, and reports in
// one run what dsguard costs while the fleet churns:
//
//   - dsguard's CPU and RSS idle, under irrelevant Node updates (an annotation,
//     as kubelet heartbeats and controllers touch Nodes all day) at two rates,
//     and under relevant ones (a taint added or removed);
//   - how long a relevant node change takes to reach the admission verdict
//     and the auditor's Event;
//   - p50/p99 of DaemonSet creates through the API server with no webhook,
//     the no-op webhook and dsguard, interleaved, while DaemonSets and Nodes
//     churn;
//   - direct TLS throughput and p99 against both webhooks at 1, 16 and 64
//     concurrent requests.
//
// `make bench-load` runs it (NODES=65000 for the large fleet). It is a
// measurement, not a test: it fails only when something it drives breaks, and
// prints the targets beside the figures for a reader to judge. Run it on an
// otherwise idle machine; it prints the machine's load average at the start
// and the end, since every figure is relative to what else was running.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// options are the harness's knobs; the defaults are the scenario.
type options struct {
	nodes      int
	daemonSets int
	window     time.Duration
	creates    int
	direct     time.Duration
	probes     int
	out        string
	noopPort   int
	noopCerts  string
	dsguardBin string
	// memoryLimit is the container memory limit dsguard is told of, as
	// the chart passes limits.memory; 0 tells it nothing.
	memoryLimit int64
	// phases are the measurements to run (all by default).
	phases map[string]bool
	// profile, when set, is where CPU profiles of both webhooks under the
	// direct load are written.
	profile string
	// podsPerNode is how many Pods the Pod phase binds to each node.
	podsPerNode int
}

// The measurement phases, in the order they run.
const (
	phasePods    = "pods"
	phaseCPU     = "cpu"
	phaseVerdict = "verdict"
	phaseEvent   = "event"
	phaseCreates = "creates"
	phaseDirect  = "direct"
)

var allPhases = []string{phasePods, phaseCPU, phaseVerdict, phaseEvent, phaseCreates, phaseDirect}

func main() {
	// The no-op webhook and the node watcher run as child processes of the
	// harness itself, so that their CPU is apart from the load generator's.
	if len(os.Args) > 1 {
		run := map[string]func([]string) error{noopCommand: runNoop, nodeWatcherCommand: runNodeWatcher,
			podWatcherCommand: runPodWatcher, dumpCommand: runDump, parseCommand: runParse}[os.Args[1]]
		if run != nil {
			if err := run(os.Args[2:]); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[1], err)
				os.Exit(1)
			}
			return
		}
	}
	var o options
	flag.IntVar(&o.nodes, "nodes", 5000, "Nodes to create (65000 for the large fleet)")
	flag.IntVar(&o.podsPerNode, "pods-per-node", 10, "Pods the pods phase binds to each node (what dsguard's fit view holds), before the other phases")
	flag.IntVar(&o.daemonSets, "daemonsets", 100, "DaemonSets present in the cluster during the CPU phases")
	flag.DurationVar(&o.window, "window", 30*time.Second, "length of each CPU measurement phase")
	flag.IntVar(&o.creates, "creates", 1000, fmt.Sprintf("DaemonSet creates measured per webhook mode (those of every %d rounds are deleted again, untimed)", createBatch))
	flag.DurationVar(&o.direct, "direct", 5*time.Second, "length of each direct TLS load step")
	flag.IntVar(&o.probes, "probes", 5, "relevant node changes timed to the verdict and to the Event")
	flag.StringVar(&o.out, "o", "", "also write the report (Markdown) to this file")
	flag.StringVar(&o.dsguardBin, "dsguard", "", "dsguard binary to measure (default: build ./cmd/dsguard as the container image does, -tags "+framework.ImageBuildTags+")")
	flag.Int64Var(&o.memoryLimit, "memory-limit", 256<<20, "container memory limit in bytes dsguard is given as the chart gives it "+
		"(DSGUARD_MEMORY_LIMIT, from the chart's default limits.memory); 0 for none")
	phases := flag.String("phases", strings.Join(allPhases, ","), "measurements to run, comma-separated: "+strings.Join(allPhases, ", "))
	flag.StringVar(&o.profile, "profile", "", "write to this directory CPU profiles of dsguard and the no-op webhook under each direct load step "+
		"and of dsguard over the first 20 s of the creates, of dsguard and the bare Pod watcher in the Pod phase's windows, "+
		"and dsguard's heap profile at each moment of the memory table")
	flag.Parse()
	o.phases = map[string]bool{}
	for _, p := range strings.Split(*phases, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !slices.Contains(allPhases, p) {
			fmt.Fprintf(os.Stderr, "load: unknown phase %q in -phases (want some of %s)\n", p, strings.Join(allPhases, ", "))
			os.Exit(2)
		}
		o.phases[p] = true
	}
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			os.Exit(2)
		}
	}
	if o.nodes < 10 {
		fmt.Fprintln(os.Stderr, "load: -nodes must be at least 10")
		os.Exit(2)
	}

	// The harness reports for itself; controller-runtime's envtest would
	// otherwise print a stack trace because no logger was set.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		if errors.Is(err, context.Canceled) {
			err = errors.New("interrupted")
		}
		fmt.Fprintln(os.Stderr, "\nload:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, o options) (err error) {
	r := &report{opts: o, loadStart: loadAverage(), started: time.Now()}
	env, err := startEnvironment(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := env.stop(); err == nil {
			err = stopErr
		}
	}()
	r.setup = env.setup
	fleet := env.fleet

	// Let the start-up settle: the first audit pass, the caches' resync.
	if err := sleep(ctx, 2*settle); err != nil {
		return err
	}
	r.setup.rssSettled, _ = env.dsguard.rss()
	r.memory = append(r.memory, env.setup.memoryReady, env.memoryNow("settled", o.profile))
	r.floorMemory = env.floorMemoryNow()
	// The Pods first: every later phase then runs with them in the
	// cluster, as dsguard would in a real one.
	if o.phases[phasePods] {
		if err := measurePods(ctx, env, r); err != nil {
			return fmt.Errorf("pods phase: %w", err)
		}
	}
	if o.phases[phaseCPU] {
		if err := measureCPUPhases(ctx, env, fleet, r); err != nil {
			return fmt.Errorf("CPU phases: %w", err)
		}
	}
	// A later phase that fails (an API server too slow for its timeouts,
	// at 65,000 nodes on a small machine) is reported as such; the others
	// still run.
	for _, phase := range []struct {
		key, name string
		measure   func(context.Context, *environment, *report) error
	}{
		{phaseVerdict, "node change to verdict", measureChangeToVerdict},
		{phaseEvent, "node change to Event", measureChangeToEvent},
		{phaseCreates, "create latency", func(ctx context.Context, env *environment, r *report) error {
			return measureCreates(ctx, env, fleet, r)
		}},
		{phaseDirect, "direct TLS load", measureDirect},
	} {
		if !o.phases[phase.key] {
			continue
		}
		if err := phase.measure(ctx, env, r); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			logf("%s failed: %v", phase.name, err)
			r.failures = append(r.failures, phase.name+": "+err.Error())
		}
		r.memory = append(r.memory, env.memoryNow("after "+phase.name, o.profile))
	}
	r.peakRSS = env.dsguard.peakRSS()
	r.loadEnd = loadAverage()
	r.took = time.Since(r.started)
	return r.print(o.out)
}
