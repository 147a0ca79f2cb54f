package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/view"
)

func newClustersCommand(o *Options) *cobra.Command {
	cmd := listCommand(o, "clusters",
		"The worker clusters: connection, agent, state, failover, GPUs free by product, jobs running",
		`  kubectl gantry clusters
  kubectl gantry clusters -o wide     # with the failover policy
  kubectl gantry clusters -o yaml     # the WorkerCluster objects
  kubectl gantry clusters -w          # then a row for each cluster that changes`,
		nil, readClusters)
	cmd.Long = `clusters lists the worker clusters the hub dispatches to: whether the hub is connected to each and
its agent reports, whether it is cordoned or fenced, its failover policy (-o wide), the GPUs its agent
last reported free by product, and how many jobs run there.

Its rows are for the WorkerClusters: -o json, yaml, name (workercluster.gantry.dev/worker-1), jsonpath,
custom-columns and go-template print them, as a WorkerClusterList; --sort-by, -L and --show-labels read
them.
` + watchHelp
	return cmd
}

func readClusters(ctx context.Context, c client.Reader) (*listing, error) {
	clusters := newFeed("WorkerClusters", func() client.ObjectList { return &gantry.WorkerClusterList{} })
	workloads := newFeed("Workloads", func() client.ObjectList { return &gantry.WorkloadList{} })
	for _, f := range []*feed{clusters, workloads} {
		if err := f.read(ctx, c); err != nil {
			return nil, fmt.Errorf("listing %s on the hub: %w", f.kind, err)
		}
	}
	return &listing{feeds: []*feed{clusters, workloads}, listKind: gantry.GroupVersion.WithKind("WorkerClusterList"),
		table: func(time.Time) *metav1.Table {
			rows := view.Clusters(items[gantry.WorkerCluster](clusters), view.RunningOn(items[gantry.Workload](workloads)))
			return clustersTable(rows, func(name string) client.Object { return clusters.objects[types.NamespacedName{Name: name}] })
		}}, nil
}

func clustersTable(rows []view.ClusterRow, object func(name string) client.Object) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("Name", 0), column("Connected", 0), column("Agent", 0), column("State", 0),
		column("Failover", 1), column("GPUs free/allocatable", 0), column("Running", 0),
	}}
	for _, r := range rows {
		t.Rows = append(t.Rows, row(object(r.Name), r.Name, r.Connected, r.Agent, r.State, r.Failover,
			view.Join(r.GPUs), int64(r.Running)))
	}
	return t
}
