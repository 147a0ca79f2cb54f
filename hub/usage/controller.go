// Package usage keeps each namespace's Usage: it reads the namespace's Workloads that ran, its Usage and
// the WorkerClusters from the hub's cache, has dispatch/accounting decide, and writes the plan in its
// order: the Usage (with optimistic concurrency, so that a stale read counts nothing twice), then the
// Workloads' marks, then the release of deleted Workloads.
package usage

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch/accounting"
)

// Reconciler keeps the Usage of one namespace per request (the request's name is the namespace).
type Reconciler struct {
	Client client.Client
	Clock  clock.PassiveClock
}

// SetupWithManager registers the controller: a Workload that ran, ended a run, was marked or is being
// deleted, and a Usage, ask for their namespace.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &gantry.Workload{}, countedIndex, func(o client.Object) []string {
		if counts(o) {
			return []string{"true"}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing the Workloads the accounting reads: %w", err)
	}
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("hub-usage").
		Watches(&gantry.Workload{}, toNamespace, builder.WithPredicates(accountable)).
		Watches(&gantry.Usage{}, toNamespace).
		Complete(r)
}

// accountable lets through the Workload events that may change what a Usage counts.
var accountable = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return counts(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*gantry.Workload)
		n, ok2 := e.ObjectNew.(*gantry.Workload)
		return !ok1 || !ok2 || !equality.Semantic.DeepEqual(o.Status.Runs, n.Status.Runs) ||
			o.Status.AccountedEpoch != n.Status.AccountedEpoch || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
			!slices.Equal(o.Finalizers, n.Finalizers)
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return true },
}

// countedIndex indexes the Workloads the accounting reads (counts): a namespace's pass reads those,
// not every Workload that waits there.
const countedIndex = "gantry.dev/usage-counted"

// counts says whether the accounting reads the Workload: it ran, or it is being deleted.
func counts(o client.Object) bool {
	wl, ok := o.(*gantry.Workload)
	return !ok || len(wl.Status.Runs) > 0 || wl.DeletionTimestamp != nil
}

// Reconcile accounts one namespace.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := req.Name
	in, usage, err := r.read(ctx, ns)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan := accounting.Account(in)
	if plan.Usage != nil {
		if err := r.writeUsage(ctx, ns, usage, plan.Usage); err != nil {
			return ctrl.Result{}, err
		}
	}
	var errs []error
	for _, wl := range in.Workloads {
		errs = append(errs, r.carryOut(ctx, wl, plan))
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// read gathers the namespace's Workloads that the accounting reads, its Usage (nil when it has none)
// and the clusters.
func (r *Reconciler) read(ctx context.Context, ns string) (accounting.Namespace, *gantry.Usage, error) {
	in := accounting.Namespace{Now: r.Clock.Now()}
	var wls gantry.WorkloadList
	if err := r.Client.List(ctx, &wls, client.InNamespace(ns), client.MatchingFields{countedIndex: "true"}); err != nil {
		return in, nil, fmt.Errorf("listing the Workloads of %s: %w", ns, err)
	}
	for i := range wls.Items {
		in.Workloads = append(in.Workloads, &wls.Items[i])
	}
	var clusters gantry.WorkerClusterList
	if err := r.Client.List(ctx, &clusters); err != nil {
		return in, nil, fmt.Errorf("listing WorkerClusters: %w", err)
	}
	in.Clusters = accounting.ClustersOf(clusters.Items)
	usage := &gantry.Usage{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: gantry.UsageName}, usage); {
	case apierrors.IsNotFound(err):
		usage = nil
	case err != nil:
		return in, nil, fmt.Errorf("reading the Usage of %s: %w", ns, err)
	default:
		in.Usage = &usage.Status
	}
	return in, usage, nil
}

// writeUsage writes the Usage's new status over the one the plan read, making the Usage when the
// namespace has none. A Usage changed since it was read fails the write: the next pass reads it again.
func (r *Reconciler) writeUsage(ctx context.Context, ns string, usage *gantry.Usage, st *gantry.UsageStatus) error {
	if usage == nil {
		usage = &gantry.Usage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gantry.UsageName}}
		if err := r.Client.Create(ctx, usage); err != nil {
			return fmt.Errorf("making the Usage of %s: %w", ns, err)
		}
	} else {
		usage = usage.DeepCopy()
	}
	usage.Status = *st
	if err := r.Client.Status().Update(ctx, usage); err != nil {
		return fmt.Errorf("writing the Usage of %s: %w", ns, err)
	}
	return nil
}

// carryOut writes the Workload's part of the plan: its mark, or its release; and the finalizer that
// holds it until its runs are counted, on one that ran without it (made before the hub kept usage).
func (r *Reconciler) carryOut(ctx context.Context, wl *gantry.Workload, plan accounting.Plan) error {
	if mark, ok := plan.Marks[wl.UID]; ok && mark > wl.Status.AccountedEpoch {
		patch := client.MergeFrom(wl.DeepCopy())
		wl.Status.AccountedEpoch = mark
		if err := r.Client.Status().Patch(ctx, wl, patch); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("marking the runs of %s counted: %w", client.ObjectKeyFromObject(wl), err))
		}
	}
	switch {
	case slices.Contains(plan.Release, wl.UID):
		patch := client.MergeFromWithOptions(wl.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(wl, gantry.UsageFinalizer)
		if err := r.Client.Patch(ctx, wl, patch); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("letting %s go: %w", client.ObjectKeyFromObject(wl), err))
		}
	case wl.DeletionTimestamp == nil && !controllerutil.ContainsFinalizer(wl, gantry.UsageFinalizer):
		patch := client.MergeFromWithOptions(wl.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(wl, gantry.UsageFinalizer)
		if err := r.Client.Patch(ctx, wl, patch); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("holding %s until its runs are counted: %w", client.ObjectKeyFromObject(wl), err))
		}
	}
	return nil
}
