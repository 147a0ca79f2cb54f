package cli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/view"
	"github.com/gantry-dev/gantry/jobkind"
)

// stopLong is stop's help.
const stopLong = `stop stops a queued job: the hub dispatches it no more, withdraws the copies it sent that no
cluster admitted yet, and takes it back from the cluster it runs on as it takes back a preempted job (its
Job there deleted, pods first; its quota released once the Job is gone). It then waits, Pending with the
reason Stopped, in its place in its queue, until kubectl gantry resume dispatches it again. What it had
done on its cluster is not kept: it starts anew.
stop sets the job's annotation ` + gantry.StoppedAnnotation + `: "true", so you need the right to patch the job
(patch on jobs.batch, jobsets.jobset.x-k8s.io, ... as its kind is) in its namespace, and nothing more.
A job that finished cannot be stopped; stopping a stopped job changes nothing.
KIND/NAME names the job, KIND as kubectl takes it (job/train, jobset/train, rayjobs.ray.io/train); a
NAME alone is a batch Job.`

// newStopCommands are stop and resume: they set and remove a job's annotation gantry.dev/stopped.
func newStopCommands(o *Options) []*cobra.Command {
	stop := &cobra.Command{
		Use:   "stop [KIND/]NAME",
		Short: "Stop a job: taken back from its cluster if it runs, it waits in its queue until resumed",
		Long:  stopLong,
		Example: `  kubectl gantry stop train-llm -n team-a
  kubectl gantry stop jobset/train-llm -n team-a`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: stoppableJobs(o, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return setStopped(cmd, o, args[0], true)
		},
	}
	resume := &cobra.Command{
		Use:   "resume [KIND/]NAME",
		Short: "Resume a stopped job: it waits in its queue again, in its place, and is dispatched as usual",
		Long: `resume removes the annotation ` + gantry.StoppedAnnotation + ` that kubectl gantry stop set on the job: it waits in its
queue again, in the place its priority and submission give it, and is dispatched as usual. Resuming a
job that is not stopped changes nothing. KIND/NAME names the job as for stop; a NAME alone is a batch Job.`,
		Example: `  kubectl gantry resume train-llm -n team-a
  kubectl gantry resume jobset/train-llm -n team-a`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: stoppableJobs(o, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			return setStopped(cmd, o, args[0], false)
		},
	}
	return []*cobra.Command{stop, resume}
}

// stopTarget reads KIND/NAME or NAME, a NAME alone being a batch Job, and refuses what no job can be
// named.
func stopTarget(arg string) (view.JobRef, error) {
	ref, err := view.ParseJobRef(arg)
	if err != nil {
		return ref, err
	}
	if ref.Kind == nil {
		ref.Kind, _ = jobkind.Named(gantry.JobKindJob)
	}
	if errs := validation.IsDNS1123Subdomain(ref.Name); len(errs) > 0 {
		return ref, fmt.Errorf("%q is not the name of a job: %s", ref.Name, strings.Join(errs, "; "))
	}
	return ref, nil
}

// setStopped stops or resumes the job: it reads the job and its Workload, refuses a job Gantry does
// not queue and the stop of one that finished, says so when there is nothing to change, and otherwise
// sets or removes the annotation, only on the job as it read it.
func setStopped(cmd *cobra.Command, o *Options, arg string, stop bool) error {
	ref, err := stopTarget(arg)
	if err != nil {
		return err
	}
	ns, c, err := o.namespaceClient()
	if err != nil {
		return err
	}
	name := view.KindRef(ref.Kind) + "/" + ref.Name
	job, err := readQueuedJob(cmd, c, ns, ref, arg)
	if err != nil {
		return err
	}
	wl := &gantry.Workload{}
	if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: jobkind.WorkloadName(ref.Kind, ref.Name)}, wl); err != nil {
		wl = nil // none yet, or not yours to read: the job says enough
	} else if !metav1.IsControlledBy(wl, job) {
		wl = nil // an earlier job's of the name
	}
	if done := finished(ref.Kind, job, wl); stop && done != "" {
		return fmt.Errorf("%s finished (%s): there is nothing to stop", name, done)
	}
	if jobkind.Stopped(job) == stop {
		fmt.Fprintf(o.Out, "%s is %s\n", name, map[bool]string{true: "already stopped", false: "not stopped"}[stop])
		return nil
	}
	if err := patchStopped(cmd, c, job, stop); err != nil {
		return fmt.Errorf("%s %s: %w", cmd.Name(), name, err)
	}
	resume := fmt.Sprintf("kubectl gantry resume %s -n %s", name, ns)
	switch {
	case !stop:
		fmt.Fprintf(o.Out, "%s resumed: it waits in its queue again, in its place\n", name)
	case wl != nil && wl.Status.Winner() != "":
		fmt.Fprintf(o.Out, "%s stopped: it is taken back from %s and waits until %s\n", name, wl.Status.Winner(), resume)
	default:
		fmt.Fprintf(o.Out, "%s stopped: it waits until %s\n", name, resume)
	}
	return nil
}

// readQueuedJob reads the referenced job and refuses one that is not there or that Gantry does not
// queue.
func readQueuedJob(cmd *cobra.Command, c client.Client, ns string, ref view.JobRef, arg string) (client.Object, error) {
	name := view.KindRef(ref.Kind) + "/" + ref.Name
	job := ref.Kind.New()
	err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: ref.Name}, job)
	switch {
	case apierrors.IsNotFound(err) && !strings.Contains(arg, "/"):
		return nil, fmt.Errorf("no Job %s in namespace %s; a job of another kind is named KIND/NAME, as in jobset/%s", ref.Name, ns, ref.Name)
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("no %s %s in namespace %s", ref.Kind.Name(), ref.Name, ns)
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", name, err)
	case job.GetLabels()[gantry.QueueLabel] == "":
		return nil, fmt.Errorf("%s is not queued by Gantry (it has no label %s): Gantry neither stops nor resumes it", name, gantry.QueueLabel)
	}
	return job, nil
}

// finished says how the job ended, as its Workload or, without one, its own status says; empty while
// it has not.
func finished(k jobkind.Kind, job client.Object, wl *gantry.Workload) string {
	if wl != nil {
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadFinished); c != nil && c.Status == "True" {
			return c.Reason
		}
	}
	if st := k.State(job); st.Finished {
		return map[bool]string{true: gantry.ReasonJobSucceeded, false: gantry.ReasonJobFailed}[st.Succeeded]
	}
	return ""
}

// patchStopped sets or removes the annotation, on the version of the job it read: a job that changed
// since (it finished, someone else stopped it) is read again by the user's next try.
func patchStopped(cmd *cobra.Command, c client.Client, job client.Object, stop bool) error {
	var value any // null removes it
	if stop {
		value = "true"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": job.GetResourceVersion(),
		"annotations": map[string]any{gantry.StoppedAnnotation: value}}})
	if err != nil {
		return err
	}
	return c.Patch(cmd.Context(), job, client.RawPatch(types.MergePatchType, patch))
}

// stoppableJobs completes the namespace's jobs that stop (resume false) or resume (true) applies to:
// those neither finished nor stopped, or those stopped; a batch Job by its name, others as KIND/NAME.
func stoppableJobs(o *Options, resume bool) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		wls, err := namespaceWorkloads(cmd, o)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var refs []string
		for i := range wls.Items {
			wl := &wls.Items[i]
			if wl.Spec.Stopped != resume || apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadFinished) || wl.DeletionTimestamp != nil {
				continue
			}
			ref := view.JobOrWorkloadName(wl)
			if k := jobkind.Of(wl); k.Name() != gantry.JobKindJob {
				ref = view.KindRef(k) + "/" + ref
			}
			refs = append(refs, ref)
		}
		return refs, cobra.ShellCompDirectiveNoFileComp
	}
}
