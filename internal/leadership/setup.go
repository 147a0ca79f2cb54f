package leadership

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Default timing of leader election, as controller-runtime's defaults: a candidate takes a lease left
// unrenewed for LeaseDuration; the leader gives up when it has not renewed for RenewDeadline and writes
// only within RenewDeadline of its last renewal.
const (
	LeaseDuration = 15 * time.Second
	RenewDeadline = 10 * time.Second
	RetryPeriod   = 2 * time.Second
)

// Timing is how leader election counts (see LeaseDuration, RenewDeadline and RetryPeriod).
type Timing struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// DefaultTiming is the timing of the defaults above.
var DefaultTiming = Timing{LeaseDuration: LeaseDuration, RenewDeadline: RenewDeadline, RetryPeriod: RetryPeriod}

// BindFlags registers --leader-elect-lease-duration, --leader-elect-renew-deadline and
// --leader-elect-retry-period, which default to t.
func (t *Timing) BindFlags(fs *flag.FlagSet) {
	fs.DurationVar(&t.LeaseDuration, "leader-elect-lease-duration", t.LeaseDuration,
		"How long a candidate waits, after the last renewal it saw, before it takes the leader lease.")
	fs.DurationVar(&t.RenewDeadline, "leader-elect-renew-deadline", t.RenewDeadline,
		"How long the leader goes on, and writes, without renewing its lease; shorter than the lease duration.")
	fs.DurationVar(&t.RetryPeriod, "leader-elect-retry-period", t.RetryPeriod,
		"How often the leader renews its lease and a candidate tries to take it; shorter than the renew deadline.")
}

// Check tells whether the leader surely gives up before another replica may take its lease.
func (t Timing) Check() error {
	if t.RetryPeriod <= 0 || t.RetryPeriod >= t.RenewDeadline || t.RenewDeadline >= t.LeaseDuration {
		return errors.New("leader election needs 0 < retry period < renew deadline < lease duration")
	}
	return nil
}

// Election is what a program needs to elect a leader that does not write once it may have lost.
type Election struct {
	// Lock goes to the manager's LeaderElectionResourceLockInterface.
	Lock resourcelock.Interface
	// Config is the program's config with every mutating request passing Guard.
	Config *rest.Config
	Guard  *Guard
	// Identity names this replica in the lease.
	Identity string
	Timing   Timing
}

// NewElection prepares leader election on the Lease namespace/name with the cluster of cfg.
func NewElection(cfg *rest.Config, namespace, name string, timing Timing) (*Election, error) {
	if err := timing.Check(); err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	id := host + "_" + string(uuid.NewUUID())
	lockCfg := rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	// One hung request must not outlast the renew deadline.
	lockCfg.Timeout = timing.RenewDeadline / 2
	core, err := corev1client.NewForConfig(lockCfg)
	if err != nil {
		return nil, err
	}
	coordination, err := coordinationv1client.NewForConfig(lockCfg)
	if err != nil {
		return nil, err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, core, coordination,
		resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return nil, fmt.Errorf("leader election lock: %w", err)
	}
	guard := &Guard{Term: timing.RenewDeadline, Clock: clock.RealClock{}, Identity: id}
	return &Election{Lock: guard.Lock(lock), Config: guard.Wrap(cfg), Guard: guard, Identity: id, Timing: timing}, nil
}

// Apply sets the manager's leader election to this one; a nil Election leaves it off.
func (e *Election) Apply(o manager.Options) manager.Options {
	if e == nil {
		o.LeaderElection = false
		return o
	}
	o.LeaderElection = true
	o.LeaderElectionResourceLockInterface = e.Lock
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = ptr.To(e.Timing.LeaseDuration), ptr.To(e.Timing.RenewDeadline), ptr.To(e.Timing.RetryPeriod)
	// A replica stopped on purpose hands the lease on at once instead of after its expiry.
	o.LeaderElectionReleaseOnCancel = true
	return o
}
