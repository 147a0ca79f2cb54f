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
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/view"
	"github.com/gantry-dev/gantry/jobkind"
)

// scope is where a command lists: one namespace or all, and a label selector.
type scope struct {
	allNamespaces bool
	selectorFlag  string
	// selector and namespace (empty for all) are the flags' once complete.
	selector  labels.Selector
	namespace string
}

func (s *scope) addFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&s.allNamespaces, "all-namespaces", "A", false, "List in all namespaces.")
	cmd.Flags().StringVarP(&s.selectorFlag, "selector", "l", "", "Label selector, as kubectl takes it: -l team=vision,tier!=dev")
}

// complete parses the selector and finds the namespace, before anything is read from the hub.
func (s *scope) complete(o *Options) error {
	sel, err := labels.Parse(s.selectorFlag)
	if err != nil {
		return fmt.Errorf("bad --selector %q: %w", s.selectorFlag, err)
	}
	s.selector = sel
	if s.allNamespaces {
		return nil
	}
	s.namespace, err = o.namespace()
	return err
}

// holds says whether an object is in the scope.
func (s *scope) holds(obj client.Object) bool {
	return (s.namespace == "" || obj.GetNamespace() == s.namespace) && s.selector.Matches(labels.Set(obj.GetLabels()))
}

// listOptions are the client options of the scope, plus extra label requirements.
func (s *scope) listOptions(extra ...labels.Requirement) []client.ListOption {
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: s.selector.Add(extra...)}}
	if s.namespace != "" {
		opts = append(opts, client.InNamespace(s.namespace))
	}
	return opts
}

// watchHelp says how a list command's -w goes.
const watchHelp = `
With -w it prints the table, then a row again each time what the row shows changes, or the row comes or
goes, until stopped.`

func newWorkloadsCommand(o *Options) *cobra.Command {
	var s scope
	cmd := listCommand(o, "workloads",
		"The hub's Workloads: state and why, position in the GlobalQueue, cluster, epoch, GPU product",
		`  kubectl gantry workloads -n team-a
  kubectl gantry workloads -A -o wide
  kubectl gantry workloads -o custom-columns=NAME:.metadata.name,EPOCH:.status.dispatchEpoch`,
		func() error { return s.complete(o) },
		func(ctx context.Context, c client.Reader) (*listing, error) { return o.readWorkloads(ctx, c, &s) })
	cmd.Long = `workloads lists the Workloads the hub made of the jobs: the state of each and why, its position in its
GlobalQueue, the cluster it runs on, its dispatch epoch and GPU product.

Its rows are for the Workloads: -o json, yaml, name (workload.gantry.dev/job-train), jsonpath,
custom-columns and go-template print them, as a WorkloadList; --sort-by, -L and --show-labels read them.
` + watchHelp
	s.addFlags(cmd)
	return cmd
}

func (o *Options) readWorkloads(ctx context.Context, c client.Reader, s *scope) (*listing, error) {
	workloads, queues, positions, err := o.positionFeeds(ctx, c, s.namespace)
	if err != nil {
		return nil, err
	}
	return &listing{feeds: []*feed{workloads, queues}, listKind: gantry.GroupVersion.WithKind("WorkloadList"),
		table: func(now time.Time) *metav1.Table {
			all, qs := items[gantry.Workload](workloads), items[gantry.Queue](queues)
			var shown []gantry.Workload
			for i := range all {
				if s.holds(&all[i]) {
					shown = append(shown, all[i])
				}
			}
			rows := view.Workloads(shown, qs, positions(all, qs))
			return workloadsTable(rows, s.allNamespaces, now, func(r view.WorkloadRow) client.Object {
				return workloads.objects[types.NamespacedName{Namespace: r.Namespace, Name: r.Workload}]
			})
		}}, nil
}

func newJobsCommand(o *Options) *cobra.Command {
	var s scope
	cmd := listCommand(o, "jobs",
		"The jobs of every kind submitted to Gantry queues: state and why, position in the GlobalQueue, cluster, epoch, GPU product",
		`  kubectl gantry jobs                         # in the current namespace
  kubectl gantry jobs -A -l team=vision
  kubectl gantry jobs -o wide                 # with GlobalQueue, GPUs and priority
  kubectl gantry jobs -o yaml                 # the jobs themselves, of every kind, as one List
  kubectl gantry jobs -o name                 # job.batch/train, jobset.jobset.x-k8s.io/eval...
  kubectl gantry jobs --sort-by=.metadata.creationTimestamp
  kubectl gantry jobs -w                      # then a row for each job whose row changes`,
		func() error { return s.complete(o) },
		func(ctx context.Context, c client.Reader) (*listing, error) { return o.readJobs(ctx, c, &s) })
	cmd.Long = `jobs lists the jobs submitted to Gantry queues (label ` + gantry.QueueLabel + `) of every kind the hub
serves: Jobs, JobSets, RayJobs and so on; a kind whose CRD is not installed on the hub has none. KIND
says which each is; kubectl gantry explain KIND/NAME tells one's story. The state, reason, position,
cluster and epoch are those of each job's Workload (kubectl gantry workloads lists those).

Its rows are for the hub's jobs: -o json, yaml, name (job.batch/train), jsonpath, custom-columns and
go-template print the jobs themselves, of every kind, as one v1 List, not their Workloads; --sort-by, -L
and --show-labels read them.
` + watchHelp
	s.addFlags(cmd)
	return cmd
}

func (o *Options) readJobs(ctx context.Context, c client.Reader, s *scope) (*listing, error) {
	jobs, err := o.jobFeeds(ctx, c, s)
	if err != nil {
		return nil, err
	}
	workloads, queues, positions, err := o.positionFeeds(ctx, c, s.namespace)
	if err != nil {
		return nil, err
	}
	return &listing{feeds: append(jobs, workloads, queues), listKind: corev1.SchemeGroupVersion.WithKind("List"),
		table: func(now time.Time) *metav1.Table {
			all, qs := items[gantry.Workload](workloads), items[gantry.Queue](queues)
			var ofJobs []gantry.Workload
			for i := range all {
				if _, ok := all[i].Labels[gantry.JobNameLabel]; ok && (s.namespace == "" || all[i].Namespace == s.namespace) {
					ofJobs = append(ofJobs, all[i])
				}
			}
			shown := sortedObjects(jobs...)
			byJob := make(map[string]client.Object, len(shown))
			for _, job := range shown {
				k, _ := jobkind.ForObject(job)
				byJob[job.GetNamespace()+"/"+string(k.Name())+"/"+job.GetName()] = job
			}
			rows := view.JobRows(shown, view.Workloads(ofJobs, qs, positions(all, qs)))
			return workloadsTable(rows, s.allNamespaces, now, func(r view.WorkloadRow) client.Object {
				return byJob[r.Namespace+"/"+string(r.Kind)+"/"+r.Name]
			})
		}}, nil
}

// jobFeeds read the queued jobs of every kind in the scope. A kind the hub does not serve has none; the
// jobs of a kind the user may not list are left out, and said.
func (o *Options) jobFeeds(ctx context.Context, c client.Reader, s *scope) ([]*feed, error) {
	queued, _ := labels.NewRequirement(gantry.QueueLabel, selection.Exists, nil)
	var feeds []*feed
	for _, k := range jobkind.All() {
		f := newFeed(view.KindPlural(k), k.NewList, s.listOptions(*queued)...)
		err := f.read(ctx, c)
		switch {
		case apimeta.IsNoMatchError(err):
			continue
		case apierrors.IsForbidden(err):
			o.warn(fmt.Sprintf("%s are left out: you may not list them %s on the hub.", view.KindPlural(k), inNamespace(s.namespace)))
			continue
		case err != nil:
			return nil, fmt.Errorf("listing %s on the hub: %w", view.KindPlural(k), err)
		}
		feeds = append(feeds, f)
	}
	return feeds, nil
}

func inNamespace(ns string) string {
	if ns == "" {
		return "in all namespaces"
	}
	return "in namespace " + ns
}

// positionsFunc gives the positions of the Workloads read, by namespace/name.
type positionsFunc func(all []gantry.Workload, queues []gantry.Queue) map[string]view.Position

// positionFeeds read the Workloads and Queues of all namespaces when the user may list them there, and
// count positions over them. One who may not reads those of ns only, and positions come from the hub's
// visibility API, which counts every namespace's; when it cannot be read, over ns's own, which is said.
func (o *Options) positionFeeds(ctx context.Context, c client.Reader, ns string) (workloads, queues *feed, positions positionsFunc, err error) {
	workloads = newFeed("Workloads", func() client.ObjectList { return &gantry.WorkloadList{} })
	queues = newFeed("Queues", func() client.ObjectList { return &gantry.QueueList{} })
	err = readAll(ctx, c, workloads, queues)
	if !apierrors.IsForbidden(err) || ns == "" {
		if err != nil {
			return nil, nil, nil, fmt.Errorf("listing Workloads and Queues on the hub: %w", err)
		}
		return workloads, queues, view.Positions, nil
	}
	workloads.opts, queues.opts = []client.ListOption{client.InNamespace(ns)}, []client.ListOption{client.InNamespace(ns)}
	if err := readAll(ctx, c, workloads, queues); err != nil {
		return nil, nil, nil, fmt.Errorf("listing Workloads and Queues on the hub: %w", err)
	}
	return workloads, queues, func(all []gantry.Workload, qs []gantry.Queue) map[string]view.Position {
		remote, err := o.visibilityPositions(ctx, ns)
		if err == nil {
			return remote
		}
		o.warn(fmt.Sprintf("Positions count only the workloads of namespace %s: you may not list Workloads and Queues in all namespaces, "+
			"and the hub's visibility API could not be read (%v).", ns, err))
		return view.Positions(all, qs)
	}, nil
}

func workloadsTable(rows []view.WorkloadRow, withNamespace bool, now time.Time, object func(view.WorkloadRow) client.Object) *metav1.Table {
	t := &metav1.Table{}
	if withNamespace {
		t.ColumnDefinitions = append(t.ColumnDefinitions, column("Namespace", 0))
	}
	t.ColumnDefinitions = append(t.ColumnDefinitions, column("Name", 0), column("Kind", 0), column("Queue", 0), column("GlobalQueue", 1),
		column("State", 0), column("Reason", 0), column("Position", 0), column("Cluster", 0), column("Epoch", 0),
		column("GPU product", 0), column("GPUs", 1), column("Priority", 1), column(ageColumn, 0))
	for _, r := range rows {
		var cells []any
		if withNamespace {
			cells = append(cells, r.Namespace)
		}
		cells = append(cells, r.Name, string(r.Kind), r.Queue, dash(r.GlobalQueue), r.State, r.Reason, r.Position, dash(r.Cluster),
			r.Epoch, dash(r.GPUProduct), r.GPUs, int64(r.Priority), duration.HumanDuration(now.Sub(r.Created)))
		t.Rows = append(t.Rows, row(object(r), cells...))
	}
	return t
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
