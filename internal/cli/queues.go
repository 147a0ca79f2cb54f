package cli

import (
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/internal/cli/view"
)

func newQueuesCommand(o *Options) *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "The global queues per worker cluster: usage against quota, reservations, pending and admitted jobs",
		Example: `  kubectl gantry queues
  kubectl gantry queues -o json       # the GlobalQueue objects`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.NewClient()
			if err != nil {
				return err
			}
			var gqs gantry.GlobalQueueList
			if err := c.List(cmd.Context(), &gqs); err != nil {
				return errorf("listing GlobalQueues on the hub: %w", err)
			}
			return out.print(o.Out, queuesTable(view.Queues(gqs.Items)), &gqs)
		},
	}
	out.addFlag(cmd)
	return cmd
}

func queuesTable(rows []view.QueueRow) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("GlobalQueue", 0), column("Cluster", 0), column("Used/quota", 0), column("Pending", 0), column("Admitted", 0),
	}}
	for _, r := range rows {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{r.GlobalQueue, r.Cluster, view.Join(r.Usage),
			int64(r.Pending), int64(r.Admitted)}})
	}
	return t
}
