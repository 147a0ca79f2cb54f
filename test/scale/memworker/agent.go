package memworker

import (
	"context"
	"errors"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/agent/controller"
	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// agentScheme knows the kinds the agent reads and writes.
var agentScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gantry.AddToScheme, batchv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// agent runs the passes of Gantry's agent (agent/controller) on the store, in process: the same
// decisions, Admitted conditions and CapacityReport as gantry-agent's, read and written without a cache
// or HTTP. Any change of a copy, Job, node, pod or lease, and a report made or removed, asks for a
// pass; passes run one at a time, and the pass's own requeue (the report's heartbeat, a timeout due)
// asks for the next. It writes no Events.
type agent struct {
	reconciler *controller.Reconciler
	wake       chan struct{}
	cancel     context.CancelFunc
	done       chan struct{}
}

// retry bounds the wait after a pass that failed.
const (
	minRetry = 50 * time.Millisecond
	maxRetry = 30 * time.Second
)

// StartAgent starts the worker's agent with opts (as gantry-agent's flags set them; an empty cluster
// name is the worker's). Nodes created before it starts are in its first report; later ones follow.
func (s *Server) StartAgent(opts controller.Options) error {
	if s.agent != nil {
		return errors.New("the agent of " + s.name + " runs already")
	}
	if opts.ClusterName == "" {
		opts.ClusterName = s.name
	}
	c := newLocalClient(s.store, agentScheme, s.writes, ClientAgent)
	rec, err := controller.NewReconciler(c, &events.FakeRecorder{}, clock.RealClock{}, opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &agent{reconciler: rec, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	s.store.listen(func(e event) {
		if wakesAgent(e) {
			a.poke()
		}
	})
	s.agent = a
	go a.run(ctx)
	return nil
}

// wakesAgent says whether a change asks for a pass: the changes gantry-agent watches, but the updates
// of capacity reports, which are its own.
func wakesAgent(e event) bool {
	switch e.res.name {
	case "capacityreports":
		return e.typ != watch.Modified
	case "workloads":
		return isCopy(e.obj) || (e.prev != nil && isCopy(e.prev))
	case "jobs", "nodes", "pods", "leases":
		return true
	}
	return false
}

func isCopy(o *object) bool {
	_, ok := o.labels[gantry.WorkloadUIDLabel]
	return ok
}

func (a *agent) poke() {
	select {
	case a.wake <- struct{}{}:
	default: // a pass is asked for already
	}
}

func (a *agent) run(ctx context.Context) {
	defer close(a.done)
	next := time.NewTimer(0)
	defer next.Stop()
	retry := minRetry
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		case <-next.C:
		}
		result, err := a.reconciler.Reconcile(ctx, reconcile.Request{})
		wait := result.RequeueAfter
		if err != nil {
			wait, retry = retry, min(2*retry, maxRetry)
		} else {
			retry = minRetry
		}
		if !next.Stop() {
			select {
			case <-next.C:
			default:
			}
		}
		if wait > 0 {
			next.Reset(wait)
		}
	}
}

func (a *agent) stop() {
	a.cancel()
	<-a.done
}
