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

func newQueuesCommand(o *Options) *cobra.Command {
	cmd := listCommand(o, "queues",
		"The global queues per worker cluster: cohort and weight, usage against quota, reservations, borrowed and lent, pending and admitted jobs",
		`  kubectl gantry queues
  kubectl gantry queues -o json                   # the GlobalQueue objects
  kubectl gantry queues -o name
  kubectl gantry queues --sort-by=.status.pendingWorkloads
  kubectl gantry queues -w                        # then the rows of each GlobalQueue that changes`,
		nil, readQueues)
	cmd.Long = `queues lists the GlobalQueues, one row per worker cluster of each: its cohort and fair-sharing weight,
what it uses of its quota there (with what is reserved, borrowed and lent), and how many of its jobs
wait and are admitted.

Its rows are for the GlobalQueues: -o json, yaml, name (globalqueue.gantry.dev/gpus), jsonpath,
custom-columns and go-template print each once, as a GlobalQueueList; --sort-by, -L and --show-labels
read them, and --sort-by keeps the rows of a queue together, in their order.
` + watchHelp
	return cmd
}

func readQueues(ctx context.Context, c client.Reader) (*listing, error) {
	queues := newFeed("GlobalQueues", func() client.ObjectList { return &gantry.GlobalQueueList{} })
	if err := queues.read(ctx, c); err != nil {
		return nil, fmt.Errorf("listing GlobalQueues on the hub: %w", err)
	}
	return &listing{feeds: []*feed{queues}, listKind: gantry.GroupVersion.WithKind("GlobalQueueList"),
		table: func(time.Time) *metav1.Table {
			rows := view.Queues(items[gantry.GlobalQueue](queues))
			return queuesTable(rows, func(name string) client.Object { return queues.objects[types.NamespacedName{Name: name}] })
		}}, nil
}

func queuesTable(rows []view.QueueRow, object func(name string) client.Object) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("GlobalQueue", 0), column("Cohort", 0), column("Weight", 0), column("Cluster", 0), column("Used/quota", 0),
		column("Pending", 0), column("Admitted", 0),
	}}
	for _, r := range rows {
		t.Rows = append(t.Rows, row(object(r.GlobalQueue), r.GlobalQueue, r.Cohort, r.Weight, r.Cluster, view.Join(r.Usage),
			int64(r.Pending), int64(r.Admitted)))
	}
	return t
}
