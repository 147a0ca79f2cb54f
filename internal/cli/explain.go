package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/facts"
	"github.com/gantry-dev/gantry/internal/view"
)

func newExplainCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "explain [KIND/]NAME",
		Short: "Why a job waits, where it runs and what happened to it, in plain words",
		Long: `explain tells a job's story from what the hub knows: what it asks for, its state and position in
its GlobalQueue, and for each cluster of that queue what keeps it from taking the job (quota left, the
capacity its agent reported, the agent's own reason with numbers, rejections); then its dispatch history
(epochs, copies, evictions, the winner) and the status the hub mirrored back of the job from the cluster
it runs on.
NAME is the name of the job (or of its Workload) in the namespace, of whichever kind has a job of that
name: Job, JobSet, RayJob and every other kind Gantry dispatches. When jobs of several kinds share the
name, KIND/NAME says which, KIND as kubectl takes it: jobset/train, jobsets/train, job.batch/train.`,
		Example: `  kubectl gantry explain train-llm -n team-a
  kubectl gantry explain jobset/train-llm -n team-a`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: jobNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			c, err := o.NewClient()
			if err != nil {
				return err
			}
			ref, err := view.ParseJobRef(args[0])
			if err != nil {
				return err
			}
			lines, err := facts.Explain(cmd.Context(), c, ns, ref, o.now(), o.warn)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(o.Out, strings.Join(lines, "\n"))
			return err
		},
	}
}

// jobNames completes the names of the jobs the hub has Workloads for in the namespace, as KIND/NAME
// where jobs of several kinds share one.
func jobNames(o *Options) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, err := o.namespace()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		c, err := o.NewClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var wls gantry.WorkloadList
		if err := c.List(cmd.Context(), &wls, client.InNamespace(ns)); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return view.JobRefs(wls.Items), cobra.ShellCompDirectiveNoFileComp
	}
}
