package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// newHoldCommands are hold and unhold: they set a GlobalQueue's spec.held (and drainWhileHeld).
func newHoldCommands(o *Options) []*cobra.Command {
	var drain bool
	hold := &cobra.Command{
		Use:   "hold GLOBALQUEUE",
		Short: "Stop a GlobalQueue from dispatching: what waits stays queued, what runs goes on",
		Long: "Stop a GlobalQueue from dispatching (spec.held): nothing of it is sent to a cluster, and copies sent but not " +
			"admitted yet are withdrawn; its jobs wait with the reason QueueHeld and what runs goes on. With --drain, what " +
			"waits in it, and what is submitted to it while it is held, is finished (QueueDrained) and its job marked Failed.",
		Example:           "  kubectl gantry hold research\n  kubectl gantry hold research --drain",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: globalQueueNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			what := "held"
			if drain {
				what = "held and drained"
			}
			return setHold(cmd, o, args[0], true, drain, what)
		},
	}
	hold.Flags().BoolVar(&drain, "drain", false, "Also finish what waits in the queue, failing its jobs, so that their owners submit them elsewhere.")
	unhold := &cobra.Command{
		Use:               "unhold GLOBALQUEUE",
		Short:             "Let a held GlobalQueue dispatch again, in its usual order",
		Example:           "  kubectl gantry unhold research",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: globalQueueNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			return setHold(cmd, o, args[0], false, false, "no longer held")
		},
	}
	return []*cobra.Command{hold, unhold}
}

func setHold(cmd *cobra.Command, o *Options, name string, held, drain bool, what string) error {
	c, err := o.NewClient()
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"held": held, "drainWhileHeld": drain}})
	if err != nil {
		return err
	}
	gq := &gantry.GlobalQueue{}
	gq.Name = name
	if err := c.Patch(cmd.Context(), gq, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("%s %s: %w", cmd.Name(), name, err)
	}
	fmt.Fprintf(o.Out, "globalqueue/%s %s\n", name, what)
	return nil
}

// globalQueueNames completes GlobalQueue names.
func globalQueueNames(o *Options) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return completeNames(o, func() client.ObjectList { return &gantry.GlobalQueueList{} })
}
