// Package workerclusterset carries out what dispatch/clusterset decides for each WorkerClusterSet: it
// reads the set's selection (ClusterProfiles by label, or an Open Cluster Management Placement's
// PlacementDecisions), the hub's WorkerClusters and the Workloads that still need a leaving cluster, and
// writes the plan.
package workerclusterset

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ocm "open-cluster-management.io/api/cluster/v1beta1"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/dispatch/clusterset"
)

// Reconciler syncs WorkerClusterSets.
type Reconciler struct {
	Client client.Client
	// Profiles and Decisions read ClusterProfiles and PlacementDecisions in Namespace: the cache when
	// their CRD was served at start (and they are watched), the API server otherwise.
	Profiles, Decisions client.Reader
	WatchProfiles       bool
	WatchDecisions      bool
	Namespace           string
	Clock               clock.Clock
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	allSets := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		if o.GetNamespace() != r.Namespace {
			return nil
		}
		var sets gantry.WorkerClusterSetList
		if err := r.Client.List(ctx, &sets); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(sets.Items))
		for _, s := range sets.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&s)})
		}
		return reqs
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("hub-workerclusterset").
		For(&gantry.WorkerClusterSet{}).
		Owns(&gantry.WorkerCluster{})
	if r.WatchProfiles {
		b = b.Watches(&inventory.ClusterProfile{}, allSets)
	}
	if r.WatchDecisions {
		b = b.Watches(&ocm.PlacementDecision{}, allSets)
	}
	return b.Complete(r)
}

// Reconcile reads the set's view, decides and writes the plan.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var set gantry.WorkerClusterSet
	if err := r.Client.Get(ctx, req.NamespacedName, &set); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if set.DeletionTimestamp != nil {
		return ctrl.Result{}, nil // its WorkerClusters go with it, through their owner references
	}
	v, err := r.view(ctx, &set)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan := clusterset.Decide(v)
	return ctrl.Result{RequeueAfter: plan.RequeueAfter}, r.apply(ctx, &set, plan)
}

func (r *Reconciler) view(ctx context.Context, set *gantry.WorkerClusterSet) (clusterset.View, error) {
	v := clusterset.View{Now: r.Clock.Now(), Set: set, WorkerClusters: map[string]*gantry.WorkerCluster{}, Needed: map[string][]string{}}
	var err error
	if v.Selected, v.Problem, err = r.selection(ctx, set); err != nil {
		return v, err
	}
	var wcs gantry.WorkerClusterList
	if err := r.Client.List(ctx, &wcs); err != nil {
		return v, err
	}
	selected := map[string]bool{}
	for _, name := range v.Selected {
		selected[name] = true
	}
	// Only a cluster the set made that left the selection needs its Workloads counted.
	var leaving []string
	for i := range wcs.Items {
		wc := &wcs.Items[i]
		v.WorkerClusters[wc.Name] = wc
		if clusterset.MadeBy(set, wc) && !selected[wc.Name] && v.Problem == nil {
			leaving = append(leaving, wc.Name)
		}
	}
	if len(leaving) == 0 {
		return v, nil
	}
	var wls gantry.WorkloadList
	if err := r.Client.List(ctx, &wls, client.UnsafeDisableDeepCopy); err != nil {
		return v, err
	}
	for _, name := range leaving {
		running, nominated := dispatch.OnCluster(name, wls.Items)
		v.Needed[name] = append(running, nominated...)
	}
	return v, nil
}

// selection lists the clusters the set selects, or why it cannot be read; errors are the API server's.
func (r *Reconciler) selection(ctx context.Context, set *gantry.WorkerClusterSet) ([]string, *clusterset.Problem, error) {
	if ref := set.Spec.PlacementRef; ref != nil {
		var list ocm.PlacementDecisionList
		err := r.Decisions.List(ctx, &list, client.InNamespace(r.Namespace), client.MatchingLabels{ocm.PlacementLabel: ref.Name})
		if problem := notServed(err, "PlacementDecisions ("+ocm.GroupVersion.String()+")"); problem != nil || err != nil {
			return nil, problem, ignoreProblem(err, problem)
		}
		var names []string
		for _, d := range list.Items {
			for _, c := range d.Status.Decisions {
				names = append(names, c.ClusterName)
			}
		}
		return names, nil, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.ClusterProfileSelector)
	if err != nil {
		return nil, &clusterset.Problem{Reason: gantry.ReasonInvalidSelector, Message: err.Error()}, nil
	}
	var list inventory.ClusterProfileList
	err = r.Profiles.List(ctx, &list, client.InNamespace(r.Namespace), client.MatchingLabelsSelector{Selector: selector})
	if problem := notServed(err, "ClusterProfiles ("+inventory.GroupVersion.String()+")"); problem != nil || err != nil {
		return nil, problem, ignoreProblem(err, problem)
	}
	names := make([]string, 0, len(list.Items))
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names, nil, nil
}

// notServed is the problem of a selection whose API the hub does not serve.
func notServed(err error, what string) *clusterset.Problem {
	if err != nil && (apimeta.IsNoMatchError(err) || runtime.IsNotRegisteredError(err)) {
		return &clusterset.Problem{Reason: gantry.ReasonSelectionAPINotServed, Message: "the hub's API server does not serve " + what}
	}
	return nil
}

func ignoreProblem(err error, problem *clusterset.Problem) error {
	if problem != nil {
		return nil
	}
	return err
}

// apply writes the plan: each write on its own, then the status.
func (r *Reconciler) apply(ctx context.Context, set *gantry.WorkerClusterSet, plan clusterset.Plan) error {
	var errs []error
	for _, wc := range plan.Create {
		if err := r.Client.Create(ctx, wc); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("creating WorkerCluster %s: %w", wc.Name, err))
		}
	}
	for _, wc := range plan.Update {
		if err := r.Client.Update(ctx, wc); err != nil {
			errs = append(errs, fmt.Errorf("updating WorkerCluster %s: %w", wc.Name, err))
		}
	}
	for _, wc := range plan.Delete {
		uid := wc.UID
		if err := r.Client.Delete(ctx, wc, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("removing WorkerCluster %s: %w", wc.Name, err))
		}
	}
	if plan.Status != nil {
		set.Status = *plan.Status
		if err := r.Client.Status().Update(ctx, set); err != nil {
			errs = append(errs, fmt.Errorf("writing the status of WorkerClusterSet %s: %w", set.Name, err))
		}
	}
	return errors.Join(errs...)
}
