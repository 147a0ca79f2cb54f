package controller

import (
	"context"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/kueue"
	"github.com/gantry-dev/gantry/jobkind"
)

// DefaultRediscoveryInterval is how often the agent looks again for the optional APIs its cluster did not
// serve yet: an administrator may install Kueue, a job kind's controller or turn on the PodGroup API while
// the agent runs, and the agent takes them up without a restart.
const DefaultRediscoveryInterval = time.Minute

// optionalAPI is an API the agent uses only where its cluster serves it: the kind it looks for, what it
// watches once found, and what it records of it.
type optionalAPI struct {
	gvk     schema.GroupVersionKind
	watches []watched
	found   func(r *Reconciler)
}

// watched is one kind the agent watches, and which of its changes ask for a pass.
type watched struct {
	obj  client.Object
	pred predicate.Predicate
}

// optionalAPIs are the PodGroup API, Kueue's, and the job kinds other than batch Jobs.
func optionalAPIs() []optionalAPI {
	generation := predicate.GenerationChangedPredicate{}
	apis := []optionalAPI{{
		gvk:     schedulingv1beta1.SchemeGroupVersion.WithKind("PodGroup"),
		watches: []watched{{&schedulingv1beta1.PodGroup{}, createdOrDeleted}},
		found:   func(r *Reconciler) { r.podGroups = true },
	}, {
		// Room comes and goes with a ClusterQueue's reservations; queues, cohorts and flavors change by
		// hand. Kueue's Workloads are read, not watched: their reservations show on the queues, and what
		// Kueue says of a job waiting there is read when its placement timeout wakes the pass.
		gvk: kueue.GroupVersion.WithKind("Workload"),
		watches: []watched{{&kueue.ClusterQueue{}, clusterQueueChanged}, {&kueue.LocalQueue{}, generation},
			{&kueue.Cohort{}, generation}, {&kueue.ResourceFlavor{}, generation}},
		found: func(r *Reconciler) { r.kueue = true },
	}}
	for _, k := range jobkind.All() {
		if k.Name() != gantryv1beta1.JobKindJob {
			name := k.Name()
			apis = append(apis, optionalAPI{gvk: k.GroupVersionKind(), watches: []watched{{k.New(), jobChanged}},
				found: func(r *Reconciler) { r.kinds[name] = true }})
		}
	}
	return apis
}

// discovery takes up the optional APIs as the cluster comes to serve them.
type discovery struct {
	mgr     manager.Manager
	ctrl    crcontroller.Controller
	enqueue handler.EventHandler
	found   chan event.GenericEvent // asks for a pass once an API is taken up
	missing []optionalAPI
}

// takeUp watches every missing API the cluster now serves and records it in r, under r.mu; the others
// stay missing.
func (d *discovery) takeUp(ctx context.Context, r *Reconciler) error {
	var still []optionalAPI
	for _, api := range d.missing {
		if !d.servesAll(api) {
			still = append(still, api)
			continue
		}
		for _, w := range api.watches {
			if err := d.ctrl.Watch(source.Kind(d.mgr.GetCache(), w.obj, d.enqueue, w.pred)); err != nil {
				return err
			}
		}
		r.mu.Lock()
		api.found(r)
		r.mu.Unlock()
		log.FromContext(ctx).Info("The cluster serves an optional API; the agent uses it from now on", "kind", api.gvk.String())
	}
	d.missing = still
	return nil
}

// servesAll says whether the cluster serves the API and every kind the agent watches of it: a group's
// CRDs are installed, and served, one by one.
func (d *discovery) servesAll(api optionalAPI) bool {
	if !serves(d.mgr, api.gvk) {
		return false
	}
	for _, w := range api.watches {
		gvk, err := apiutil.GVKForObject(w.obj, d.mgr.GetScheme())
		if err != nil || !serves(d.mgr, gvk) {
			return false
		}
	}
	return true
}

// rediscover looks for the missing APIs every Options.RediscoveryInterval until the cluster serves them all,
// and asks for a pass when it took one up: the pass reports it (GangScheduling, Kueue) and admits by it.
func (d *discovery) rediscover(ctx context.Context, r *Reconciler) error {
	for len(d.missing) > 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-r.clock.After(r.opts.RediscoveryInterval):
		}
		before := len(d.missing)
		if err := d.takeUp(ctx, r); err != nil {
			return err
		}
		if len(d.missing) < before {
			select {
			case d.found <- event.GenericEvent{Object: &gantryv1beta1.CapacityReport{}}:
			default: // a pass is already asked for
			}
		}
	}
	return nil
}
