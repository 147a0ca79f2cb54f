package cli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/facts"
	"github.com/gantry-dev/gantry/internal/view"
)

// explainLong is explain's help; its schema part is docs/cli.md's too.
const explainLong = `explain tells a job's story from what the hub knows: what it asks for, its state and position in
its GlobalQueue, and for each cluster of that queue what keeps it from taking the job (quota left, the
capacity its agent reported, the agent's own reason with numbers, rejections); then its dispatch history
(epochs, copies, evictions, the winner) and the status the hub mirrored back of the job from the cluster
it runs on.
NAME is the name of the job (or of its Workload) in the namespace, of whichever kind has a job of that
name: Job, JobSet, RayJob and every other kind Gantry dispatches. When jobs of several kinds share the
name, KIND/NAME says which, KIND as kubectl takes it: jobset/train, jobsets/train, job.batch/train.

With -o json or yaml (or jsonpath, go-template) it prints the same story as an object:
  apiVersion: ` + view.ExplanationAPIVersion + `, kind: ` + view.ExplanationKind + `
  job                {apiVersion, kind, namespace, name}
  workload           the Workload's name; absent when the job has none (see noWorkload)
  resubmitted        set when the Workload is an earlier job's: when the job on the hub now was submitted
  queue              {name, exists, globalQueue, globalQueueExists}; an exists left out: you may not read it
  submitted          when the Workload (without one, the job) was created
  priority
  demand             {podSets [{name, count, requests}], total, gpuProducts, topologyKey}
  state              {state: Pending|Admitted|Running|Finished|Deleting, reason, message, since, advice,
                      position {globalQueue, index, of}, cluster, unreachable, jobNotCreated {reason, message, time},
                      stopped: its owner stopped it (reason Stopped, or Stopping while it is taken back)}
  jobStatus          {progress: NotStarted|Running|Succeeded|Failed, detail, conditions [{type, reason, message, time}]}
  clusters           while pending, each cluster of the GlobalQueue in its order:
                     {name, verdict, reason, message, since, quota, cohort, epoch, agent, capacity}
                     verdict: Rejected, NoSuchCluster, NotConnected, AgentNotReady, Fenced, Cordoned,
                       NeverFitsQuota, BlockedByQuota, HasCopy, BlockedByCapacity or Room (the first that holds)
                     quota: {resource, needs, quota, used, reserved, left}
                     capacity: {gpus, gpusPerPod, reportsGPUs, products [{product, free, allocatable,
                       largestFreeOnNode}], room}
  dispatch           {epoch, nominated, evictions [{cluster, epoch, reason, message, time}],
                      rejections [{cluster, reason, message, time}], winner {cluster, epoch, admitted,
                      gpuProduct, topologyDomain, podGroup, globalQueue, jobCreated}}
  noWorkload         {why: NotQueued|Refused|NotTakenUp|EventsUnreadable, warnings [{reason, message, time}]}
  unreadable         the kinds you may not read on the hub, whose part is left out
Times are RFC 3339. Fields may be added to ` + view.ExplanationAPIVersion + `; one removed or changed in meaning makes a
new version.`

func newExplainCommand(o *Options) *cobra.Command {
	out := &genericclioptions.PrintFlags{JSONYamlPrintFlags: genericclioptions.NewJSONYamlPrintFlags(),
		TemplatePrinterFlags: genericclioptions.NewKubeTemplatePrintFlags(), OutputFormat: new(string)}
	cmd := &cobra.Command{
		Use:   "explain [KIND/]NAME",
		Short: "Why a job waits, where it runs and what happened to it, in plain words",
		Long:  explainLong,
		Example: `  kubectl gantry explain train-llm -n team-a
  kubectl gantry explain jobset/train-llm -n team-a
  kubectl gantry explain train-llm -o yaml
  kubectl gantry explain train-llm -o jsonpath='{.clusters[?(@.verdict=="BlockedByQuota")].name}'`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: jobNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			printer, err := explainPrinter(out)
			if err != nil {
				return err
			}
			ref, err := view.ParseJobRef(args[0])
			if err != nil {
				return err
			}
			ns, c, err := o.namespaceClient()
			if err != nil {
				return err
			}
			e, err := facts.Explanation(cmd.Context(), c, ns, ref, o.now(), o.warn)
			if err != nil {
				return err
			}
			return o.printExplanation(e, printer)
		},
	}
	out.AddFlags(cmd)
	// An Explanation has no managed fields.
	_ = cmd.Flags().MarkHidden("show-managed-fields")
	formats := append([]string{"text"}, out.AllowedFormats()...)
	cmd.Flag("output").Usage = "Output format: text (the default), or the Explanation as one of " + strings.Join(formats[1:], ", ") + "."
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return formats, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// explainPrinter is the printer -o asks for, nil for the text.
func explainPrinter(out *genericclioptions.PrintFlags) (printers.ResourcePrinter, error) {
	if *out.OutputFormat == "text" {
		return nil, nil
	}
	printer, err := out.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) && *out.OutputFormat == "" {
		return nil, nil
	}
	return printer, err
}

// printExplanation prints the text, or the Explanation with the printer.
func (o *Options) printExplanation(e *view.Explanation, printer printers.ResourcePrinter) error {
	if printer == nil {
		_, err := fmt.Fprintln(o.Out, strings.Join(e.Lines(o.now()), "\n"))
		return err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return err
	}
	return printer.PrintObj(u, o.Out)
}

// jobNames completes the names of the jobs the hub has Workloads for in the namespace, as KIND/NAME
// where jobs of several kinds share one.
func jobNames(o *Options) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		wls, err := namespaceWorkloads(cmd, o)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return view.JobRefs(wls.Items), cobra.ShellCompDirectiveNoFileComp
	}
}

// namespaceWorkloads lists the hub's Workloads of the namespace the options name, for completions.
func namespaceWorkloads(cmd *cobra.Command, o *Options) (*gantry.WorkloadList, error) {
	ns, c, err := o.namespaceClient()
	if err != nil {
		return nil, err
	}
	var wls gantry.WorkloadList
	return &wls, c.List(cmd.Context(), &wls, client.InNamespace(ns))
}
