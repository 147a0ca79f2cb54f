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

func newQueuesCommand(o *Options) *cobra.Command {
	return listCommand(o, "queues",
		"The global queues per worker cluster: cohort and weight, usage against quota, reservations, borrowed and lent, pending and admitted jobs",
		`  kubectl gantry queues
  kubectl gantry queues -o json       # the GlobalQueue objects`,
		func(ctx context.Context, c client.Client) (*metav1.Table, runtime.Object, error) {
			var gqs gantry.GlobalQueueList
			if err := c.List(ctx, &gqs); err != nil {
				return nil, nil, fmt.Errorf("listing GlobalQueues on the hub: %w", err)
			}
			return queuesTable(view.Queues(gqs.Items)), &gqs, nil
		})
}

func queuesTable(rows []view.QueueRow) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("GlobalQueue", 0), column("Cohort", 0), column("Weight", 0), column("Cluster", 0), column("Used/quota", 0),
		column("Pending", 0), column("Admitted", 0),
	}}
	for _, r := range rows {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{r.GlobalQueue, r.Cohort, r.Weight, r.Cluster, view.Join(r.Usage),
			int64(r.Pending), int64(r.Admitted)}})
	}
	return t
}
