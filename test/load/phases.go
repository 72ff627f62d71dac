package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// probeTaint is what the verdict and Event probes put on their nodes.
const probeTaint = "load.dsguard.io/probe"

// settle is the pause between phases, so that one phase's backlog does not
// count in the next one.
const settle = 5 * time.Second

// cpuPhase is dsguard's cost under one kind of node churn.
type cpuPhase struct {
	name   string
	target string
	rate   float64
	load   paced
	use    usage
	// floor is the node watcher's use in the same window.
	floor usage
	// nodeEntry, for the phase with the chart's Node entry installed: how
	// often the API server called it, and how often its match conditions
	// left an update out.
	nodeEntry *struct{ calls, excluded float64 }
}

func measureCPUPhases(ctx context.Context, env *environment, f *fleet, r *report) error {
	relevant, cleanup := f.relevantUpdates(env.kube)
	phases := []struct {
		name, target string
		rate         float64
		job          func(context.Context, int) error
		// nodeEntry installs the chart's Node entry before the phase.
		nodeEntry bool
	}{
		{"idle", "", 0, nil, false},
		{"irrelevant Node updates 50/s", "≤ 2 % of a core", 50, f.irrelevantUpdates(env.kube), false},
		{"irrelevant Node updates 500/s", "", 500, f.irrelevantUpdates(env.kube), false},
		{"relevant Node updates 5/s (taint added/removed)", "", 5, relevant, false},
		// Last, so that the phases above compare with earlier runs.
		{"irrelevant Node updates 50/s, the chart's Node entry installed", "as without the entry: no call reaches dsguard",
			50, f.irrelevantUpdates(env.kube), true},
	}
	for _, p := range phases {
		var entryBefore [2]float64
		if p.nodeEntry {
			if err := env.installNodeEntry(ctx); err != nil {
				return err
			}
			var err error
			if entryBefore[0], entryBefore[1], err = env.nodeEntryCounts(ctx); err != nil {
				return err
			}
		}
		logf("CPU phase: %s for %s", p.name, r.opts.window)
		s, err := env.dsguard.sample()
		if err != nil {
			return err
		}
		fs, err := env.nodeWatcher.sample()
		if err != nil {
			_, _ = s.done()
			return err
		}
		var load paced
		if p.job == nil {
			err = sleep(ctx, r.opts.window)
		} else {
			load = pace(ctx, p.rate, r.opts.window, 64, p.job)
			err = ctx.Err()
		}
		use, uerr := s.done()
		floor, ferr := fs.done()
		if err = errors.Join(err, uerr, ferr); err != nil {
			return err
		}
		if load.failed > 0 {
			logf("  %d of %d updates failed, first: %v", load.failed, load.done+load.failed, load.firstErr)
		}
		phase := cpuPhase{name: p.name, target: p.target, rate: p.rate, load: load, use: use, floor: floor}
		if p.nodeEntry {
			calls, excluded, err := env.nodeEntryCounts(ctx)
			if err != nil {
				return err
			}
			phase.nodeEntry = &struct{ calls, excluded float64 }{calls - entryBefore[0], excluded - entryBefore[1]}
			// The later phases measure what they always did, without it.
			if err := env.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "load-nodes", metav1.DeleteOptions{}); err != nil {
				return err
			}
			logf("  the API server called the Node entry %.0f times; its match conditions left out %.0f updates",
				phase.nodeEntry.calls, phase.nodeEntry.excluded)
		}
		r.cpu = append(r.cpu, phase)
		r.memory = append(r.memory, env.memoryNow("end of "+p.name, r.opts.profile))
		logf("  dsguard %.1f %% of a core (a bare Node watcher %.1f %%), RSS avg %s max %s; %.1f updates/s achieved",
			use.cpu*100, floor.cpu*100, mib(use.rssAvg), mib(use.rssMax), load.rate)
		if err := cleanup(ctx); err != nil {
			return err
		}
		if err := sleep(ctx, settle); err != nil {
			return err
		}
	}
	return nil
}

// latencies are durations of one kind, summarised.
type latencies []time.Duration

func (l latencies) percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(p/100*float64(len(s)) + 0.5)
	return s[min(max(i-1, 0), len(s)-1)]
}

// measureChangeToVerdict taints the one node the probe DaemonSet selects
// (so that it would run nowhere, a deny) and polls a dry-run create through
// the API server until dsguard denies it; then lifts the taint and polls
// until it is allowed again.
func measureChangeToVerdict(ctx context.Context, env *environment, r *report) error {
	ds := daemonSet("probe-verdict")
	ds.Spec.Template.Spec.NodeSelector = map[string]string{probeLabel: "verdict"}
	if _, err := dryRunCreate(ctx, env.kube, nsProbe, ds); err != nil {
		return fmt.Errorf("the probe DaemonSet is not allowed before any change: %w", err)
	}
	logf("relevant node change to admission verdict, %d times each way", r.opts.probes)
	var polls int
	var pollTime time.Duration
	wait := func(wantDeny bool) (time.Duration, error) {
		start := time.Now()
		for time.Since(start) < time.Minute {
			t := time.Now()
			_, err := dryRunCreate(ctx, env.kube, nsProbe, ds)
			polls++
			pollTime += time.Since(t)
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			if wantDeny && isDenied(err) || !wantDeny && err == nil {
				return time.Since(start), nil
			}
			if err != nil && !isDenied(err) {
				return 0, err
			}
		}
		return 0, fmt.Errorf("the verdict did not change within a minute (deny wanted: %v)", wantDeny)
	}
	for range r.opts.probes {
		if err := setTaint(ctx, env.kube, env.fleet.verdictProbe, probeTaint, true); err != nil {
			return err
		}
		d, err := wait(true)
		if err != nil {
			return err
		}
		r.verdictTaint = append(r.verdictTaint, d)
		if err := setTaint(ctx, env.kube, env.fleet.verdictProbe, probeTaint, false); err != nil {
			return err
		}
		if d, err = wait(false); err != nil {
			return err
		}
		r.verdictUntaint = append(r.verdictUntaint, d)
	}
	r.verdictPoll = pollTime / time.Duration(max(polls, 1))
	logf("  taint → deny p50 %s max %s; untaint → allow p50 %s max %s (one poll takes %s)",
		ms(r.verdictTaint.percentile(50)), ms(r.verdictTaint.percentile(100)),
		ms(r.verdictUntaint.percentile(50)), ms(r.verdictUntaint.percentile(100)), ms(r.verdictPoll))
	return sleep(ctx, settle)
}

// measureChangeToEvent gives each probe DaemonSet two nodes of its own and
// taints one: the auditor must report CoverageReduced. Each DaemonSet is
// probed once, because the Event recorder folds repeats of an Event into a
// series that the API shows late.
func measureChangeToEvent(ctx context.Context, env *environment, r *report) error {
	for i := range env.fleet.eventProbes {
		ds := daemonSet(fmt.Sprintf("probe-event-%d", i))
		ds.Spec.Template.Spec.NodeSelector = map[string]string{probeLabel: fmt.Sprintf("event-%d", i)}
		if _, err := env.kube.AppsV1().DaemonSets(nsProbe).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	w, err := env.kube.EventsV1().Events(nsProbe).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	defer w.Stop()
	var mu sync.Mutex
	seen := map[string]time.Time{}
	go func() {
		for ev := range w.ResultChan() {
			e, ok := ev.Object.(*eventsv1.Event)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) || e.Reason != "CoverageReduced" {
				continue
			}
			mu.Lock()
			if _, dup := seen[e.Regarding.Name]; !dup {
				seen[e.Regarding.Name] = time.Now()
			}
			mu.Unlock()
		}
	}()
	// The auditor must know the DaemonSets before a change can be "worse".
	if err := sleep(ctx, 2*settle); err != nil {
		return err
	}
	logf("relevant node change to the auditor's Event, %d DaemonSets", len(env.fleet.eventProbes))
	for i, pair := range env.fleet.eventProbes {
		name := fmt.Sprintf("probe-event-%d", i)
		if err := setTaint(ctx, env.kube, pair[0], probeTaint, true); err != nil {
			return err
		}
		start := time.Now()
		for {
			mu.Lock()
			at, ok := seen[name]
			mu.Unlock()
			if ok {
				r.eventLatency = append(r.eventLatency, at.Sub(start))
				break
			}
			if time.Since(start) > time.Minute {
				return fmt.Errorf("no CoverageReduced Event for %s within a minute", name)
			}
			if err := sleep(ctx, 5*time.Millisecond); err != nil {
				return err
			}
		}
		if err := setTaint(ctx, env.kube, pair[0], probeTaint, false); err != nil {
			return err
		}
	}
	logf("  taint → Event p50 %s max %s", ms(r.eventLatency.percentile(50)), ms(r.eventLatency.percentile(100)))
	return sleep(ctx, settle)
}

// createMode is one way a DaemonSet create reaches etcd.
type createMode struct {
	name, namespace string
	samples         latencies
}

// measureCreates creates DaemonSets through the API server, one at a time,
// rotating among the webhook modes so that each sees the same background,
// while Nodes and other DaemonSets churn.
func measureCreates(ctx context.Context, env *environment, f *fleet, r *report) error {
	modes := []*createMode{{name: "no webhook", namespace: nsNone}, {name: "no-op webhook", namespace: nsNoop},
		{name: "dsguard, webhook mode", namespace: nsDsguard}}
	logf("starting dsguard serve --mode vap+webhook beside it, with the generated policies")
	stopVAP, err := env.startVAPWebhook(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A build without the vap modes (-dsguard) still gets the other rows.
		logf("  no vap rows: %v", err)
		r.failures = append(r.failures, "vap and vap+webhook rows: "+err.Error())
	} else {
		defer func() {
			if err := stopVAP(context.WithoutCancel(ctx)); err != nil {
				logf("stopping the vap+webhook dsguard: %v", err)
			}
		}()
		modes = append(modes, &createMode{name: "dsguard, vap mode (policies only)", namespace: nsVAP},
			&createMode{name: "dsguard, vap+webhook mode", namespace: nsVAPWebhook})
	}
	logf("DaemonSet creates: %d per mode, interleaved, under churn", r.opts.creates)
	churnCtx, stopChurn := context.WithCancel(ctx)
	var wg sync.WaitGroup
	relevant, cleanup := f.relevantUpdates(env.kube)
	const forever = 24 * time.Hour
	wg.Go(func() { pace(churnCtx, 50, forever, 16, f.irrelevantUpdates(env.kube)) })
	wg.Go(func() { pace(churnCtx, 1, forever, 2, relevant) })
	wg.Go(func() { pace(churnCtx, 5, forever, 8, churnDaemonSets(env)) })
	s, err := env.dsguard.sample()
	if err != nil {
		stopChurn()
		wg.Wait()
		return err
	}
	var prof *profiler
	if r.opts.profile != "" && env.dsguardPprof != "" {
		// The first 20 s of the creates, or fewer when they end sooner.
		prof = &profiler{url: env.dsguardPprof, path: filepath.Join(r.opts.profile, "dsguard-creates.pprof")}
		prof.start(20 * time.Second)
	}
	for i := 0; i < r.opts.creates && err == nil; i++ {
		for j := range modes {
			m := modes[(i+j)%len(modes)]
			ds := daemonSet(fmt.Sprintf("lat-%05d", i))
			start := time.Now()
			if _, err = env.kube.AppsV1().DaemonSets(m.namespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
				err = fmt.Errorf("creating %s/%s: %w", m.namespace, ds.Name, err)
				break
			}
			m.samples = append(m.samples, time.Since(start))
		}
		if err == nil && (i+1)%createBatch == 0 && i+1 < r.opts.creates {
			err = deleteMeasured(ctx, env, modes)
		}
	}
	stopChurn()
	wg.Wait()
	r.createUse, _ = s.done()
	if prof != nil {
		if perr := prof.wait(); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		return err
	}
	if err := cleanup(ctx); err != nil {
		return err
	}
	for _, m := range modes {
		r.creates = append(r.creates, *m)
		if err := env.kube.AppsV1().DaemonSets(m.namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return err
		}
		logf("  %s: p50 %s p99 %s", m.name, ms(m.samples.percentile(50)), ms(m.samples.percentile(99)))
	}
	return sleep(ctx, settle)
}

// createBatch is how many rounds of creates run before the DaemonSets they
// made are deleted again, untimed: a cluster holds tens or hundreds of
// DaemonSets, not thousands, and dsguard's memory and audit work grow with
// their number (about 20 KiB of heap each at 5,000 of them, half of it
// their metrics), so letting every measured create pile up would measure a
// cluster nobody runs.
const createBatch = 100

// deleteMeasured deletes the DaemonSets the measured creates made and gives
// dsguard's auditor two seconds to take in the deletions, outside the timed
// creates.
func deleteMeasured(ctx context.Context, env *environment, modes []*createMode) error {
	for _, m := range modes {
		if err := env.kube.AppsV1().DaemonSets(m.namespace).DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{}); err != nil {
			return fmt.Errorf("deleting the measured DaemonSets of %s: %w", m.namespace, err)
		}
	}
	return sleep(ctx, 2*time.Second)
}

// churnDaemonSets returns a paced job that creates a DaemonSet and deletes
// the one created ten calls before.
func churnDaemonSets(env *environment) func(context.Context, int) error {
	return func(ctx context.Context, i int) error {
		if _, err := env.kube.AppsV1().DaemonSets(nsChurn).Create(ctx, daemonSet(fmt.Sprintf("churn-%05d", i)),
			metav1.CreateOptions{}); err != nil {
			return err
		}
		if i < 10 {
			return nil
		}
		return env.kube.AppsV1().DaemonSets(nsChurn).Delete(ctx, fmt.Sprintf("churn-%05d", i-10), metav1.DeleteOptions{})
	}
}

// directStep is one target at one concurrency with one body.
type directStep struct {
	payload     string
	target      string
	concurrency int
	requests    int
	failed      int
	throughput  float64
	p50, p99    time.Duration
	// cpuPerRequest is the webhook process's CPU time (user and system)
	// over the window divided by the requests answered in it; 0 when it
	// could not be read.
	cpuPerRequest time.Duration
}

// The bodies of the direct load.
const (
	payloadAPIServer = "as the API server sent it"
	payloadMinimal   = "minimal"
)

// measureDirect sends AdmissionReviews straight to each webhook over TLS
// (keep-alive connections, as the API server holds them), at 1, 16 and 64
// requests in flight. It sends two bodies: the review the API server sent
// the no-op webhook for a real create (managed fields, user info and
// options included), which is what a webhook decodes in a cluster, and a
// minimal one (the DaemonSet alone), which leaves the least work besides
// dsguard's own. The two webhooks take turns in slices of about a second
// (see directPair), so that whatever else the machine does in a step falls
// on both alike.
func measureDirect(ctx context.Context, env *environment, r *report) error {
	recorded, err := env.recordReview(ctx)
	if err != nil {
		return fmt.Errorf("recording the API server's review: %w", err)
	}
	minimal, err := minimalReview()
	if err != nil {
		return err
	}
	for _, p := range []struct {
		name, file string
		body       []byte
	}{{payloadAPIServer, "apiserver", recorded}, {payloadMinimal, "minimal", minimal}} {
		for _, c := range []int{1, 16, 64} {
			targets := []*directTarget{
				{name: "no-op webhook", url: env.noopURL, cpuTime: env.noop.cpu, client: env.httpClient(c)},
				{name: "dsguard", url: env.dsguardURL, cpuTime: env.dsguard.cpu, client: env.httpClient(c)},
			}
			// Both webhooks are profiled or neither: profiling costs CPU.
			if r.opts.profile != "" && env.noopPprof != "" && env.dsguardPprof != "" {
				profile := func(url, file string) *profiler {
					return &profiler{url: url, path: filepath.Join(r.opts.profile, fmt.Sprintf("%s-%s-%d.pprof", file, p.file, c))}
				}
				targets[0].prof, targets[1].prof = profile(env.noopPprof, "noop"), profile(env.dsguardPprof, "dsguard")
			}
			logf("direct TLS, %s review: both webhooks at %d concurrent for %s each, in turns", p.file, c, r.opts.direct)
			steps, err := directPair(ctx, targets, p.body, c, r.opts.direct)
			if err != nil {
				return err
			}
			for _, step := range steps {
				step.payload = p.name
				r.direct = append(r.direct, step)
				logf("  %s: %.0f requests/s, p50 %s p99 %s, %d failed, %s of CPU per request", step.target, step.throughput,
					ms(step.p50), ms(step.p99), step.failed, us(step.cpuPerRequest))
			}
		}
	}
	return nil
}

// directTarget is one webhook under the direct load, with what its slices
// have measured so far.
type directTarget struct {
	name, url string
	// cpuTime returns the CPU time the webhook's process has used so far.
	cpuTime func() (time.Duration, error)
	client  *http.Client
	prof    *profiler

	samples latencies
	failed  int
	elapsed time.Duration
	cpu     time.Duration
	cpuErr  error
}

// directSlices is how many slices each webhook gets in a step of d: an even
// number (each webhook goes first as often as the other), of about a
// second each.
func directSlices(d time.Duration) int {
	return 2 * max(1, int((d+time.Second)/(2*time.Second)))
}

// directPair runs the direct load against both targets for d each, in
// directSlices(d) slices taken in turns, the first webhook of each pair of
// slices alternating (ABBA...). A whole step after the other would leave the
// comparison to whatever the API server, the garbage collectors or the
// machine's other tenants did in each window; in turns both see the same
// minutes. The connections stay open between slices.
func directPair(ctx context.Context, targets []*directTarget, body []byte, concurrency int, d time.Duration) ([]directStep, error) {
	// Warm up: open the connections and let both sides reach a steady state.
	for _, t := range targets {
		warm, cancel := context.WithTimeout(ctx, d/5)
		hammer(warm, concurrency, t.post(body))
		cancel()
	}
	n := directSlices(d)
	slice := d / time.Duration(n)
	for _, t := range targets {
		if t.prof != nil {
			t.prof.start(time.Duration(len(targets)) * d)
		}
	}
	for i := range n {
		for j := range targets {
			t := targets[j]
			if i%2 == 1 {
				t = targets[len(targets)-1-j]
			}
			if err := t.slice(ctx, body, concurrency, slice); err != nil {
				return nil, err
			}
		}
	}
	steps := make([]directStep, 0, len(targets))
	for _, t := range targets {
		if t.prof != nil {
			if err := t.prof.wait(); err != nil {
				return nil, err
			}
		}
		if len(t.samples) == 0 {
			return nil, fmt.Errorf("%s: no request succeeded (%d failed)", t.name, t.failed)
		}
		step := directStep{target: t.name, concurrency: concurrency, requests: len(t.samples), failed: t.failed,
			throughput: float64(len(t.samples)) / t.elapsed.Seconds(), p50: t.samples.percentile(50), p99: t.samples.percentile(99)}
		if t.cpuErr == nil {
			step.cpuPerRequest = t.cpu / time.Duration(len(t.samples)+t.failed)
		}
		steps = append(steps, step)
	}
	return steps, nil
}

// slice loads the target for d and adds what it measured.
func (t *directTarget) slice(ctx context.Context, body []byte, concurrency int, d time.Duration) error {
	window, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cpuBefore, cpuErr := t.cpuTime()
	start := time.Now()
	samples, failed := hammer(window, concurrency, t.post(body))
	elapsed := time.Since(start)
	cpuAfter, err := t.cpuTime()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	t.samples = append(t.samples, samples...)
	t.failed += failed
	t.elapsed += elapsed
	t.cpu += cpuAfter - cpuBefore
	t.cpuErr = errors.Join(t.cpuErr, cpuErr, err)
	return nil
}

// post returns a function that sends body once and reports how long the
// answer took, and whether it was an admission.
func (t *directTarget) post(body []byte) func() (time.Duration, bool) {
	return func() (time.Duration, bool) {
		start := time.Now()
		resp, err := t.client.Post(t.url, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		var out admissionv1.AdmissionReview
		data, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(data, &out) != nil || out.Response == nil ||
			!out.Response.Allowed {
			return 0, false
		}
		return time.Since(start), true
	}
}

// recordReview creates the DaemonSet named recordName where the no-op
// webhook judges it, deletes it again, and returns the review the no-op
// webhook recorded: the bytes a webhook gets for a kubectl create.
func (e *environment) recordReview(ctx context.Context) ([]byte, error) {
	ds := daemonSet(recordName)
	if _, err := e.kube.AppsV1().DaemonSets(nsNoop).Create(ctx, ds, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		return nil, err
	}
	if err := e.kube.AppsV1().DaemonSets(nsNoop).Delete(ctx, recordName, metav1.DeleteOptions{}); err != nil {
		return nil, err
	}
	body, err := os.ReadFile(e.recordedReview)
	if err != nil {
		return nil, err
	}
	logf("recorded the API server's review of a DaemonSet create: %d bytes", len(body))
	return body, nil
}

// minimalReview is a review of the DaemonSet named recordName with nothing
// the API server adds: no managed fields, user info or options.
func minimalReview() ([]byte, error) {
	ds := daemonSet(recordName)
	ds.Namespace = nsDsguard
	raw, err := json.Marshal(ds)
	if err != nil {
		return nil, err
	}
	return json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:      types.UID("00000000-0000-0000-0000-000000000001"),
			Kind:     metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"},
			Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"},
			Name:     ds.Name, Namespace: nsDsguard, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		},
	})
}

// profiler takes a CPU profile of a webhook over a direct load step.
type profiler struct {
	url, path string
	done      chan error
}

// start asks for a profile of the next d (whole seconds, at least one).
func (p *profiler) start(d time.Duration) {
	p.done = make(chan error, 1)
	go func() {
		secs := max(1, int(d.Round(time.Second)/time.Second))
		resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", p.url, secs))
		if err != nil {
			p.done <- err
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("profile: HTTP %d: %s", resp.StatusCode, data)
		}
		if err == nil {
			err = os.WriteFile(p.path, data, 0o644)
		}
		p.done <- err
	}()
}

func (p *profiler) wait() error {
	if err := <-p.done; err != nil {
		return fmt.Errorf("profiling %s: %w", p.path, err)
	}
	logf("  CPU profile in %s", p.path)
	return nil
}

// hammer calls post on concurrency goroutines until ctx ends.
func hammer(ctx context.Context, concurrency int, post func() (time.Duration, bool)) (latencies, int) {
	var mu sync.Mutex
	var all latencies
	failed := 0
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			var mine latencies
			bad := 0
			for ctx.Err() == nil {
				if d, ok := post(); ok {
					mine = append(mine, d)
				} else if ctx.Err() == nil {
					bad++
				}
			}
			mu.Lock()
			all = append(all, mine...)
			failed += bad
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, failed
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// us prints a CPU cost per request; zero is a figure that could not be read.
func us(d time.Duration) string {
	if d <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}
