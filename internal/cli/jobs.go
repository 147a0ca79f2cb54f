package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/facts"
	"github.com/gantry-dev/gantry/internal/view"
	"github.com/gantry-dev/gantry/jobkind"
)

// scope is where a command lists: one namespace or all, and a label selector.
type scope struct {
	allNamespaces bool
	selector      string
}

func (s *scope) addFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&s.allNamespaces, "all-namespaces", "A", false, "List in all namespaces.")
	cmd.Flags().StringVarP(&s.selector, "selector", "l", "", "Label selector, as kubectl takes it: -l team=vision,tier!=dev")
}

// listOptions are the client options of the scope, plus extra label requirements.
func (s *scope) listOptions(o *Options, extra ...labels.Requirement) ([]client.ListOption, string, error) {
	sel, err := labels.Parse(s.selector)
	if err != nil {
		return nil, "", fmt.Errorf("bad --selector %q: %w", s.selector, err)
	}
	sel = sel.Add(extra...)
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: sel}}
	if s.allNamespaces {
		return opts, "", nil
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, "", err
	}
	return append(opts, client.InNamespace(ns)), ns, nil
}

func newWorkloadsCommand(o *Options) *cobra.Command {
	var s scope
	cmd := listCommand(o, "workloads",
		"The hub's Workloads: state and why, position in the GlobalQueue, cluster, epoch, GPU product",
		`  kubectl gantry workloads -n team-a
  kubectl gantry workloads -A -o wide`,
		func(ctx context.Context, c client.Client) (*metav1.Table, runtime.Object, error) {
			opts, ns, err := s.listOptions(o)
			if err != nil {
				return nil, nil, err
			}
			var wls gantry.WorkloadList
			if err := c.List(ctx, &wls, opts...); err != nil {
				return nil, nil, fmt.Errorf("listing Workloads on the hub: %w", err)
			}
			rows, err := o.workloadRows(ctx, c, wls.Items, ns)
			return workloadsTable(rows, s.allNamespaces, o.now()), &wls, err
		})
	s.addFlags(cmd)
	return cmd
}

func newJobsCommand(o *Options) *cobra.Command {
	var s scope
	cmd := listCommand(o, "jobs",
		"The jobs of every kind submitted to Gantry queues: state and why, position in the GlobalQueue, cluster, epoch, GPU product",
		`  kubectl gantry jobs                         # in the current namespace
  kubectl gantry jobs -A -l team=vision
  kubectl gantry jobs -o wide                 # with GlobalQueue, GPUs and priority
  kubectl gantry jobs -o yaml                 # the jobs themselves, of every kind, as one List`,
		func(ctx context.Context, c client.Client) (*metav1.Table, runtime.Object, error) {
			queued, _ := labels.NewRequirement(gantry.QueueLabel, selection.Exists, nil)
			opts, ns, err := s.listOptions(o, *queued)
			if err != nil {
				return nil, nil, err
			}
			jobs, err := o.queuedJobs(ctx, c, ns, opts)
			if err != nil {
				return nil, nil, err
			}
			wls, err := workloadsOfJobs(ctx, c, jobs, ns)
			if err != nil {
				return nil, nil, err
			}
			rows, err := o.workloadRows(ctx, c, wls, ns)
			return workloadsTable(view.JobRows(jobs, rows), s.allNamespaces, o.now()), jobList(jobs), err
		})
	cmd.Long = `jobs lists the jobs submitted to Gantry queues (label ` + gantry.QueueLabel + `) of every kind the hub
serves: Jobs, JobSets, RayJobs and so on; a kind whose CRD is not installed on the hub has none. KIND
says which each is; kubectl gantry explain KIND/NAME tells one's story.`
	s.addFlags(cmd)
	return cmd
}

// queuedJobs lists the jobs of every kind with opts. A kind the hub does not serve has none; the jobs of
// a kind the user may not list are left out, and said.
func (o *Options) queuedJobs(ctx context.Context, c client.Client, ns string, opts []client.ListOption) ([]client.Object, error) {
	var jobs []client.Object
	for _, k := range jobkind.All() {
		list := k.NewList()
		err := c.List(ctx, list, opts...)
		switch {
		case apimeta.IsNoMatchError(err):
			continue
		case apierrors.IsForbidden(err):
			o.warn(fmt.Sprintf("%s are left out: you may not list them %s on the hub.", view.KindPlural(k), inNamespace(ns)))
			continue
		case err != nil:
			return nil, fmt.Errorf("listing %s on the hub: %w", view.KindPlural(k), err)
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			jobs = append(jobs, item.(client.Object))
		}
	}
	return jobs, nil
}

func inNamespace(ns string) string {
	if ns == "" {
		return "in all namespaces"
	}
	return "in namespace " + ns
}

// jobList holds jobs of several kinds, as kubectl get prints them with -o yaml: a v1 List.
func jobList(jobs []client.Object) *corev1.List {
	list := &corev1.List{Items: make([]runtime.RawExtension, 0, len(jobs))}
	for _, job := range jobs {
		list.Items = append(list.Items, runtime.RawExtension{Object: job})
	}
	return list
}

// workloadsOfJobs reads the Workloads in ns (all namespaces when empty) that stand for the jobs.
func workloadsOfJobs(ctx context.Context, c client.Client, jobs []client.Object, ns string) ([]gantry.Workload, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	var wls gantry.WorkloadList
	if err := c.List(ctx, &wls, client.InNamespace(ns), client.HasLabels{gantry.JobNameLabel}); err != nil {
		return nil, fmt.Errorf("listing Workloads on the hub: %w", err)
	}
	return wls.Items, nil
}

// workloadRows builds the rows, with positions.
func (o *Options) workloadRows(ctx context.Context, c client.Client, shown []gantry.Workload, ns string) ([]view.WorkloadRow, error) {
	positions, queues, err := facts.Positions(ctx, c, ns, o.warn)
	if err != nil {
		return nil, err
	}
	return view.Workloads(shown, queues, positions), nil
}

func workloadsTable(rows []view.WorkloadRow, withNamespace bool, now time.Time) *metav1.Table {
	t := &metav1.Table{}
	if withNamespace {
		t.ColumnDefinitions = append(t.ColumnDefinitions, column("Namespace", 0))
	}
	t.ColumnDefinitions = append(t.ColumnDefinitions, column("Name", 0), column("Kind", 0), column("Queue", 0), column("GlobalQueue", 1),
		column("State", 0), column("Reason", 0), column("Position", 0), column("Cluster", 0), column("Epoch", 0),
		column("GPU product", 0), column("GPUs", 1), column("Priority", 1), column("Age", 0))
	for _, r := range rows {
		var cells []any
		if withNamespace {
			cells = append(cells, r.Namespace)
		}
		cells = append(cells, r.Name, string(r.Kind), r.Queue, dash(r.GlobalQueue), r.State, r.Reason, r.Position, dash(r.Cluster),
			r.Epoch, dash(r.GPUProduct), r.GPUs, int64(r.Priority), duration.HumanDuration(now.Sub(r.Created)))
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells})
	}
	return t
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
