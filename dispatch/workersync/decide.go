package workersync

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/jobkind"
)

// Reasons of Events on hub Jobs.
const (
	EventWithdrawn   = "Withdrawn"
	EventFinished    = "Finished"
	EventEvicted     = "Evicted"
	EventUnreachable = "ClusterUnreachable"
	EventNotCreated  = "JobNotCreated"
	// EventCopyNotCreated: a nominated cluster's API server does not take the Workload's copy.
	EventCopyNotCreated = "CopyNotCreated"
	// EventBadCheckpoint: the job's gantry.dev/last-checkpoint annotation is no time.
	EventBadCheckpoint = "BadCheckpoint"
)

// Decide returns what to do for the Workload of v.
func Decide(v View) Plan {
	v.HubJob = HubJobOf(v.Workload, v.HubJob)
	d := &decider{v: v, wl: v.Workload, status: v.Workload.Status.DeepCopy()}
	d.removeLeftovers()
	switch {
	case d.wl.DeletionTimestamp != nil:
		d.finalize()
	case apimeta.IsStatusConditionTrue(d.wl.Status.Conditions, gantry.WorkloadFinished):
		finished := apimeta.FindStatusCondition(d.wl.Status.Conditions, gantry.WorkloadFinished)
		d.failHubJob(finished.Reason, finished.Message) // where the Workload's end was written first
		d.withdrawFromLosers()                          // without a winner: from every cluster
	case d.wl.Status.Winner() == "" && (d.endIfDrained() || d.endIfPastAdmissionDeadline()):
		d.withdrawFromLosers()
	case d.wl.Status.Winner() == "":
		d.syncCopies()
	default:
		d.withdrawFromLosers()
		d.runOnWinner()
	}
	if !equality.Semantic.DeepEqual(&d.wl.Status, d.status) {
		d.plan.Status = d.status
	}
	return d.plan
}

type decider struct {
	v      View
	wl     *gantry.Workload
	status *gantry.WorkloadStatus // the Workload's status as the plan leaves it
	plan   Plan
}

// connected lists the connected clusters in name order, so that plans are deterministic.
func (d *decider) connected() []Cluster {
	var out []Cluster
	for _, c := range d.v.Clusters {
		if c.Connected {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (d *decider) mine(o metav1.Object) bool {
	return o.GetLabels()[gantry.WorkloadUIDLabel] == string(d.wl.UID)
}

// myCopy and myJob are the cluster's objects of this Workload; nil when it has none.
func (d *decider) myCopy(c Cluster) *gantry.Workload {
	if c.Copy != nil && d.mine(c.Copy) {
		return c.Copy
	}
	return nil
}

func (d *decider) myJob(c Cluster) client.Object {
	if c.Job != nil && d.mine(c.Job) {
		return c.Job
	}
	return nil
}

// worker plans a write to a worker; deleting what is already going is left out.
func (d *decider) worker(op Op, cluster string, obj client.Object) {
	if op != CreateCopy && op != CreateJob && obj.GetDeletionTimestamp() != nil {
		return
	}
	d.plan.Worker = append(d.plan.Worker, WorkerAction{Op: op, Cluster: cluster, Object: obj})
}

// removeLeftovers deletes, on every connected cluster, the objects under this Workload's name that
// Gantry created for an earlier Workload of the same name: that Workload is gone, since names are
// unique, and what it left would hold the name (and room) against this one for good.
func (d *decider) removeLeftovers() {
	for _, c := range d.connected() {
		if c.Copy != nil && !d.mine(c.Copy) {
			d.worker(Delete, c.Name, c.Copy)
		}
		if c.Job != nil && !d.mine(c.Job) {
			d.worker(Delete, c.Name, c.Job)
		}
	}
}

// withdraw deletes the Workload's copy and Job from one connected cluster: the Job pods first while
// it may run; in the background once it ended, since no pod of it runs then, and while a deletion
// pods first lasts, the controllers of some kinds (JobSet, the trainer) make the children they see
// go anew, and their pods run again.
func (d *decider) withdraw(c Cluster) {
	if cp := d.myCopy(c); cp != nil {
		d.worker(Delete, c.Name, cp)
	}
	if job := d.myJob(c); job != nil {
		if jobkind.Of(d.wl).State(job).Finished {
			d.worker(Delete, c.Name, job)
		} else {
			d.stopJob(c.Name, job)
		}
	}
}

// stopJob deletes a job that may run pods first, so that once it is gone nothing of it runs. A job of
// a kind whose controller makes its children anew while it goes (jobkind.SuspendsFirst) is suspended
// in the same plan, before the deletion (a cluster's writes go in order, and a failed one stops the
// rest): its controller sees the suspension before the deletion, and the children it makes meanwhile
// start no pods.
func (d *decider) stopJob(cluster string, job client.Object) {
	if k := jobkind.Of(d.wl); jobkind.SuspendBeforeDeletion(k) && !k.State(job).Suspended {
		d.worker(Suspend, cluster, job)
	}
	d.worker(DeleteForeground, cluster, job)
}

// syncCopies makes the connected clusters hold exactly the copies of the current nomination. A copy of
// an earlier epoch is fenced: removed first; its deletion brings the Workload back here to create the
// current one. A stopped Workload gets no new copy: the dispatcher withdraws its nomination, and the
// copies it has go then.
func (d *decider) syncCopies() {
	st := &d.wl.Status
	var fenced []string
	for _, c := range d.connected() {
		nominated := st.DispatchEpoch > 0 && slices.Contains(st.Nominated(), c.Name)
		if job := d.myJob(c); job != nil {
			// No winner, so nothing of it may run (an eviction waits for its Job to go).
			d.stopJob(c.Name, job)
		}
		cp := d.myCopy(c)
		switch {
		case c.Copy != nil && cp == nil:
			// A leftover holds the name; its deletion brings the Workload back here.
		case cp == nil && nominated && c.CopyExpected.After(d.v.Now):
			d.plan.requeue(c.CopyExpected.Sub(d.v.Now)) // should the copy never show up, look again
		case cp == nil && nominated && !c.Fenced && c.CopyRefused != "" && !d.wl.Spec.Stopped:
			d.copyRefused(c)
		case cp == nil && nominated && !c.Fenced && !d.wl.Spec.Stopped:
			d.worker(CreateCopy, c.Name, NewCopy(d.wl, c.KueueLocalQueue))
		case cp == nil:
		case !nominated || epochOf(cp.Labels) != st.DispatchEpoch:
			d.worker(Delete, c.Name, cp)
			if cp.DeletionTimestamp == nil {
				fenced = append(fenced, c.Name)
			}
		}
	}
	if len(fenced) > 0 {
		d.event(corev1.EventTypeNormal, EventWithdrawn, "Withdrew copies from %s", strings.Join(fenced, ", "))
	}
}

// copyRefused says, once, that a nominated cluster does not take the Workload's copy, with its API
// server's words, and asks again every JobCreateRetry: the dispatcher hears nothing from a cluster
// that holds no copy, so without it the Workload would wait for that cluster in silence.
func (d *decider) copyRefused(c Cluster) {
	if c.CopyRefusedNew {
		d.event(corev1.EventTypeWarning, EventCopyNotCreated, "%s does not take the Workload's copy: %s; trying again every %s",
			c.Name, c.CopyRefused, JobCreateRetry)
	}
	if retry := c.CopyRefusedAt.Add(JobCreateRetry); d.v.Now.Before(retry) {
		d.plan.requeue(retry.Sub(d.v.Now))
		return
	}
	d.worker(CreateCopy, c.Name, NewCopy(d.wl, c.KueueLocalQueue))
}

// endIfPastAdmissionDeadline finishes a Workload without a winner that has waited its admission deadline,
// counted from when it last began to wait: its creation, its last eviction from a cluster, or its resume
// after a stop (condition Stopped=False); as Inadmissible with what blocked it (its Pending message).
// Before then it asks to look again at the deadline.
func (d *decider) endIfPastAdmissionDeadline() bool {
	if d.v.AdmissionDeadline <= 0 || d.wl.Spec.Stopped {
		return false // a stopped one waits for its owner, not for a cluster
	}
	since := d.wl.CreationTimestamp.Time
	if n := len(d.wl.Status.Evictions); n > 0 && d.wl.Status.Evictions[n-1].Time.After(since) {
		since = d.wl.Status.Evictions[n-1].Time.Time
	}
	if c := apimeta.FindStatusCondition(d.wl.Status.Conditions, gantry.WorkloadStopped); c != nil && c.Status == metav1.ConditionFalse &&
		c.LastTransitionTime.After(since) {
		since = c.LastTransitionTime.Time
	}
	due := since.Add(d.v.AdmissionDeadline)
	if d.v.Now.Before(due) {
		d.plan.requeue(due.Sub(d.v.Now))
		return false
	}
	msg := fmt.Sprintf("no cluster admitted it within its admission deadline of %s (waiting since %s)",
		d.v.AdmissionDeadline, since.UTC().Format(time.RFC3339))
	if c := apimeta.FindStatusCondition(d.wl.Status.Conditions, gantry.WorkloadPending); c != nil && c.Message != "" {
		msg += ": " + c.Message
	}
	// The end is written before the hub job is failed (in the next pass): should the dispatcher record
	// a winner meanwhile, this write is refused and the job runs, its hub job untouched.
	d.end(gantry.ReasonInadmissible, msg)
	return true
}

// endIfDrained finishes a Workload without a winner whose GlobalQueue is held and drained. As at the
// admission deadline, the end is written before the hub job is failed (in the next pass): should the
// dispatcher record a winner meanwhile, this write is refused and the job runs.
func (d *decider) endIfDrained() bool {
	if d.v.DrainedBy == "" {
		return false
	}
	d.end(gantry.ReasonQueueDrained, fmt.Sprintf("its GlobalQueue %s was held and drained before a cluster admitted it; it did not run", d.v.DrainedBy))
	return true
}

// withdrawFromLosers removes the Workload from every connected cluster but its winner.
func (d *decider) withdrawFromLosers() {
	for _, c := range d.connected() {
		if c.Name != d.wl.Status.Winner() {
			d.withdraw(c)
		}
	}
}

// runOnWinner creates the Job on the winner, records that it did, mirrors its status and finishes the
// Workload with it; or evicts the Workload when the winner's agent gave it up.
func (d *decider) runOnWinner() {
	w, ok := d.v.Clusters[d.wl.Status.Winner()]
	if w.Fenced || d.fenceDue(w) {
		d.evictFromLost(w)
		return
	}
	if !d.reachable(w, ok) {
		if !w.FenceDue.IsZero() {
			d.plan.requeue(w.FenceDue.Sub(d.v.Now))
		}
		return
	}
	if p := d.wl.Status.CurrentPreemption(); p != nil {
		d.evictForPreemption(w, p)
		return
	}
	if d.wl.Spec.Stopped && !d.endedOn(w) {
		d.evictForStop(w)
		return
	}
	if cp := d.myCopy(w); cp != nil && epochOf(cp.Labels) == d.wl.Status.DispatchEpoch && givenUp(cp) {
		d.evict(w, cp)
		return
	}
	job := d.myJob(w)
	created := apimeta.IsStatusConditionTrue(d.wl.Status.Conditions, gantry.WorkloadJobCreated)
	switch {
	case job != nil && !created, job == nil && !created && w.JobExpected.After(d.v.Now):
		d.recordJobCreated(w.Name)
	case job == nil && w.JobExpected.After(d.v.Now):
		d.plan.requeue(w.JobExpected.Sub(d.v.Now)) // created; the cache does not show it yet
		return
	case job == nil && created:
		d.plan.ConfirmGone = w.Name
		d.finish(gantry.ReasonRemoteJobLost, fmt.Sprintf("the Job was removed from %s before it finished; it is not run again", w.Name))
		return
	case job == nil && w.ForeignJob:
		d.finish(gantry.ReasonRemoteJobConflict, fmt.Sprintf("a Job named %s that Gantry did not create already exists on %s", JobNameOf(d.wl), w.Name))
		return
	case job == nil && w.JobRefused != "":
		d.refused(w)
		return
	case job == nil && w.Job != nil:
		return // a leftover holds the name; its deletion brings the Workload back here
	case job == nil && d.v.HubJob != nil && d.jobMovedOn():
		d.jobChanged(w)
		return
	case job == nil && d.v.HubJob != nil && w.JobCreateFailing != "":
		d.createFailing(w)
		return
	case job == nil && d.v.HubJob != nil:
		d.worker(CreateJob, w.Name, NewRemoteJob(d.v.HubJob, d.wl, w.KueueLocalQueue))
		return
	}
	switch {
	case job != nil && d.suspendedByFence(job) && w.LeaseRenewed:
		// The agent stopped it while it did not hear from the hub; the cluster is still the winner, so it
		// goes on where it is.
		d.worker(Resume, w.Name, job)
	case job != nil && d.suspendedByFence(job):
		d.plan.requeue(LeasePoll) // resumed once the lease is renewed, or the agent would stop it again
	}
	if job != nil {
		d.noteCheckpoint(job, w.Name)
	}
	if job != nil && d.v.HubJob != nil {
		d.mirror(w, job)
	}
}

// fenceDue says whether, under the failover policy Fence, the hub has not reached the cluster for long
// enough that its agent has stopped the hub's Jobs there.
func (d *decider) fenceDue(c Cluster) bool {
	return !c.Connected && !c.FenceDue.IsZero() && !d.v.Now.Before(c.FenceDue)
}

func (d *decider) suspendedByFence(job client.Object) bool {
	return job.GetAnnotations()[gantry.SuspendedByAnnotation] == gantry.SuspendedByFence && jobkind.Of(d.wl).State(job).Suspended
}

// reachable says whether the winner can be worked on, and keeps the ClusterReachable condition true:
// while the winner cannot be reached, its Job may run there, so the Workload keeps its quota and is not
// dispatched elsewhere; the condition and an Event say so.
func (d *decider) reachable(w Cluster, known bool) bool {
	if known && w.Connected {
		if c := apimeta.FindStatusCondition(d.status.Conditions, gantry.WorkloadClusterReachable); c != nil {
			d.setCondition(gantry.WorkloadClusterReachable, metav1.ConditionTrue, gantry.ReasonClusterReachable, "reaching "+w.Name)
		}
		return true
	}
	msg := fmt.Sprintf("%s is unreachable", d.wl.Status.Winner())
	if w.DisconnectedReason != "" && w.DisconnectedReason != gantry.ReasonUnreachable {
		msg += " (" + w.DisconnectedReason + ")"
	}
	if !w.DisconnectedSince.IsZero() {
		msg += " since " + w.DisconnectedSince.UTC().Format(timeFormat)
	}
	if w.FenceDue.IsZero() {
		msg += "; its Job may still run there, so it keeps its quota and is not dispatched elsewhere"
	} else {
		msg += fmt.Sprintf("; its agent stops the Job there when the hub's lease lapses, and it is dispatched elsewhere from %s (failover policy Fence)",
			w.FenceDue.UTC().Format(timeFormat))
	}
	prev := apimeta.FindStatusCondition(d.status.Conditions, gantry.WorkloadClusterReachable)
	if prev == nil || prev.Status != metav1.ConditionFalse {
		d.event(corev1.EventTypeWarning, EventUnreachable, "%s", msg)
	}
	d.setCondition(gantry.WorkloadClusterReachable, metav1.ConditionFalse, gantry.ReasonClusterUnreachable, msg)
	return false
}

const timeFormat = "2006-01-02T15:04:05Z"

// givenUp says whether the winner's agent gave the copy up because its pods could not all be placed.
func givenUp(cp *gantry.Workload) bool {
	c := apimeta.FindStatusCondition(cp.Status.Conditions, gantry.WorkloadAdmitted)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == gantry.ReasonPlacementTimeout
}

func (d *decider) recordJobCreated(cluster string) {
	d.setCondition(gantry.WorkloadJobCreated, metav1.ConditionTrue, gantry.ReasonJobCreated,
		fmt.Sprintf("the %s was created on %s in epoch %d", jobkind.Of(d.wl).Name(), cluster, d.wl.Status.DispatchEpoch))
	d.openRun(cluster)
}

// mirror copies the worker job's status to the hub job, and finishes the Workload once the job ended
// and its final status is mirrored. Its end is mirrored at once, its start within MirrorInterval of
// the last mirror, its progress within MirrorProgressInterval, the rest within MirrorRestInterval.
// A job whose end was decided (jobkind.State.EndingSince) and whose start the hub shows waits up to
// MirrorProgressInterval from then for its end, which usually follows as soon as its pods are gone:
// one write for both. Its start is never held back: the hub counts a started job as one that ran.
func (d *decider) mirror(w Cluster, job client.Object) {
	k := jobkind.Of(d.wl)
	hubJob, last := d.v.HubJob, d.v.LastMirror
	st, shown := k.State(job), k.State(hubJob)
	interval := MirrorRestInterval
	switch {
	case shown.Started != st.Started:
		interval = MirrorInterval
	case k.Progress(hubJob) != k.Progress(job):
		interval = MirrorProgressInterval
	}
	mirrored := hubJob.DeepCopyObject().(client.Object)
	switch {
	case !k.CopyStatus(mirrored, job):
	case last != nil && hubJob.GetResourceVersion() == last.Replaced:
		// The cache still shows the hub job as it was before the last mirror: writing now would only
		// conflict, and finishing now could finish before the final status is mirrored.
		d.plan.requeue(CacheCatchUp)
		return
	case last != nil && !st.Finished && d.v.Now.Sub(last.At) < interval:
		d.plan.requeue(interval - d.v.Now.Sub(last.At))
		return
	case !st.Finished && shown.Started && d.v.Now.Before(st.EndingSince.Add(MirrorProgressInterval)):
		d.plan.requeue(min(st.EndingSince.Add(MirrorProgressInterval).Sub(d.v.Now), MirrorProgressInterval))
		return
	default:
		d.plan.HubJobStatus = mirrored
	}
	if st.Finished {
		reason, how := gantry.ReasonJobSucceeded, "complete"
		if !st.Succeeded {
			reason, how = gantry.ReasonJobFailed, "failed"
		}
		d.finish(reason, fmt.Sprintf("the %s %s on %s", k.Name(), how, w.Name))
	}
}

// evict takes the Workload back from a winner that gave it up. It deletes the Job there, pods first,
// and once the Job is gone clears the hub Job's mirrored status, then records the eviction and clears
// the winner in one status write, after a live read confirmed the Job gone; the dispatcher then
// dispatches it in a new epoch.
func (d *decider) evict(w Cluster, cp *gantry.Workload) {
	if job := d.myJob(w); job != nil {
		d.stopJob(w.Name, job)
		d.plan.requeue(DeletionPoll)
		return
	}
	cond := apimeta.FindStatusCondition(cp.Status.Conditions, gantry.WorkloadAdmitted)
	d.takeBack(cond.Reason, cond.Message)
	d.plan.ConfirmGone = w.Name
	d.event(corev1.EventTypeWarning, EventEvicted, "Pods not placed on %s (%s); dispatching again", w.Name, cond.Message)
}

// evictForPreemption takes the Workload back from its winner for the workload the dispatcher preempted
// it for. Its Job there is deleted, pods first; only once a live read shows it gone is the winner
// cleared, which frees its quota: the preemptor is nominated only then, so the two never hold the same
// GPUs at once.
func (d *decider) evictForPreemption(w Cluster, p *gantry.Preemption) {
	if d.removeFromWinner(w) {
		d.takeBack(gantry.ReasonPreempted, p.Message)
		d.event(corev1.EventTypeWarning, EventEvicted, "Preempted on %s for %s (%s); its pods are gone, dispatching again",
			w.Name, p.Preemptor, p.Reason)
	}
}

// evictForStop takes the Workload its owner stopped (spec.stopped) back from its winner, as a preempted
// one is: its Job there deleted, pods first, and only once a live read shows it gone is the winner
// cleared and its quota released. It then waits, stopped, until it is resumed.
func (d *decider) evictForStop(w Cluster) {
	if d.removeFromWinner(w) {
		d.takeBack(gantry.ReasonStopped, fmt.Sprintf("stopped by its owner (annotation %s); taken back from %s", gantry.StoppedAnnotation, w.Name))
		d.event(corev1.EventTypeNormal, EventEvicted, "Stopped on %s; its pods are gone, it waits until it is resumed", w.Name)
	}
}

// removeFromWinner removes the Workload's Job and copy from its winner for a take-back the hub decided
// (a preemption, a stop) and says whether the take-back may be recorded: the Job is deleted first,
// pods first, and once it is gone (a Job created but not in the cache yet is waited for) the copy goes,
// whose room its agent holds until then, and a live read must confirm no Job of it is left there.
func (d *decider) removeFromWinner(w Cluster) bool {
	if job := d.myJob(w); job != nil {
		d.stopJob(w.Name, job)
		d.plan.requeue(DeletionPoll)
		return false
	}
	if w.JobExpected.After(d.v.Now) {
		d.plan.requeue(w.JobExpected.Sub(d.v.Now)) // created; deleted once the cache shows it
		return false
	}
	if cp := d.myCopy(w); cp != nil {
		d.worker(Delete, w.Name, cp)
	}
	d.plan.ConfirmGone = w.Name
	return true
}

// endedOn says whether the Workload's Job on the winner ended: it is finished with its end mirrored,
// not taken back to run again.
func (d *decider) endedOn(w Cluster) bool {
	job := d.myJob(w)
	return job != nil && jobkind.Of(d.wl).State(job).Finished
}

// jobMovedOn says whether the hub job's spec changed since the Workload was last found to describe it:
// the Job on the winner must be built from what was admitted, so it is not built from this one.
func (d *decider) jobMovedOn() bool {
	g := d.wl.Spec.JobGeneration
	return g != 0 && d.v.HubJob.GetGeneration() != g
}

// jobChanged takes the Workload back from a winner before anything is created there from a job that
// changed since it was admitted; the job's controller then makes the Workload anew from the job as it
// is, or, when the change leaves the demand as it was, records the new generation, and it is
// dispatched again.
func (d *decider) jobChanged(w Cluster) {
	d.plan.ConfirmGone = w.Name // an earlier create of the epoch may have gone through
	msg := fmt.Sprintf("the %s changed (generation %d, admitted %d) before it was created on %s; nothing was created from the change",
		jobkind.Of(d.wl).Name(), d.v.HubJob.GetGeneration(), d.wl.Spec.JobGeneration, w.Name)
	d.takeBack(gantry.ReasonJobChanged, msg)
	d.event(corev1.EventTypeWarning, EventEvicted, "%s; dispatching again", msg)
}

// createFailing handles a winner that does not take the job yet. JobCreated=False (WorkerRefusing) says
// why and since when, and the hub job gets a Warning Event as it starts; the create is tried again every
// JobCreateRetry. Past JobCreateGrace since the first failure the Workload is taken back
// (RemoteJobRefused, with the worker's words) and dispatched again; a cluster that refuses it again and
// again is left out.
func (d *decider) createFailing(w Cluster) {
	msg := fmt.Sprintf("%s does not take the %s: %s", w.Name, jobkind.Of(d.wl).Name(), w.JobCreateFailing)
	since := d.v.Now
	if c := apimeta.FindStatusCondition(d.status.Conditions, gantry.WorkloadJobCreated); c != nil && c.Status == metav1.ConditionFalse && c.Reason == gantry.ReasonWorkerRefusing {
		since = c.LastTransitionTime.Time
	} else {
		apimeta.RemoveStatusCondition(&d.status.Conditions, gantry.WorkloadJobCreated) // so that it starts now
	}
	due := since.Add(JobCreateGrace)
	if !d.v.Now.Before(due) {
		d.plan.ConfirmGone = w.Name // an earlier create of the epoch may have gone through
		d.takeBack(gantry.ReasonRemoteJobRefused, fmt.Sprintf("%s for %s", msg, JobCreateGrace))
		d.event(corev1.EventTypeWarning, EventEvicted, "%s for %s; dispatching again", msg, JobCreateGrace)
		return
	}
	if since.Equal(d.v.Now) {
		d.event(corev1.EventTypeWarning, EventNotCreated, "%s; trying again, and dispatching elsewhere from %s", msg, due.UTC().Format(timeFormat))
	}
	d.setCondition(gantry.WorkloadJobCreated, metav1.ConditionFalse, gantry.ReasonWorkerRefusing,
		fmt.Sprintf("%s; tried again every %s, dispatched elsewhere from %s", msg, JobCreateRetry, due.UTC().Format(timeFormat)))
	if retry := w.JobCreateFailedAt.Add(JobCreateRetry); d.v.Now.Before(retry) {
		d.plan.requeue(min(retry.Sub(d.v.Now), due.Sub(d.v.Now)))
		return
	}
	d.worker(CreateJob, w.Name, NewRemoteJob(d.v.HubJob, d.wl, w.KueueLocalQueue))
}

// refused takes the Workload back from a winner whose API server refused its job: nothing of it was
// created there, so it may run elsewhere; a cluster that refuses it again and again is left out.
func (d *decider) refused(w Cluster) {
	// The refusal says nothing was created by that request; a live read says no Job of it is there at
	// all (an earlier create of the epoch may have gone through) before the winner is cleared.
	d.plan.ConfirmGone = w.Name
	msg := fmt.Sprintf("%s refused to create the %s: %s", w.Name, jobkind.Of(d.wl).Name(), w.JobRefused)
	d.takeBack(gantry.ReasonRemoteJobRefused, msg)
	d.event(corev1.EventTypeWarning, EventEvicted, "%s; dispatching again", msg)
}

// evictFromLost takes the Workload back from a winner the operator fenced, or that the hub has not
// reached for longer than its agent lets the hub's Jobs run under the policy Fence: nothing of it runs
// there any more, so no live check is possible or needed. What is left there goes when it is back (the
// Workload's objects of an older epoch are withdrawn from every connected cluster but the winner).
func (d *decider) evictFromLost(w Cluster) {
	msg := fmt.Sprintf("%s is fenced: nothing of it runs any more", w.Name)
	if !w.Fenced {
		msg = fmt.Sprintf("%s was not reached for its failover timeout and margin (policy Fence): its agent has stopped the job there", w.Name)
	}
	d.takeBack(gantry.ReasonWorkerLost, msg)
	d.event(corev1.EventTypeWarning, EventEvicted, "%s; dispatching again", msg)
}

// takeBack records the eviction of the winner, which makes the winner void (WorkloadStatus.Winner): the
// dispatcher, which owns the winner's fields, clears them with its next write and dispatches the
// Workload again in a new epoch. The hub Job's status mirrored from the winner is cleared first.
func (d *decider) takeBack(reason, message string) {
	if d.v.HubJob != nil {
		if cleared := d.v.HubJob.DeepCopyObject().(client.Object); jobkind.Of(d.wl).ClearStatus(cleared) {
			d.plan.HubJobStatus = cleared
		}
	}
	st := d.status
	d.closeRun(reason, true)
	st.Evictions = append(st.Evictions, gantry.Eviction{Cluster: st.ClusterName, Epoch: st.DispatchEpoch,
		Reason: reason, Message: message, Time: metav1.NewTime(d.v.Now)})
	if n := len(st.Evictions); n > gantry.MaxEvictions {
		st.Evictions = st.Evictions[n-gantry.MaxEvictions:]
	}
	d.setCondition(gantry.WorkloadJobCreated, metav1.ConditionFalse, gantry.ReasonEvicted, dispatch.TakenBackMessage(st.Evictions[len(st.Evictions)-1]))
}

// finish records that the Workload ended, which releases its quota, and marks the hub job Failed when
// Gantry ended it (failHubJob), in the same plan: the hub job's status is written first.
func (d *decider) finish(reason, message string) {
	if d.end(reason, message) {
		d.failHubJob(reason, message)
	}
}

// end records that the Workload ended, and says whether it had not before.
func (d *decider) end(reason, message string) bool {
	if apimeta.IsStatusConditionTrue(d.status.Conditions, gantry.WorkloadFinished) {
		return false
	}
	d.setCondition(gantry.WorkloadFinished, metav1.ConditionTrue, reason, message)
	d.closeRun(reason, false)
	if reason != gantry.ReasonJobSucceeded && reason != gantry.ReasonJobFailed {
		d.event(corev1.EventTypeWarning, EventFinished, "%s", message)
	}
	return true
}

// failHubJob marks the hub job Failed with the reason when Gantry ended the job itself (it did not
// finish on its own, whose end the mirrored status says), so that kubectl tells the truth without
// reading Workloads. A job already finished keeps its status.
func (d *decider) failHubJob(reason, message string) {
	if reason == gantry.ReasonJobSucceeded || reason == gantry.ReasonJobFailed || d.v.HubJob == nil {
		return
	}
	if failed := d.v.HubJob.DeepCopyObject().(client.Object); jobkind.Of(d.wl).Fail(failed, reason, message, metav1.NewTime(d.v.Now)) {
		d.plan.HubJobStatus = failed
	}
}

// finalize withdraws everything from the connected workers, then lets the Workload go. While its Job
// may run on the winner (not finished), it waits until a live read shows that Job gone, pods first:
// letting go earlier would let the job be dispatched again while it still runs. A winner that cannot be
// reached holds the Workload, and its quota, until it is back.
func (d *decider) finalize() {
	if !controllerutil.ContainsFinalizer(d.wl, gantry.WorkloadFinalizer) || d.v.FinalizerRemoved {
		return
	}
	for _, c := range d.connected() {
		d.withdraw(c)
	}
	winner := d.wl.Status.Winner()
	if winner == "" || apimeta.IsStatusConditionTrue(d.wl.Status.Conditions, gantry.WorkloadFinished) {
		d.plan.RemoveFinalizer = true
		return
	}
	w, ok := d.v.Clusters[winner]
	switch {
	case w.Fenced || d.fenceDue(w):
		d.plan.RemoveFinalizer = true // nothing of it runs there any more
		d.closeRun(gantry.RunDeleted, false)
		d.endStandingHubJob(winner)
	case !ok || !w.Connected:
		d.reachable(w, ok)
		d.setCondition(gantry.WorkloadDeleting, metav1.ConditionTrue, gantry.ReasonWaitingForWorker,
			fmt.Sprintf("waiting for %s to be reachable to remove the Job there; the Workload and its quota stay until then", winner))
	case d.myJob(w) != nil:
		d.plan.requeue(DeletionPoll)
	default:
		d.plan.ConfirmGone = winner
		d.plan.RemoveFinalizer = true
		d.closeRun(gantry.RunDeleted, false)
		d.endStandingHubJob(winner)
	}
}

// endStandingHubJob marks the hub job Failed as RanBefore when its Workload, admitted on the winner,
// goes while the job stands (the Workload was deleted by hand): the job's controller would make it a
// new Workload and run it again. The mark is written before the Workload lets go, so it does not hang
// on the job's mirrored status, which a worker cut off from the hub may never have sent.
func (d *decider) endStandingHubJob(winner string) {
	if j := d.v.HubJob; j != nil && j.GetDeletionTimestamp() == nil {
		d.failHubJob(gantry.ReasonRanBefore, "its Workload was deleted after the job was admitted on "+winner+"; it is not run again")
	}
}

func (d *decider) setCondition(typ string, status metav1.ConditionStatus, reason, msg string) {
	apimeta.SetStatusCondition(&d.status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
		Message: msg, ObservedGeneration: d.wl.Generation, LastTransitionTime: metav1.NewTime(d.v.Now)})
}

func (d *decider) event(eventType, reason, format string, args ...any) {
	d.plan.Events = append(d.plan.Events, Event{Type: eventType, Reason: reason, Message: fmt.Sprintf(format, args...)})
}
