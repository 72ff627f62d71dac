package fit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/test/e2e/framework"
)

var (
	seedFlag      = flag.Uint64("fit.seed", 0, "replay the scenarios of this seed (also DSGUARD_FIT_SEED); 0 draws a new one")
	scenariosFlag = flag.Int("fit.scenarios", 300, "how many scenarios (nodes with a DaemonSet each) to run (also DSGUARD_FIT_SCENARIOS)")
)

// settings returns the seed and the scenario count, from the environment
// first (make e2e passes no flags), then the flags.
func settings(t *testing.T) (uint64, int) {
	seed, count := *seedFlag, *scenariosFlag
	if v := os.Getenv("DSGUARD_FIT_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("DSGUARD_FIT_SEED=%q: %v", v, err)
		}
		seed = s
	}
	if v := os.Getenv("DSGUARD_FIT_SCENARIOS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("DSGUARD_FIT_SCENARIOS=%q: want a positive number", v)
		}
		count = n
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	return seed, count
}

// observed is what the cluster did with a scenario's agent Pod.
type observed struct {
	bound   bool
	pending string // the PodScheduled condition's message
	victims []string
}

// TestFit_MatchesKubeScheduler is the differential test: every prediction
// of coverage/fit must be what kube-scheduler did.
func TestFit_MatchesKubeScheduler(t *testing.T) {
	seed, count := settings(t)
	fmt.Fprintf(os.Stderr, "fit: seed %d, %d scenarios (replay: DSGUARD_FIT_SEED=%d)\n", seed, count, seed)
	t.Logf("figures: seed %d (replay: DSGUARD_FIT_SEED=%d)", seed, seed)
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	run := strconv.FormatUint(seed%100000, 36)
	scenarios := make([]*scenario, count)
	for i := range scenarios {
		scenarios[i] = generate(r, run, i)
	}
	setUp(ctx, t, scenarios)
	t.Logf("figures: created %d nodes and %d bound Pods in %s", count, countFillers(scenarios), time.Since(start).Round(time.Millisecond))

	predictions := predict(t, scenarios)
	// The same, as a user gets it: the cluster dumped with kubectl, the
	// DaemonSets judged by dsguard check --nodes.
	cliStart := time.Now()
	cli := cliPredict(t, scenarios)
	t.Logf("figures: kubectl's dump and dsguard check took %s", time.Since(cliStart).Round(time.Millisecond))

	// The scheduler must see the bound Pods, started, before the agents
	// arrive: its cache follows a watch.
	took := schedulerCaughtUp(ctx, t)
	t.Logf("figures: kube-scheduler's cache holds every Pod written %s after the last write", took.Round(time.Millisecond))
	createStart := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, s := range scenarios {
		g.Go(func() error {
			_, err := client.AppsV1().DaemonSets(agentNamespace).Create(gctx, s.ds, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("creating the DaemonSets: %v", err)
	}
	obs := settle(ctx, t, scenarios)
	t.Logf("figures: the DaemonSet controller and the scheduler settled %d agents in %s", count, time.Since(createStart).Round(time.Millisecond))

	var mismatches []string
	kinds := map[fit.Kind]int{}
	reasons := map[string]int{}
	for _, s := range scenarios {
		p := predictions[s.id]
		kinds[p.Kind]++
		for _, rs := range p.Reasons {
			reasons[rs]++
		}
		if msg := compare(p, obs[s.id]); msg != "" {
			mismatches = append(mismatches, fmt.Sprintf("scenario %s (node %s): %s\n  predicted %s\n  node: %s\n  agent: %s",
				s.id, s.node.Name, msg, describe(p), describeNode(s), describeAgent(s)))
		}
		if c, ok := cli[s.ds.Name]; !ok {
			mismatches = append(mismatches, fmt.Sprintf("scenario %s: dsguard check printed no fit outcome for node %s", s.id, s.node.Name))
		} else if msg := compare(c, obs[s.id]); msg != "" {
			mismatches = append(mismatches, fmt.Sprintf("scenario %s (node %s): dsguard check: %s\n  printed %s\n  node: %s\n  agent: %s",
				s.id, s.node.Name, msg, describe(c), describeNode(s), describeAgent(s)))
		}
	}
	share := func(n int) string { return fmt.Sprintf("%d (%.0f%%)", n, 100*float64(n)/float64(count)) }
	summary := fmt.Sprintf("fit: seed %d: %d scenarios, fits %s, preempts %s, does not fit %s, never fits %s; reasons: ports %s, pods limit %s, anti-affinity %s, existing anti-affinity %s; %d mismatches; %s",
		seed, count, share(kinds[fit.Fits]), share(kinds[fit.Preempts]), share(kinds[fit.DoesNotFit]), share(kinds[fit.NeverFits]),
		share(reasons[fit.ReasonPorts]), share(reasons[fit.ReasonTooManyPods]), share(reasons[fit.ReasonAntiAffinity]),
		share(reasons[fit.ReasonExistingAntiAffinity]), len(mismatches), time.Since(start).Round(time.Millisecond))
	fmt.Fprintln(os.Stderr, summary)
	t.Log("figures: " + summary)
	for i, m := range mismatches {
		if i == 20 {
			t.Errorf("... and %d more mismatches", len(mismatches)-20)
			break
		}
		t.Error(m)
	}

	// The generator must keep producing every outcome, not drift into
	// easy cases; the thresholds hold for runs of the default size.
	if count >= 300 {
		for kind, floor := range map[fit.Kind]float64{fit.Fits: 0.10, fit.Preempts: 0.10, fit.DoesNotFit: 0.10, fit.NeverFits: 0.05} {
			if got := float64(kinds[kind]) / float64(count); got < floor {
				t.Errorf("outcome %s in %.0f%% of the scenarios, want at least %.0f%%", kind, 100*got, 100*floor)
			}
		}
		for _, rs := range []string{fit.ReasonPorts, fit.ReasonTooManyPods, fit.ReasonAntiAffinity, fit.ReasonExistingAntiAffinity} {
			// 1 %: at 300 scenarios a reason must still show up a few times
			// (the generator reaches it), while a varying seed met existing
			// anti-affinity in only 1.3 % of one run.
			if got := float64(reasons[rs]) / float64(count); got < 0.01 {
				t.Errorf("reason %q in %.1f%% of the scenarios, want at least 1%%", rs, 100*got)
			}
		}
	}
}

func countFillers(ss []*scenario) int {
	n := 0
	for _, s := range ss {
		n += len(s.filler)
	}
	return n
}

// setUp creates the namespaces, PriorityClasses, heartbeat nodes and bound
// Pods, and keeps the objects as the API server returned them (priority
// resolved, status written) in the scenarios.
func setUp(ctx context.Context, t *testing.T, scenarios []*scenario) {
	t.Helper()
	for name, labels := range namespaceLabels {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}},
			metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating namespace %s: %v", name, err)
		}
	}
	for i := range classes {
		if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, &classes[i], metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating PriorityClass %s: %v", classes[i].Name, err)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, s := range scenarios {
		g.Go(func() error {
			n, err := heartbeatNode(gctx, s.node)
			if err != nil {
				return err
			}
			s.node = n
			for j, p := range s.filler {
				created, err := client.CoreV1().Pods(p.Namespace).Create(gctx, p, metav1.CreateOptions{})
				if err != nil {
					return fmt.Errorf("creating pod %s: %w", p.Name, err)
				}
				// What the kubelet would report: running since a distinct
				// second, so preemption's order among equal priorities is
				// the start time, as in a live cluster.
				created.Status.Phase = corev1.PodRunning
				created.Status.StartTime = &metav1.Time{Time: base.Add(time.Duration(j) * time.Second)}
				if s.filler[j], err = client.CoreV1().Pods(p.Namespace).UpdateStatus(gctx, created, metav1.UpdateOptions{}); err != nil {
					return fmt.Errorf("writing the status of pod %s: %w", p.Name, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// schedulerCaughtUp waits until kube-scheduler has seen every Pod write
// made so far and returns how long that took. It creates a Pod no node can
// take and waits for the scheduler's verdict on it: the scheduler's Pods
// arrive on one watch, in the order they were written, and its cache takes
// each before the next, so a verdict on this Pod means the cache holds every
// earlier one, bound and started. The Pod is deleted before it returns.
func schedulerCaughtUp(ctx context.Context, t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	canary := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "scheduler-canary", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"fit.dsguard.io/no-such-node": "true"},
			Containers:   []corev1.Container{{Name: "c", Image: image}},
		},
	}
	pods := client.CoreV1().Pods(metav1.NamespaceDefault)
	if _, err := pods.Create(ctx, canary, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the scheduler's canary Pod: %v", err)
	}
	defer func() {
		if err := pods.Delete(context.WithoutCancel(ctx), canary.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Errorf("deleting the scheduler's canary Pod: %v", err)
		}
	}()
	last := "no verdict"
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := waitFor(wctx, 100*time.Millisecond, func() (bool, error) {
		p, err := pods.Get(wctx, canary.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				last = fmt.Sprintf("PodScheduled %s: %s", c.Status, c.Message)
				return c.Status == corev1.ConditionFalse, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("kube-scheduler gave no verdict on a Pod no node can take within a minute (%v); last: %s\nkube-scheduler log (last lines):\n%s",
			err, last, framework.LastLines(scheduler.Log(), 40))
	}
	return time.Since(start)
}

// heartbeatNode creates the node, writes its status (allocatable, Ready) as
// its kubelet would and lifts the not-ready taint the API server's
// admission puts on every new Node, as the node lifecycle controller would.
func heartbeatNode(ctx context.Context, want *corev1.Node) (*corev1.Node, error) {
	n, err := client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating node %s: %w", want.Name, err)
	}
	now := metav1.Now()
	n.Status = *want.Status.DeepCopy()
	for i := range n.Status.Conditions {
		n.Status.Conditions[i].LastHeartbeatTime, n.Status.Conditions[i].LastTransitionTime = now, now
	}
	if n, err = client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("writing the status of node %s: %w", want.Name, err)
	}
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
	if n, err = client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("lifting the not-ready taint of node %s: %w", want.Name, err)
	}
	return n, nil
}

// predict runs coverage/fit on the objects as the API server holds them.
func predict(t *testing.T, scenarios []*scenario) map[string]fit.Outcome {
	t.Helper()
	var nodes []corev1.Node
	var pods []corev1.Pod
	for _, s := range scenarios {
		nodes = append(nodes, *s.node)
		for _, p := range s.filler {
			pods = append(pods, *p)
		}
	}
	agg, err := fit.Aggregate(nodes, pods)
	if err != nil {
		t.Fatal(err)
	}
	domain := fit.NewDomain(slices.Collect(maps.Values(agg)))
	prio := fit.NewPriorities(classes)
	out := map[string]fit.Outcome{}
	for _, s := range scenarios {
		c, err := fit.NewCandidate(agentNamespace, namespaceLabels[agentNamespace], &s.ds.Spec.Template, prio, namespaceLabels)
		if err != nil {
			t.Fatalf("scenario %s: %v", s.id, err)
		}
		out[s.id] = fit.Predict(c, agg[s.node.Name], domain)
	}
	return out
}

// cliPredict dumps the cluster as a user would (kubectl get
// nodes,pods,priorityclasses,namespaces -A -o yaml), runs dsguard check -o
// json on the scenarios' DaemonSets with the dump as --nodes, and returns
// each DaemonSet's printed outcome on its one covered node.
func cliPredict(t *testing.T, scenarios []*scenario) map[string]fit.Outcome {
	t.Helper()
	dir := t.TempDir()
	dump, err := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", kubeconfig,
		"get", "nodes,pods,priorityclasses,namespaces", "-A", "-o", "yaml").Output()
	if err != nil {
		t.Fatalf("kubectl get: %v", err)
	}
	dumpFile, dsFile := filepath.Join(dir, "cluster.yaml"), filepath.Join(dir, "daemonsets.yaml")
	if err := os.WriteFile(dumpFile, dump, 0o600); err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, s := range scenarios {
		ds := s.ds.DeepCopy()
		ds.APIVersion, ds.Kind = "apps/v1", "DaemonSet"
		out, err := yaml.Marshal(ds)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(out))
	}
	if err := os.WriteFile(dsFile, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), dsguardBin, "check", dsFile, "--nodes", dumpFile, "-o", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	// Exit 1 is a deny of some DaemonSet (resource-fit among others).
	if ee := (*exec.ExitError)(nil); err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		t.Fatalf("dsguard check: %v\n%s", err, stderr.String())
	}
	var report struct {
		Results []struct {
			Name string      `json:"name"`
			Fit  *fit.Report `json:"fit"`
		} `json:"results"`
		Notes []string `json:"notes"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("dsguard check -o json: %v\n%s", err, out)
	}
	if !slices.ContainsFunc(report.Notes, func(n string) bool { return strings.HasPrefix(n, "resource fit predicted") }) {
		t.Errorf("dsguard check does not say it predicted resource fit: notes %q", report.Notes)
	}
	got := map[string]fit.Outcome{}
	for _, r := range report.Results {
		if r.Fit != nil && r.Fit.Covered() == 1 {
			got[r.Name] = r.Fit.Outcomes()[0].Outcome
		}
	}
	return got
}

// settle waits until every agent Pod is bound, or Pending without a
// nominated node, and the picture stays the same for three polls; on the
// way it finalizes the Pods the scheduler preempted (no kubelet does it)
// and records them as victims of their node's scenario.
func settle(ctx context.Context, t *testing.T, scenarios []*scenario) map[string]*observed {
	t.Helper()
	var mu sync.Mutex
	victims := map[string][]string{} // scenario → preempted Pods
	var last string
	stable := 0
	var obs map[string]*observed
	err := waitFor(ctx, time.Second, func() (bool, error) {
		fillers, err := client.CoreV1().Pods(fillNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		deleting := 0
		for i := range fillers.Items {
			p := &fillers.Items[i]
			if p.DeletionTimestamp == nil {
				continue
			}
			deleting++
			mu.Lock()
			id := p.Labels[scenarioLabel]
			if !slices.Contains(victims[id], p.Name) {
				victims[id] = append(victims[id], p.Name)
			}
			mu.Unlock()
			if err := client.CoreV1().Pods(fillNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				t.Logf("finalizing %s: %v", p.Name, err)
			}
		}
		agents, err := client.CoreV1().Pods(agentNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		obs = map[string]*observed{}
		settled := deleting == 0
		for i := range agents.Items {
			p := &agents.Items[i]
			o := &observed{victims: slices.Sorted(slices.Values(victims[p.Labels[scenarioLabel]]))}
			switch {
			case p.Spec.NodeName != "":
				o.bound = true
			case p.Status.NominatedNodeName != "":
				settled = false
			default:
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
						o.pending = c.Message
					}
				}
				if o.pending == "" {
					settled = false
				}
			}
			obs[p.Labels[scenarioLabel]] = o
		}
		if len(obs) < len(scenarios) {
			settled = false
		}
		var b strings.Builder
		for _, s := range scenarios {
			if o := obs[s.id]; o != nil {
				fmt.Fprintf(&b, "%s %v %q %v;", s.id, o.bound, o.pending, o.victims)
			}
		}
		if !settled || b.String() != last {
			last, stable = b.String(), 0
			return false, nil
		}
		stable++
		return stable >= 3, nil
	})
	if err != nil {
		bound, pending := 0, 0
		for _, o := range obs {
			if o.bound {
				bound++
			} else if o.pending != "" {
				pending++
			}
		}
		t.Fatalf("the agents did not settle: %v (%d of %d agent Pods seen, %d bound, %d pending)", err, len(obs), len(scenarios), bound, pending)
	}
	return obs
}

// compare returns what differs between the prediction and what the
// scheduler did, or "".
func compare(p fit.Outcome, o *observed) string {
	if o == nil {
		return "no agent Pod"
	}
	var want []string
	for _, v := range p.Victims {
		want = append(want, strings.TrimPrefix(v.Key, fillNamespace+"/"))
	}
	slices.Sort(want)
	switch p.Kind {
	case fit.Fits, fit.Preempts:
		if !o.bound {
			return fmt.Sprintf("the scheduler left it Pending: %s", o.pending)
		}
		if !slices.Equal(want, o.victims) {
			return fmt.Sprintf("the scheduler preempted %v, predicted %v", o.victims, want)
		}
		return ""
	}
	if o.bound {
		return fmt.Sprintf("the scheduler bound it (preempting %v)", o.victims)
	}
	if len(o.victims) > 0 {
		return fmt.Sprintf("the scheduler preempted %v and left it Pending", o.victims)
	}
	filter, preemption, ok := strings.Cut(o.pending, " preemption: ")
	if !ok {
		return fmt.Sprintf("no preemption part in the message %q", o.pending)
	}
	if got, _ := histogram(filter); !slices.Equal(ones(got), sorted(p.Reasons)) {
		return fmt.Sprintf("the scheduler's reasons for the node are %q, predicted %q (message %q)", ones(got), p.Reasons, o.pending)
	}
	switch {
	case p.PreemptionMessage != "":
		if strings.TrimSpace(preemption) != p.PreemptionMessage {
			return fmt.Sprintf("preemption said %q, predicted %q", preemption, p.PreemptionMessage)
		}
	case slices.Equal(p.PreemptionReasons, []string{fit.ReasonPreemptionNotHelpful}):
		got, total := histogram(preemption)
		if len(got) != 1 || got[fit.ReasonPreemptionNotHelpful] != total {
			return fmt.Sprintf("preemption said %q, predicted the node is no candidate", preemption)
		}
	default:
		got, _ := histogram(preemption)
		if !slices.Equal(ones(got), sorted(p.PreemptionReasons)) {
			return fmt.Sprintf("preemption's reasons for the node are %q, predicted %q (message %q)", ones(got), p.PreemptionReasons, preemption)
		}
	}
	return ""
}

// histogram parses "0/N nodes are available: 1 reason, M other reason."
// into reason → count, and N.
func histogram(s string) (map[string]int, int) {
	head, body, ok := strings.Cut(strings.TrimSpace(s), " nodes are available: ")
	if !ok {
		return nil, 0
	}
	_, n, _ := strings.Cut(head, "/")
	total, _ := strconv.Atoi(n)
	out := map[string]int{}
	for _, part := range strings.Split(strings.TrimSuffix(body, "."), ", ") {
		c, reason, ok := strings.Cut(part, " ")
		if k, err := strconv.Atoi(c); ok && err == nil {
			out[reason] += k
		}
	}
	return out, total
}

// ones returns the reasons counted once: the scenario's node (every other
// node is turned away by the node affinity that pins the Pod).
func ones(h map[string]int) []string {
	var out []string
	for reason, k := range h {
		if k == 1 {
			out = append(out, reason)
		}
	}
	slices.Sort(out)
	return out
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func describe(p fit.Outcome) string {
	s := fmt.Sprintf("%s %q", p.Kind, p.Reasons)
	if len(p.Victims) > 0 {
		s += fmt.Sprintf(" victims %v", p.Victims)
	}
	if p.PreemptionMessage != "" || len(p.PreemptionReasons) > 0 {
		s += fmt.Sprintf(" preemption %q%q", p.PreemptionReasons, p.PreemptionMessage)
	}
	return s
}

func describeNode(s *scenario) string {
	var b strings.Builder
	a := s.node.Status.Allocatable
	fmt.Fprintf(&b, "cpu %s memory %s pods %s", a.Cpu(), a.Memory(), a.Pods())
	if q, ok := a[dongle]; ok {
		fmt.Fprintf(&b, " dongle %s", q.String())
	}
	for _, p := range s.filler {
		fmt.Fprintf(&b, "; %s prio %d req %v ports %v anti %v", p.Name, ptr.Deref(p.Spec.Priority, 0),
			p.Spec.Containers[0].Resources.Requests, p.Spec.Containers[0].Ports, p.Spec.Affinity != nil)
	}
	return b.String()
}

func describeAgent(s *scenario) string {
	sp := &s.ds.Spec.Template.Spec
	return fmt.Sprintf("class %q req %v init %d ports %v affinity %v", sp.PriorityClassName, sp.Containers[0].Resources.Requests,
		len(sp.InitContainers), sp.Containers[0].Ports, sp.Affinity)
}
