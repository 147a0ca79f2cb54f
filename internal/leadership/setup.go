package leadership

import (
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

// Timing of leader election, as controller-runtime's defaults: a candidate takes a lease left
// unrenewed for LeaseDuration; the leader gives up when it has not renewed for RenewDeadline and writes
// only within RenewDeadline of its last renewal.
const (
	LeaseDuration = 15 * time.Second
	RenewDeadline = 10 * time.Second
	RetryPeriod   = 2 * time.Second
)

// Election is what a program needs to elect a leader that does not write once it may have lost.
type Election struct {
	// Lock goes to the manager's LeaderElectionResourceLockInterface.
	Lock resourcelock.Interface
	// Config is the program's config with every mutating request passing Guard.
	Config *rest.Config
	Guard  *Guard
	// Identity names this replica in the lease.
	Identity string
}

// NewElection prepares leader election on the Lease namespace/name with the cluster of cfg.
func NewElection(cfg *rest.Config, namespace, name string) (*Election, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	id := host + "_" + string(uuid.NewUUID())
	lockCfg := rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	// One hung request must not outlast the renew deadline.
	lockCfg.Timeout = RenewDeadline / 2
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
	guard := &Guard{Term: RenewDeadline, Clock: clock.RealClock{}, Identity: id}
	return &Election{Lock: guard.Lock(lock), Config: guard.Wrap(cfg), Guard: guard, Identity: id}, nil
}

// Apply sets the manager's leader election to this one; a nil Election leaves it off.
func (e *Election) Apply(o manager.Options) manager.Options {
	if e == nil {
		o.LeaderElection = false
		return o
	}
	o.LeaderElection = true
	o.LeaderElectionResourceLockInterface = e.Lock
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = ptr.To(LeaseDuration), ptr.To(RenewDeadline), ptr.To(RetryPeriod)
	// A replica stopped on purpose hands the lease on at once instead of after its expiry.
	o.LeaderElectionReleaseOnCancel = true
	return o
}
