// Package facts reads from the hub what kubectl gantry and the hub's page tell about jobs: a job's
// Facts and the positions in the GlobalQueues, through any client.Reader (the user's client, the hub's
// cache). What they show is computed by package view.
package facts

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/internal/view"
)

// NotFoundError says the hub has neither a Job nor a Workload of that name.
type NotFoundError struct{ Namespace, Name string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no Job or Workload %s in namespace %s on the hub", e.Name, e.Namespace)
}

// Explain reads what the hub knows of the Job (or Workload) name in ns and tells it (view.Explain).
// What the reader may not read is left out and said; warn hears how positions were counted.
func Explain(ctx context.Context, c client.Reader, ns, name string, now time.Time, warn func(string)) ([]string, error) {
	wl, err := findWorkload(ctx, c, ns, name)
	if err != nil {
		return nil, err
	}
	if wl == nil {
		return explainWithoutWorkload(ctx, c, ns, name, now)
	}
	f := view.Facts{Workload: wl, Now: now}
	note := func(kind string, err error) error {
		if apierrors.IsForbidden(err) {
			f.Unreadable = append(f.Unreadable, kind)
			return nil
		}
		return client.IgnoreNotFound(err)
	}
	if err := note("Jobs", readOwnerJob(ctx, c, wl, &f)); err != nil {
		return nil, fmt.Errorf("reading the Job of Workload %s/%s: %w", ns, wl.Name, err)
	}
	if err := note("Queues", readQueue(ctx, c, wl, &f)); err != nil {
		return nil, fmt.Errorf("reading the Queue of Workload %s/%s: %w", ns, wl.Name, err)
	}
	if err := note("GlobalQueues", readGlobalQueue(ctx, c, wl, &f)); err != nil {
		return nil, fmt.Errorf("reading the GlobalQueue of Workload %s/%s: %w", ns, wl.Name, err)
	}
	if err := note("WorkerClusters", readClusters(ctx, c, &f)); err != nil {
		return nil, fmt.Errorf("listing WorkerClusters on the hub: %w", err)
	}
	positions, _, err := Positions(ctx, c, ns, warn)
	if err != nil {
		return nil, err
	}
	f.Position = positions[ns+"/"+wl.Name]
	return view.Explain(f), nil
}

// findWorkload is the Workload of the Job name in ns, or the Workload of that name; nil when neither exists.
func findWorkload(ctx context.Context, c client.Reader, ns, name string) (*gantry.Workload, error) {
	var wls gantry.WorkloadList
	if err := c.List(ctx, &wls, client.InNamespace(ns), client.MatchingLabels{gantry.JobNameLabel: name}); err != nil {
		return nil, fmt.Errorf("listing Workloads in %s on the hub: %w", ns, err)
	}
	if len(wls.Items) > 0 {
		return &wls.Items[0], nil
	}
	var wl gantry.Workload
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &wl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Workload %s/%s on the hub: %w", ns, name, err)
	}
	return &wl, nil
}

func readOwnerJob(ctx context.Context, c client.Reader, wl *gantry.Workload, f *view.Facts) error {
	ref := metav1.GetControllerOf(wl)
	if ref == nil || ref.Kind != "Job" {
		return nil
	}
	var job batchv1.Job
	if err := c.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: ref.Name}, &job); err != nil {
		return err
	}
	f.Job = &job
	return nil
}

// readQueue reads the workload's Queue; nil when it does not exist.
func readQueue(ctx context.Context, c client.Reader, wl *gantry.Workload, f *view.Facts) error {
	var q gantry.Queue
	if err := c.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: wl.Spec.QueueName}, &q); err != nil {
		return err
	}
	f.Queue = &q
	return nil
}

// readGlobalQueue reads the GlobalQueue the workload is dispatched under: the one its Queue names while
// it waits, the one its quota was taken from once admitted.
func readGlobalQueue(ctx context.Context, c client.Reader, wl *gantry.Workload, f *view.Facts) error {
	gqName := wl.Status.GlobalQueue
	if state, _ := view.StateOf(wl); state == view.StatePending || gqName == "" {
		if f.Queue == nil {
			return nil
		}
		gqName = f.Queue.Spec.GlobalQueue
	}
	var gq gantry.GlobalQueue
	if err := c.Get(ctx, client.ObjectKey{Name: gqName}, &gq); err != nil {
		return err
	}
	f.GlobalQueue = &gq
	return nil
}

func readClusters(ctx context.Context, c client.Reader, f *view.Facts) error {
	var list gantry.WorkerClusterList
	if err := c.List(ctx, &list); err != nil {
		return err
	}
	f.Clusters = make(map[string]*gantry.WorkerCluster, len(list.Items))
	for i := range list.Items {
		f.Clusters[list.Items[i].Name] = &list.Items[i]
	}
	return nil
}

// explainWithoutWorkload tells about a Job the hub has no Workload for, from its events.
func explainWithoutWorkload(ctx context.Context, c client.Reader, ns, name string, now time.Time) ([]string, error) {
	var job batchv1.Job
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &NotFoundError{Namespace: ns, Name: name}
		}
		return nil, fmt.Errorf("reading Job %s/%s on the hub: %w", ns, name, err)
	}
	var events eventsv1.EventList
	err := c.List(ctx, &events, client.InNamespace(ns))
	if err != nil && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("listing events in %s on the hub: %w", ns, err)
	}
	if err != nil {
		return view.ExplainWithoutWorkload(&job, nil, false, now), nil
	}
	return view.ExplainWithoutWorkload(&job, events.Items, true, now), nil
}

// Positions counts positions over every Workload the reader may list: all namespaces when allowed,
// else ns only, which it tells warn. It returns the Queues it read with them (those of ns among them).
func Positions(ctx context.Context, c client.Reader, ns string, warn func(string)) (map[string]view.Position, []gantry.Queue, error) {
	var all gantry.WorkloadList
	var queues gantry.QueueList
	err := c.List(ctx, &all)
	if err == nil {
		err = c.List(ctx, &queues)
	}
	if apierrors.IsForbidden(err) && ns != "" {
		warn(fmt.Sprintf("Positions count only the workloads of namespace %s: you may not list Workloads and Queues in all namespaces.", ns))
		err = c.List(ctx, &all, client.InNamespace(ns))
		if err == nil {
			err = c.List(ctx, &queues, client.InNamespace(ns))
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing Workloads and Queues on the hub: %w", err)
	}
	return view.Positions(all.Items, queues.Items), queues.Items, nil
}
