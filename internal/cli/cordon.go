package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// newStateCommands are cordon, uncordon and fence: each sets one field of a WorkerCluster's spec.
func newStateCommands(o *Options) []*cobra.Command {
	cordon := stateCommand(o, "cordon", "cordoned", true,
		"Stop dispatching new jobs to a worker cluster; the jobs running there go on")
	uncordon := stateCommand(o, "uncordon", "cordoned", false,
		"Dispatch new jobs to a cordoned worker cluster again")
	fence := stateCommand(o, "fence", "fenced", true,
		"Declare that nothing of a worker cluster runs any more: its jobs are dispatched again elsewhere at once")
	var confirmed bool
	fence.Flags().BoolVar(&confirmed, "confirm", false,
		"Confirm that the cluster is gone or all its jobs are stopped; otherwise a job could run twice.")
	run := fence.RunE
	fence.RunE = func(cmd *cobra.Command, args []string) error {
		if !confirmed {
			return fmt.Errorf("fencing %s dispatches its jobs elsewhere without waiting for them to stop there: "+
				"make sure the cluster is gone or its jobs are stopped, then pass --confirm", args[0])
		}
		return run(cmd, args)
	}
	return []*cobra.Command{cordon, uncordon, fence}
}

func stateCommand(o *Options, verb, field string, value bool, short string) *cobra.Command {
	return &cobra.Command{
		Use:               verb + " CLUSTER",
		Short:             short,
		Example:           fmt.Sprintf("  kubectl gantry %s worker-2", verb),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: clusterNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.NewClient()
			if err != nil {
				return err
			}
			patch, err := json.Marshal(map[string]any{"spec": map[string]any{field: value}})
			if err != nil {
				return err
			}
			wc := &gantry.WorkerCluster{}
			wc.Name = args[0]
			if err := c.Patch(cmd.Context(), wc, client.RawPatch(types.MergePatchType, patch)); err != nil {
				return fmt.Errorf("%s %s: %w", verb, args[0], err)
			}
			fmt.Fprintf(o.Out, "workercluster/%s %s\n", args[0], map[bool]string{true: field, false: "un" + field}[value])
			return nil
		},
	}
}

// clusterNames completes WorkerCluster names.
func clusterNames(o *Options) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return completeNames(o, func() client.ObjectList { return &gantry.WorkerClusterList{} })
}

// completeNames completes the first argument with the names of the objects of one cluster-scoped kind.
func completeNames(o *Options, newList func() client.ObjectList) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := o.NewClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list := newList()
		if err := c.List(cmd.Context(), list); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []string
		_ = apimeta.EachListItem(list, func(obj runtime.Object) error {
			if o, ok := obj.(client.Object); ok {
				names = append(names, o.GetName())
			}
			return nil
		})
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
