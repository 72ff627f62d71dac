package audit

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Elected runs a runnable (the Auditor) only while this replica holds a Lease
// of its own. The manager runs without leader election: losing this lease
// stops the runnable and nothing else, so admission keeps answering from its
// caches while the API server is out of reach, and the replica campaigns again
// once it is back. (controller-runtime's leader election ends the whole
// process on a lost lease, cutting off in-flight reviews.)
type Elected struct {
	// Runnable runs while leading; its context ends when the lease is lost.
	Runnable manager.Runnable
	// Lock is the Lease; see NewLeaseLock.
	Lock resourcelock.Interface
	// Log receives leadership changes.
	Log logr.Logger
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's; zero
	// means DefaultLeaseDuration, DefaultRenewDeadline, DefaultRetryPeriod.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// The audit lease's defaults are slower than controller-runtime's (15s, 10s,
// 2s). The leader renews once per retry period, and at 2s those renewals,
// each a request and the wakeups of the goroutines that carry it, were most
// of what an idle dsguard did. Nothing waits on the auditor as it waits on
// the webhook: a takeover within a lease duration (a minute) after a leader
// vanishes, or a retry period after it hands the lease back on shutdown, is
// soon enough for Events and metrics. A longer renew deadline also lets the
// leader ride out a longer API server outage without giving up the lease.
const (
	DefaultLeaseDuration = 60 * time.Second
	DefaultRenewDeadline = 40 * time.Second
	DefaultRetryPeriod   = 10 * time.Second
)

// NeedLeaderElection implements manager.LeaderElectionRunnable: Elected does
// its own election, so the manager starts it on every replica.
func (e *Elected) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: it campaigns, runs Runnable while
// leading, and campaigns again after losing the lease, until ctx ends. On
// shutdown, and when Runnable stops on its own (an error), the lease is
// released, so another replica takes over at once.
func (e *Elected) Start(ctx context.Context) error {
	cfg := leaderelection.LeaderElectionConfig{
		Lock:            e.Lock,
		Name:            e.Lock.Describe(),
		LeaseDuration:   orDefault(e.LeaseDuration, DefaultLeaseDuration),
		RenewDeadline:   orDefault(e.RenewDeadline, DefaultRenewDeadline),
		RetryPeriod:     orDefault(e.RetryPeriod, DefaultRetryPeriod),
		ReleaseOnCancel: true,
	}
	// The metric leader_election_master_status is labelled with the name;
	// keep it the Lease's own name.
	if l, ok := e.Lock.(*resourcelock.LeaseLock); ok {
		cfg.Name = l.LeaseMeta.Name
	}
	// client-go starts the callback in a goroutine and returns from Run
	// without waiting for it: the mutex keeps two runs from overlapping
	// when the lease is lost and won again quickly.
	var running sync.Mutex
	for ctx.Err() == nil {
		// One campaign. When the runnable stops while this replica still
		// leads (an error, or it returned), the campaign's context ends:
		// client-go then releases the lease (ReleaseOnCancel) instead of
		// renewing it for an auditor that no longer runs, and another
		// replica takes over.
		campaign, endCampaign := context.WithCancel(ctx)
		stopped := make(chan struct{}, 1)
		cfg.Callbacks = leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				running.Lock()
				defer running.Unlock()
				if lctx.Err() != nil {
					return
				}
				e.Log.Info("acquired the lease: auditing", "lease", e.Lock.Describe())
				err := e.Runnable.Start(lctx)
				if lctx.Err() == nil {
					if err != nil {
						e.Log.Error(err, "the elected runnable stopped: releasing the lease", "lease", e.Lock.Describe())
					} else {
						e.Log.Info("the elected runnable returned: releasing the lease", "lease", e.Lock.Describe())
					}
					stopped <- struct{}{}
					endCampaign()
				}
			},
			OnStoppedLeading: func() {
				if campaign.Err() == nil {
					e.Log.Info("lost the lease: auditing stops, admission goes on; campaigning again", "lease", e.Lock.Describe())
				}
			},
		}
		le, err := leaderelection.NewLeaderElector(cfg)
		if err != nil {
			endCampaign()
			return err
		}
		le.Run(campaign)
		endCampaign()
		select {
		case <-stopped:
			// Give the other replicas a lease duration to take over before
			// this one campaigns again, so a runnable that fails at once
			// does not keep the lease by winning it back every time.
			select {
			case <-ctx.Done():
			case <-time.After(cfg.LeaseDuration):
			}
		default:
		}
	}
	running.Lock() // the last run has ended
	running.Unlock()
	return nil
}

// NewLeaseLock returns the Lease namespace/name with this process's identity
// (hostname and a random suffix, as controller-runtime's). A change of leader
// is recorded as a LeaderElection Event on the Lease through recorder (nil for
// none), as controller-runtime's own leader election does, so `kubectl get
// events` shows which replica audits.
func NewLeaseLock(cfg *rest.Config, namespace, name string, recorder resourcelock.EventRecorder) (resourcelock.Interface, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "dsguard-leader-election"))
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	return resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID()), EventRecorder: recorder})
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
