package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch/accounting"
	"github.com/gantry-dev/gantry/internal/view"
)

// usageLong is usage's help; docs/cli.md says the same.
var usageLong = `usage reports the GPU time the jobs of the namespace used (with -A, of every namespace), one row per
namespace, Queue, GlobalQueue, cluster and GPU product: GPU-hours, the part of them borrowed from the
GlobalQueue's cohort (BORROWED), the part whose work was lost (LOST: runs taken back before they ended,
preempted, failed over or stopped), and their cost at the cluster's spec.price (COST, LOST COST: what
the priced GPU time cost, "-" where none was priced). A last TOTAL row adds them up.

It reads the namespace's Usage (` + gantry.UsageName + `), which the hub keeps as runs end, and adds the runs the
Usage does not count yet: those that ended since, and those that still run, up to now. Their cost is
counted at the WorkerClusters' prices now; who may not read WorkerClusters gets it only for the runs the
Usage counts, and is told so.

--since counts whole UTC days, as the Usage keeps GPU time by UTC day: from the start of the UTC day of
now minus the duration, to now. It takes Go durations and days: 7d, 30d, 36h, 90m, 1d12h (0d: today).
A Usage keeps its last ` + fmt.Sprint(gantry.UsageRetentionDays) + ` days. Without --since: everything the Usage counted since it was made.

--by adds the rows up by fewer columns, shown and sorted in the order given: --by cluster,
--by namespace,product. It takes namespace, queue, globalqueue, cluster and product.

-o csv prints a header and a line per row (no TOTAL): GPU-seconds as integers, GPU-hours as a decimal,
costs as decimal strings (empty where no price was set). -o json and -o yaml print the report as an
object:
  apiVersion: ` + view.UsageReportAPIVersion + `, kind: ` + view.UsageReportKind + `
  by           the columns rows are added up by
  since        the start of the UTC day counted from; absent without --since
  now          when runs that still run are counted to
  rows         [{namespace, queue, globalQueue, cluster, gpuProduct, gpuSeconds, borrowedGPUSeconds,
               lostGPUSeconds, gpuHours, cost, lostCost}]; a field of a column not in --by is absent,
               as are an empty GlobalQueue or product and a cost where no price was set
  unreadable   the kinds you may not read on the hub, whose part is left out
Times are RFC 3339.`

// usageOutputs are the formats of usage's -o.
var usageOutputs = []string{"table", "csv", "json", "yaml"}

// usageFlags are usage's flags as given.
type usageFlags struct {
	allNamespaces bool
	since, by     string
	output        string
}

// usageQuery is what the flags ask for, once read.
type usageQuery struct {
	// namespace is the one to report, empty for all.
	namespace string
	by        []view.UsageDimension
	// since is the start of the UTC day counted from; nil for all the Usage counts.
	since  *time.Time
	output string
	now    time.Time
}

func newUsageCommand(o *Options) *cobra.Command {
	var f usageFlags
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "The GPU-hours the jobs of a namespace used, borrowed and lost, and their cost, by queue, cluster and GPU product",
		Long:  usageLong,
		Example: `  kubectl gantry usage -n team-a
  kubectl gantry usage --since 7d -n team-a
  kubectl gantry usage -A --since 30d --by namespace
  kubectl gantry usage -A --by namespace,cluster -o csv > usage.csv
  kubectl gantry usage --since 0d -o json                 # today`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := f.query(o)
			if err != nil {
				return err
			}
			c, err := o.NewClient()
			if err != nil {
				return err
			}
			report, err := o.usageReport(cmd.Context(), c, q)
			if err != nil {
				return err
			}
			return o.printUsage(report, q.output)
		},
	}
	cmd.Flags().BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "Report every namespace.")
	cmd.Flags().StringVar(&f.since, "since", "",
		"Count from the start of the UTC day of now minus this (7d, 36h, 1d12h; 0d: today); without it, all the Usage counts.")
	cmd.Flags().StringVar(&f.by, "by", strings.Join(dimensionNames(), ","),
		"Add the rows up by these columns, in this order: some of "+strings.Join(dimensionNames(), ", ")+".")
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "Output format: "+strings.Join(usageOutputs, ", ")+".")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return usageOutputs, cobra.ShellCompDirectiveNoFileComp
	})
	_ = cmd.RegisterFlagCompletionFunc("by", completeDimensions)
	return cmd
}

// query reads the flags, before anything is read from the hub.
func (f *usageFlags) query(o *Options) (*usageQuery, error) {
	q := &usageQuery{output: f.output, now: o.now()}
	if !slices.Contains(usageOutputs, f.output) {
		return nil, fmt.Errorf("bad --output %q: want one of %s", f.output, strings.Join(usageOutputs, ", "))
	}
	by, err := view.ParseUsageBy(f.by)
	if err != nil {
		return nil, fmt.Errorf("bad --by %q: %w", f.by, err)
	}
	q.by = by
	if f.since != "" {
		d, err := view.ParseSince(f.since)
		if err != nil {
			return nil, fmt.Errorf("bad --since: %w", err)
		}
		since := view.SinceDay(q.now, d)
		q.since = &since
	}
	if !f.allNamespaces {
		if q.namespace, err = o.namespace(); err != nil {
			return nil, err
		}
	}
	return q, nil
}

func dimensionNames() []string {
	names := make([]string, len(view.UsageDimensions))
	for i, d := range view.UsageDimensions {
		names[i] = string(d)
	}
	return names
}

// completeDimensions completes --by's last dimension after those already given.
func completeDimensions(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	given := strings.Split(toComplete, ",")
	prefix := strings.Join(given[:len(given)-1], ",")
	if prefix != "" {
		prefix += ","
	}
	var out []string
	for _, d := range dimensionNames() {
		if !slices.Contains(given[:len(given)-1], d) {
			out = append(out, prefix+d)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// usageReport reads the Usages, the Workloads' runs and the WorkerClusters' prices of the query's
// namespaces and adds up what each used (accounting.Summarize).
func (o *Options) usageReport(ctx context.Context, c client.Reader, q *usageQuery) (*view.UsageReport, error) {
	usages, err := readUsages(ctx, c, q.namespace)
	if err != nil {
		return nil, err
	}
	var unreadable []string
	workloads, err := readRuns(ctx, c, q.namespace)
	if apierrors.IsForbidden(err) {
		unreadable = append(unreadable, "Workloads")
		o.warn(fmt.Sprintf("Runs the Usage does not count yet are left out: you may not list Workloads %s on the hub.", inNamespace(q.namespace)))
	} else if err != nil {
		return nil, err
	}
	clusters, err := readPrices(ctx, c)
	if apierrors.IsForbidden(err) {
		// Without prices, a run the Usage does not count yet has no cost.
		clusters, unreadable = map[string]accounting.Cluster{}, append(unreadable, "WorkerClusters")
		o.warn("The cost of runs the Usage does not count yet is left out, and so is their GPU product where they did not record it: " +
			"you may not list WorkerClusters on the hub.")
	} else if err != nil {
		return nil, err
	}
	if q.since != nil {
		if oldest := view.SinceDay(q.now, time.Duration(gantry.UsageRetentionDays-1)*24*time.Hour); q.since.Before(oldest) {
			o.warn(fmt.Sprintf("A Usage keeps its last %d days: what ran before %s is not counted.", gantry.UsageRetentionDays,
				oldest.Format(time.DateOnly)))
		}
	}
	var since time.Time
	if q.since != nil {
		since = *q.since
	}
	var used []view.NamespaceUsage
	for _, ns := range namespacesOf(usages, workloads) {
		entries := accounting.Summarize(accounting.Namespace{Usage: usages[ns], Workloads: workloads[ns], Clusters: clusters, Now: q.now}, since)
		if len(entries) > 0 {
			used = append(used, view.NamespaceUsage{Namespace: ns, Entries: entries})
		}
	}
	report := view.NewUsageReport(used, q.by, q.since, q.now, unreadable)
	return &report, nil
}

// readUsages reads the Usage of ns, or of every namespace when ns is empty, by namespace.
func readUsages(ctx context.Context, c client.Reader, ns string) (map[string]*gantry.UsageStatus, error) {
	out := map[string]*gantry.UsageStatus{}
	var err error
	if ns != "" {
		var u gantry.Usage
		err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: gantry.UsageName}, &u)
		if err == nil {
			out[ns] = &u.Status
		} else if apierrors.IsNotFound(err) {
			err = nil
		}
	} else {
		var list gantry.UsageList
		err = c.List(ctx, &list)
		for i := range list.Items {
			out[list.Items[i].Namespace] = &list.Items[i].Status
		}
	}
	switch {
	case apimeta.IsNoMatchError(err):
		return nil, fmt.Errorf("the hub serves no Usages: its Gantry keeps no account of GPU time")
	case err != nil:
		return nil, fmt.Errorf("reading the Usage %s on the hub: %w", inNamespace(ns), err)
	}
	return out, nil
}

// readRuns reads the Workloads that ran, of ns or of every namespace when ns is empty, by namespace.
func readRuns(ctx context.Context, c client.Reader, ns string) (map[string][]*gantry.Workload, error) {
	var list gantry.WorkloadList
	var opts []client.ListOption
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing Workloads %s on the hub: %w", inNamespace(ns), err)
	}
	out := map[string][]*gantry.Workload{}
	for i := range list.Items {
		if wl := &list.Items[i]; len(wl.Status.Runs) > 0 {
			out[wl.Namespace] = append(out[wl.Namespace], wl)
		}
	}
	return out, nil
}

// readPrices reads what the accounting needs of the WorkerClusters: their prices and GPU products.
func readPrices(ctx context.Context, c client.Reader) (map[string]accounting.Cluster, error) {
	var list gantry.WorkerClusterList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing WorkerClusters on the hub: %w", err)
	}
	return accounting.ClustersOf(list.Items), nil
}

// namespacesOf are the namespaces with a Usage or runs, sorted.
func namespacesOf(usages map[string]*gantry.UsageStatus, workloads map[string][]*gantry.Workload) []string {
	var out []string
	for ns := range usages {
		out = append(out, ns)
	}
	for ns := range workloads {
		if usages[ns] == nil {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// printUsage prints the report in the format of -o.
func (o *Options) printUsage(r *view.UsageReport, output string) error {
	switch output {
	case "csv":
		w := csv.NewWriter(o.Out)
		return w.WriteAll(view.UsageCSV(r.Rows, r.By))
	case "json", "yaml":
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return err
		}
		if output == "json" {
			return (&printers.JSONPrinter{}).PrintObj(u, o.Out)
		}
		return (&printers.YAMLPrinter{}).PrintObj(u, o.Out)
	}
	if len(r.Rows) == 0 {
		_, err := fmt.Fprintln(o.Out, "No usage recorded.")
		return err
	}
	t := &metav1.Table{}
	for _, name := range view.UsageColumns(r.By) {
		t.ColumnDefinitions = append(t.ColumnDefinitions, column(name, 0))
	}
	for _, row := range r.Rows {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells(view.UsageCells(row, r.By))})
	}
	t.Rows = append(t.Rows, metav1.TableRow{Cells: cells(view.UsageTotalCells(r.Rows, r.By))})
	return printers.NewTablePrinter(printers.PrintOptions{}).PrintObj(t, o.Out)
}

// cells are strings as a table row's cells.
func cells(s []string) []any {
	out := make([]any, len(s))
	for i := range s {
		out[i] = s[i]
	}
	return out
}
