package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/internal/facts"
	"github.com/gantry-dev/gantry/internal/view"
)

func newExplainCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "explain JOB",
		Short: "Why a job waits, where it runs and what happened to it, in plain words",
		Long: `explain tells a job's story from what the hub knows: what it asks for, its state and position in
its GlobalQueue, and for each cluster of that queue what keeps it from taking the job (quota left, the
capacity its agent reported, the agent's own reason with numbers, rejections); then its dispatch history
(epochs, copies, evictions, the winner) and the status of its Job on the cluster it runs on.
JOB is the name of the Job (or of its Workload) in the namespace.`,
		Example:           `  kubectl gantry explain train-llm -n team-a`,
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
			lines, err := facts.Explain(cmd.Context(), c, ns, args[0], o.now(), o.warn)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(o.Out, strings.Join(lines, "\n"))
			return err
		},
	}
}

// jobNames completes the names of the Jobs the hub has Workloads for in the namespace.
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
		names := make([]string, 0, len(wls.Items))
		for i := range wls.Items {
			names = append(names, view.JobOrWorkloadName(&wls.Items[i]))
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
