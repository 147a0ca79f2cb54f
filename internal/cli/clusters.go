package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/view"
)

func newClustersCommand(o *Options) *cobra.Command {
	return listCommand(o, "clusters",
		"The worker clusters: connection, agent, state, failover, GPUs free by product, jobs running",
		`  kubectl gantry clusters
  kubectl gantry clusters -o wide     # with the failover policy
  kubectl gantry clusters -o yaml     # the WorkerCluster objects`,
		func(ctx context.Context, c client.Client) (*metav1.Table, runtime.Object, error) {
			var clusters gantry.WorkerClusterList
			if err := c.List(ctx, &clusters); err != nil {
				return nil, nil, fmt.Errorf("listing WorkerClusters on the hub: %w", err)
			}
			var workloads gantry.WorkloadList
			if err := c.List(ctx, &workloads); err != nil {
				return nil, nil, fmt.Errorf("listing Workloads on the hub: %w", err)
			}
			return clustersTable(view.Clusters(clusters.Items, workloads.Items)), &clusters, nil
		})
}

func clustersTable(rows []view.ClusterRow) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("Name", 0), column("Connected", 0), column("Agent", 0), column("State", 0),
		column("Failover", 1), column("GPUs free/allocatable", 0), column("Running", 0),
	}}
	for _, r := range rows {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{r.Name, r.Connected, r.Agent, r.State, r.Failover,
			view.Join(r.GPUs), int64(r.Running)}})
	}
	return t
}
