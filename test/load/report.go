package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// report collects every figure of a run and prints them side by side.
type report struct {
	opts               options
	started            time.Time
	took               time.Duration
	loadStart, loadEnd string
	setup              setupFigures
	cpu                []cpuPhase
	pods               *podPhase
	verdictTaint       latencies
	verdictUntaint     latencies
	verdictPoll        time.Duration
	eventLatency       latencies
	creates            []createMode
	createUse          usage
	direct             []directStep
	peakRSS            int64
	memory             []memoryPoint
	// floorMemory is the no-op webhook's, once settled.
	floorMemory memoryPoint
	failures    []string
}

func (r *report) print(path string) error {
	var b strings.Builder
	r.write(&b)
	fmt.Print("\n" + b.String())
	if path == "" {
		return nil
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func (r *report) write(w io.Writer) {
	s := &r.setup
	fmt.Fprintf(w, "## dsguard load harness: %d nodes\n\n", s.nodes)
	fmt.Fprintf(w, "- machine: %d CPUs; load average %s at the start, %s at the end; run took %s\n",
		runtime.NumCPU(), r.loadStart, r.loadEnd, r.took.Round(time.Second))
	fmt.Fprintf(w, "- kube-apiserver %s; %d Nodes in about %d classes, created in %s (%.0f/s); %d DaemonSets in %d namespaces\n",
		s.apiserverVersion, s.nodes, s.classes, s.createNodes.Round(time.Second), s.nodesPerSecond, s.daemonSets, backgroundNamespaces)
	limit := "none"
	if r.opts.memoryLimit > 0 {
		limit = mib(r.opts.memoryLimit)
	}
	fmt.Fprintf(w, "- dsguard given a container memory limit of %s (DSGUARD_MEMORY_LIMIT, as the chart sets it)\n", limit)
	fmt.Fprintf(w, "- dsguard ready %s after start; RSS %s when ready, %s settled, %s peak over the run (%s)\n\n",
		s.dsguardReady.Round(100*time.Millisecond), mib(s.rssReady), mib(s.rssSettled), mib(r.peakRSS), rssTarget(s.nodes))
	r.writeMemory(w)
	if r.pods != nil {
		r.writePods(w)
	}
	if len(r.cpu) > 0 {
		r.writeCPU(w)
	}
	if len(r.verdictTaint)+len(r.eventLatency) > 0 {
		r.writeChanges(w)
	}
	if len(r.creates) > 0 {
		r.writeCreates(w)
	}
	if len(r.direct) > 0 {
		r.writeDirect(w)
	}
	if len(r.failures) > 0 {
		fmt.Fprintln(w, "\n### Phases that failed")
		for _, f := range r.failures {
			fmt.Fprintf(w, "\n- %s\n", f)
		}
	}
}

func (r *report) writeCPU(w io.Writer) {
	fmt.Fprintf(w, "### dsguard CPU and memory under node churn (%s each)\n\n", r.opts.window)
	fmt.Fprintln(w, "| phase | updates/s achieved | failed | dsguard CPU (% of a core) | floor: a bare Node watcher | dsguard over the floor | RSS avg | RSS max | target |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, p := range r.cpu {
		rate := "-"
		if p.rate > 0 {
			rate = fmt.Sprintf("%.1f of %.0f", p.load.rate, p.rate)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %.2f %% | %.2f %% | %+.2f %% | %s | %s | %s |\n", p.name, rate, p.load.failed,
			p.use.cpu*100, p.floor.cpu*100, (p.use.cpu-p.floor.cpu)*100, mib(p.use.rssAvg), mib(p.use.rssMax), p.target)
	}
	for _, p := range r.cpu {
		if p.nodeEntry != nil {
			fmt.Fprintf(w, "\nWith the chart's Node entry (%s) installed, the API server called it %.0f times during %q, and its "+
				"match conditions left out %.0f updates: annotation writes change neither taints nor labels, so none reaches dsguard.\n",
				nodeEntryName, p.nodeEntry.calls, p.name, p.nodeEntry.excluded)
		}
	}
	fmt.Fprintln(w, "\nThe floor watches the Nodes as dsguard's node view does (the same lister-watcher: protobuf, a streamed list, "+
		"no compression) and keeps nothing: what any watcher of the Nodes pays to receive and decode them on this machine. "+
		"The target is dsguard's own CPU; the floor shows how much of it the machine's speed and the watch itself decide.")
}

func (r *report) writeChanges(w io.Writer) {
	fmt.Fprintf(w, "\n### A relevant node change, to the verdict and to the Event (%d each)\n\n", len(r.verdictTaint))
	fmt.Fprintln(w, "| change | observed | p50 | max | target |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | --- |")
	fmt.Fprintf(w, "| taint on the only selected node | dry-run create denied through the API server | %s | %s | ≤ 1 s |\n",
		ms(r.verdictTaint.percentile(50)), ms(r.verdictTaint.percentile(100)))
	fmt.Fprintf(w, "| taint lifted | dry-run create allowed again | %s | %s | ≤ 1 s |\n",
		ms(r.verdictUntaint.percentile(50)), ms(r.verdictUntaint.percentile(100)))
	fmt.Fprintf(w, "| taint on one of two selected nodes | CoverageReduced Event seen by a watch | %s | %s | ≤ 5 s |\n",
		ms(r.eventLatency.percentile(50)), ms(r.eventLatency.percentile(100)))
	fmt.Fprintf(w, "\nOne verdict poll (a dry-run create) took %s on average: the verdict figures are that coarse.\n",
		ms(r.verdictPoll))
}

func (r *report) writeCreates(w io.Writer) {
	fmt.Fprintf(w, "\n### DaemonSet creates through the API server (%d per mode, interleaved; "+
		"meanwhile 50 irrelevant and 1 relevant Node update/s, 5 DaemonSet creates and deletes/s)\n\n", r.opts.creates)
	var base, noop *createMode
	for i := range r.creates {
		switch m := &r.creates[i]; m.namespace {
		case nsNone:
			base = m
		case nsNoop:
			noop = m
		}
	}
	if base == nil || noop == nil {
		return
	}
	over := func(m *createMode, p float64) time.Duration {
		return m.samples.percentile(p) - base.samples.percentile(p)
	}
	// The paired overhead compares the creates of one round, made one
	// after the other: it drifts less with the machine's load than the
	// difference of two percentiles.
	paired := func(m *createMode) time.Duration {
		var d latencies
		for i := range min(len(m.samples), len(base.samples)) {
			d = append(d, m.samples[i]-base.samples[i])
		}
		return d.percentile(50)
	}
	fmt.Fprintln(w, "| mode | p50 | p99 | p50 over no webhook | p99 over no webhook | paired median over no webhook | "+
		"overhead ÷ no-op's: p50 (95 % interval), p99 |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for i := range r.creates {
		m := &r.creates[i]
		vsNoop := "-"
		if m != base && m != noop {
			vsNoop = ratio(float64(over(m, 50)), float64(over(noop, 50))) + overheadInterval(base.samples, noop.samples, m.samples) +
				", " + ratio(float64(over(m, 99)), float64(over(noop, 99)))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", m.name, ms(m.samples.percentile(50)), ms(m.samples.percentile(99)),
			signedMS(over(m, 50)), signedMS(over(m, 99)), signedMS(paired(m)), vsNoop)
	}
	fmt.Fprintf(w, "\nTarget: dsguard's overhead (webhook mode) ≤ 1.1× the no-op webhook's. The interval is a bootstrap "+
		"of the p50 ratio (the three modes' creates resampled %d times): how far the ratio could move from noise alone. "+
		"dsguard (webhook mode) used %.1f %% of a core during the creates, RSS max %s. The vap rows are judged by the "+
		"ValidatingAdmissionPolicies that `dsguard serve --mode vap+webhook` applied (the same as --mode vap applies), "+
		"which leave the harness's other namespaces out; the vap+webhook row also calls that dsguard for the node-aware rules.\n",
		bootstrapRounds, r.createUse.cpu*100, mib(r.createUse.rssMax))
}

// bootstrapRounds is how often overheadInterval resamples.
const bootstrapRounds = 1000

// overheadInterval is the 95 % bootstrap interval of the ratio of m's p50
// overhead over no webhook to the no-op webhook's, as " (lo–hi×)": the
// three sets of creates are resampled with replacement, each on its own,
// and the ratio taken each time. The seed is fixed, so that a report
// prints the same interval for the same samples. It is "" when the no-op's
// overhead is not above zero in a twentieth of the resamples or more,
// where a ratio says nothing.
func overheadInterval(base, noop, m latencies) string {
	if len(base) == 0 || len(noop) == 0 || len(m) == 0 {
		return ""
	}
	rng := rand.New(rand.NewPCG(1, 2))
	resampledP50 := func(l latencies) time.Duration {
		s := make(latencies, len(l))
		for i := range s {
			s[i] = l[rng.IntN(len(l))]
		}
		return s.percentile(50)
	}
	ratios := make([]float64, 0, bootstrapRounds)
	for range bootstrapRounds {
		b := resampledP50(base)
		if noopOver := resampledP50(noop) - b; noopOver > 0 {
			ratios = append(ratios, float64(resampledP50(m)-b)/float64(noopOver))
		}
	}
	if len(ratios) < bootstrapRounds*19/20 {
		return ""
	}
	slices.Sort(ratios)
	return fmt.Sprintf(" (%.2f–%.2f×)", ratios[len(ratios)*25/1000], ratios[len(ratios)*975/1000])
}

func (r *report) writeDirect(w io.Writer) {
	fmt.Fprintf(w, "\n### Direct TLS load (AdmissionReview of a DaemonSet CREATE, keep-alive, %s per webhook and step, in %d turns each)\n\n",
		r.opts.direct, directSlices(r.opts.direct))
	fmt.Fprintln(w, "| review | concurrent | no-op requests/s | dsguard requests/s | throughput ratio | no-op p50 | dsguard p50 | no-op p99 | dsguard p99 | "+
		"no-op CPU per request | dsguard CPU per request | failed |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, payload := range []string{payloadAPIServer, payloadMinimal} {
		for _, c := range []int{1, 16, 64} {
			var n, d *directStep
			for i := range r.direct {
				s := &r.direct[i]
				if s.concurrency != c || s.payload != payload {
					continue
				}
				if s.target == "dsguard" {
					d = s
				} else {
					n = s
				}
			}
			if n == nil || d == nil {
				continue
			}
			fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %s | %s | %s | %s | %s | %s | %s | %d |\n", payload, c, n.throughput, d.throughput,
				ratio(d.throughput, n.throughput), ms(n.p50), ms(d.p50), ms(n.p99), ms(d.p99), us(n.cpuPerRequest), us(d.cpuPerRequest),
				n.failed+d.failed)
		}
	}
	fmt.Fprintln(w, "\nTarget: dsguard's throughput ≥ 0.9× the no-op webhook's. Both run on the same machine as the API server and the load; the no-op from a copy of the harness's executable, so that it shares no code pages (nor the CPU caches that hold them) with the load generator, as no webhook shares them with the API server. "+
		"The two webhooks take turns within each step, the first of each pair of turns alternating, so that what else the machine does falls on both alike. "+
		"The first body is the review the API server sent for a create (managed fields, user info, options); the minimal one holds the DaemonSet alone. "+
		"CPU per request is the webhook process's user and system time over the step (read from /proc, 10 ms ticks) divided by its requests: "+
		"at 1 concurrent request each round trip waits for the one before, so a webhook's CPU per request is most of its latency, "+
		"and it includes what the Go scheduler spends parking and waking threads between requests.")
}

func signedMS(d time.Duration) string {
	if d >= 0 {
		return "+" + ms(d)
	}
	return "−" + ms(-d)
}

func ratio(a, b float64) string {
	if b <= 0 {
		return "n/a (the no-op figure is not above zero)"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// rssTarget is the RSS target for a fleet of this size.
func rssTarget(nodes int) string {
	if nodes > 5000 {
		return "target ≤ 256 MiB at 65,000 nodes"
	}
	return "target ≤ 64 MiB at 5,000 nodes"
}
