package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/internal/view"
)

func newExplainCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "explain JOB",
		Short: "Why a job waits, where it runs and what happened to it, in plain words",
		Long: `explain tells a job's story from what the hub knows: what it asks for, its state and position in
its GlobalQueue, and for each cluster of that queue what keeps it from taking the job (quota left, the
capacity its agent reported, the agent's own reason with numbers, rejections); then its dispatch history
(epochs, copies, evictions, the winner) and the status of its Job on the cluster it runs on.
JOB is the name of the Job (or of its Workload) in the namespace.`,
		Example:           `  kubectl gantry explain train-llm -n team-a`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: jobNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			c, err := o.NewClient()
			if err != nil {
				return err
			}
			lines, err := o.explain(cmd.Context(), c, ns, args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(o.Out, strings.Join(lines, "\n"))
			return err
		},
	}
}

// explain reads what the hub knows of the job and tells it.
func (o *Options) explain(ctx context.Context, c client.Client, ns, name string) ([]string, error) {
	wl, err := findWorkload(ctx, c, ns, name)
	if err != nil {
		return nil, err
	}
	if wl == nil {
		return o.explainWithoutWorkload(ctx, c, ns, name)
	}
	f := view.Facts{Workload: wl, Now: o.now()}
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
	if err := note("Queues", readQueues(ctx, c, wl, &f)); err != nil {
		return nil, fmt.Errorf("reading the queues of Workload %s/%s: %w", ns, wl.Name, err)
	}
	if err := note("WorkerClusters", readClusters(ctx, c, &f)); err != nil {
		return nil, fmt.Errorf("listing WorkerClusters on the hub: %w", err)
	}
	positions, err := o.positions(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	f.Position = positions[ns+"/"+wl.Name]
	return view.Explain(f), nil
}

// findWorkload is the Workload of the Job name in ns, or the Workload of that name; nil when neither exists.
func findWorkload(ctx context.Context, c client.Client, ns, name string) (*gantry.Workload, error) {
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

func readOwnerJob(ctx context.Context, c client.Client, wl *gantry.Workload, f *view.Facts) error {
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

// readQueues reads the workload's Queue and the GlobalQueue it is dispatched under: the one its Queue
// names while it waits, the one its quota was taken from once admitted.
func readQueues(ctx context.Context, c client.Client, wl *gantry.Workload, f *view.Facts) error {
	var q gantry.Queue
	if err := c.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: wl.Spec.QueueName}, &q); err == nil {
		f.Queue = &q
	} else if !apierrors.IsNotFound(err) {
		return err
	}
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

func readClusters(ctx context.Context, c client.Client, f *view.Facts) error {
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
func (o *Options) explainWithoutWorkload(ctx context.Context, c client.Client, ns, name string) ([]string, error) {
	var job batchv1.Job
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no Job or Workload %s in namespace %s on the hub", name, ns)
		}
		return nil, fmt.Errorf("reading Job %s/%s on the hub: %w", ns, name, err)
	}
	var events eventsv1.EventList
	if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("listing events in %s on the hub: %w", ns, err)
	}
	return view.ExplainWithoutWorkload(&job, events.Items, o.now()), nil
}

// jobNames completes the names of the Jobs the hub has Workloads for in the namespace.
func jobNames(o *Options) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, err := o.namespace()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		c, err := o.NewClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var wls gantry.WorkloadList
		if err := c.List(cmd.Context(), &wls, client.InNamespace(ns)); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		names := make([]string, 0, len(wls.Items))
		for i := range wls.Items {
			names = append(names, view.JobOrWorkloadName(&wls.Items[i]))
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
