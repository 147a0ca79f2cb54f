// Package facts reads from the hub what kubectl gantry and the hub's page tell about jobs: a job's
// Facts and the positions in the GlobalQueues, through any client.Reader (the user's client, the hub's
// cache). What they show is computed by package view.
package facts

import (
	"context"
	"fmt"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/view"
	"github.com/gantry-dev/gantry/jobkind"
)

// NotFoundError says the hub has no job (of the kind named, or of any kind) nor Workload of that name.
type NotFoundError struct {
	Namespace string
	Ref       view.JobRef
}

func (e *NotFoundError) Error() string {
	if e.Ref.Kind != nil {
		return fmt.Sprintf("no %s %s in namespace %s on the hub", e.Ref.Kind.Name(), e.Ref.Name, e.Namespace)
	}
	var kinds []string
	for _, k := range jobkind.All() {
		kinds = append(kinds, string(k.Name()))
	}
	return fmt.Sprintf("no %s, nor Workload, named %s in namespace %s on the hub", strings.Join(kinds, ", "), e.Ref.Name, e.Namespace)
}

// Explain reads what the hub knows of the referenced job (or Workload) in ns and tells it in plain
// words (Explanation).
func Explain(ctx context.Context, c client.Reader, ns string, ref view.JobRef, now time.Time, warn func(string)) ([]string, error) {
	e, err := Explanation(ctx, c, ns, ref, now, warn)
	if err != nil {
		return nil, err
	}
	return e.Lines(now), nil
}

// Explanation reads what the hub knows of the referenced job (or Workload) in ns and explains it
// (view.Explain). What the reader may not read is left out and said; warn hears how positions were
// counted.
func Explanation(ctx context.Context, c client.Reader, ns string, ref view.JobRef, now time.Time, warn func(string)) (*view.Explanation, error) {
	wl, err := findWorkload(ctx, c, ns, ref)
	if err != nil {
		return nil, err
	}
	if wl == nil {
		return explainWithoutWorkload(ctx, c, ns, ref)
	}
	f := view.Facts{Workload: wl, Now: now}
	note := func(kind string, err error) error {
		if apierrors.IsForbidden(err) {
			f.Unreadable = append(f.Unreadable, kind)
			return nil
		}
		return ignoreAbsent(err)
	}
	kind := jobkind.Of(wl)
	if err := note(view.KindPlural(kind), readOwnerJob(ctx, c, wl, &f)); err != nil {
		return nil, fmt.Errorf("reading the %s of Workload %s/%s: %w", kind.Name(), ns, wl.Name, err)
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
	e := view.Explain(f)
	return &e, nil
}

// ignoreAbsent ignores what is not there: an object not found, or a kind the hub does not serve (its
// CRD is not installed).
func ignoreAbsent(err error) error {
	if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
		return nil
	}
	return err
}

// findWorkload is the Workload of the referenced job in ns (view.PickWorkload), or, for a name without
// a kind, the Workload of that name; nil when there is none.
func findWorkload(ctx context.Context, c client.Reader, ns string, ref view.JobRef) (*gantry.Workload, error) {
	var wls gantry.WorkloadList
	if err := c.List(ctx, &wls, client.InNamespace(ns), client.MatchingLabels{gantry.JobNameLabel: ref.Name}); err != nil {
		return nil, fmt.Errorf("listing Workloads in %s on the hub: %w", ns, err)
	}
	if wl, err := view.PickWorkload(ns, ref, wls.Items); wl != nil || err != nil || ref.Kind != nil {
		return wl, err
	}
	var wl gantry.Workload
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &wl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Workload %s/%s on the hub: %w", ns, ref.Name, err)
	}
	return &wl, nil
}

// readOwnerJob reads the hub's job the Workload stands for: its controller, of the Workload's kind.
func readOwnerJob(ctx context.Context, c client.Reader, wl *gantry.Workload, f *view.Facts) error {
	kind := jobkind.Of(wl)
	gvk := kind.GroupVersionKind()
	ref := metav1.GetControllerOf(wl)
	if ref == nil || ref.Kind != gvk.Kind {
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != gvk.Group {
		return nil
	}
	job := kind.New()
	if err := c.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: ref.Name}, job); err != nil {
		return err
	}
	if job.GetUID() != ref.UID {
		// The job was deleted and submitted again under its name: the Workload is the earlier job's.
		f.Successor = job
		return nil
	}
	f.Job = job
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

// explainWithoutWorkload tells about a job the hub has no Workload for, from its events.
func explainWithoutWorkload(ctx context.Context, c client.Reader, ns string, ref view.JobRef) (*view.Explanation, error) {
	kind, job, err := findJob(ctx, c, ns, ref)
	if err != nil {
		return nil, err
	}
	var events eventsv1.EventList
	err = c.List(ctx, &events, client.InNamespace(ns))
	if err != nil && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("listing events in %s on the hub: %w", ns, err)
	}
	e := view.ExplainWithoutWorkload(kind, job, events.Items, err == nil)
	return &e, nil
}

// findJob reads the referenced job in ns: of the kind named, else of whichever kind has a job of that
// name. A kind the hub does not serve has none; one the reader may not read is passed over while
// another kind has the job.
func findJob(ctx context.Context, c client.Reader, ns string, ref view.JobRef) (jobkind.Kind, client.Object, error) {
	kinds := jobkind.All()
	if ref.Kind != nil {
		kinds = []jobkind.Kind{ref.Kind}
	}
	var found []jobkind.Kind
	var job client.Object
	var denied error
	for _, k := range kinds {
		obj := k.New()
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, obj)
		switch {
		case err == nil:
			found, job = append(found, k), obj
		case apierrors.IsForbidden(err):
			denied = fmt.Errorf("reading %s %s/%s on the hub: %w", k.Name(), ns, ref.Name, err)
		case ignoreAbsent(err) != nil:
			return nil, nil, fmt.Errorf("reading %s %s/%s on the hub: %w", k.Name(), ns, ref.Name, err)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], job, nil
	case len(found) > 1:
		return nil, nil, &view.AmbiguousJobError{Namespace: ns, Name: ref.Name, Kinds: found}
	case denied != nil:
		return nil, nil, denied
	}
	return nil, nil, &NotFoundError{Namespace: ns, Ref: ref}
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
