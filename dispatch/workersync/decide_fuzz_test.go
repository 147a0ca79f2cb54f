package workersync

import (
	"slices"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
	"github.com/gantry-dev/gantry/jobkind"
)

// FuzzDecideNeverRunsTwice checks, over random views of one Workload, the rules that keep a job from
// running twice or being lost: a Job is created only on the winner and only while none is recorded as
// created; the winner is cleared, and the Workload let go while its Job may run, only behind a live
// check of the winner; nothing is written to a cluster that is not connected; deletes name exactly
// objects in the view; the plan writes only the status fields the Workload controller owns
// (hubtest.WorkloadControllerFields); a TrainJob is suspended only on its way out, pods first, in the same plan; a job
// of another UID under the hub job's name is never written to nor built from, nor a job whose spec
// moved on since its Workload was built; a Workload with a winner is never ended for its queue's
// drain or its admission deadline; a stopped Workload gets no copy and no Job created, and its
// winner's running Job is deleted only pods first; the view is never modified.
func FuzzDecideNeverRunsTwice(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
	f.Add([]byte{255, 128, 7, 3, 1, 0, 200, 99, 42, 17, 5, 250, 33, 64})
	f.Fuzz(func(t *testing.T, data []byte) {
		v := randomView(&byteSource{data: data})
		before := v.Workload.DeepCopy()
		p := Decide(v)
		if diff := before.Status.DispatchEpoch - v.Workload.Status.DispatchEpoch; diff != 0 || v.Workload.ResourceVersion != before.ResourceVersion {
			t.Fatalf("Decide modified the Workload")
		}
		checkPlan(t, v, p)
		if again := Decide(v); len(again.Worker) != len(p.Worker) || again.RemoveFinalizer != p.RemoveFinalizer {
			t.Fatalf("Decide is not deterministic")
		}
	})
}

func checkPlan(t *testing.T, v View, p Plan) {
	t.Helper()
	wl := v.Workload
	st := wl.Status
	winner := st.Winner()
	recorded := apimeta.IsStatusConditionTrue(st.Conditions, gantry.WorkloadJobCreated)
	finished := apimeta.IsStatusConditionTrue(st.Conditions, gantry.WorkloadFinished)
	for _, a := range p.Worker {
		c := v.Clusters[a.Cluster]
		if !c.Connected {
			t.Fatalf("%s: %s is not connected", a, a.Cluster)
		}
		switch a.Op {
		case CreateJob:
			if v.HubJob.GetUID() != metav1.GetControllerOf(wl).UID {
				t.Fatalf("%s: built from a job of another UID under the name", a)
			}
			if g := wl.Spec.JobGeneration; g != 0 && v.HubJob.GetGeneration() != g {
				t.Fatalf("%s: built from generation %d of the job, admitted %d", a, v.HubJob.GetGeneration(), g)
			}
			if a.Cluster != winner || recorded || finished || wl.DeletionTimestamp != nil || c.Job != nil || wl.Spec.Stopped {
				t.Fatalf("%s: winner %q, recorded %v, finished %v, deleting %v, job in view %v",
					a, winner, recorded, finished, wl.DeletionTimestamp != nil, c.Job != nil)
			}
		case Resume:
			if a.Cluster != winner || !c.LeaseRenewed || finished || c.Job == nil || a.Object.GetUID() != c.Job.GetUID() {
				t.Fatalf("%s: resumes off the winner %q or before the lease was renewed", a, winner)
			}
		case Suspend:
			if !slices.ContainsFunc(p.Worker, func(d WorkerAction) bool {
				return d.Op == DeleteForeground && d.Cluster == a.Cluster && d.Object.GetUID() == a.Object.GetUID()
			}) {
				t.Fatalf("%s: suspends a job the plan does not delete pods first", a)
			}
			if c.Job == nil || c.Job.GetUID() != a.Object.GetUID() {
				t.Fatalf("%s: suspends an object not in the view", a)
			}
		case CreateCopy:
			if winner != "" || !slices.Contains(st.Nominated(), a.Cluster) || epochOf(a.Object.GetLabels()) != st.DispatchEpoch || c.Copy != nil || wl.Spec.Stopped {
				t.Fatalf("%s: not the current nomination (epoch %d, %v) or the name is taken", a, st.DispatchEpoch, st.Nominated())
			}
		default:
			if (c.Copy == nil || c.Copy.UID != a.Object.GetUID()) && (c.Job == nil || c.Job.GetUID() != a.Object.GetUID()) {
				t.Fatalf("%s: deletes an object not in the view", a)
			}
			mine := c.Job != nil && a.Object.GetUID() == c.Job.GetUID() && a.Cluster == winner && !finished &&
				c.Job.GetLabels()[gantry.WorkloadUIDLabel] == string(wl.UID)
			if mine && wl.DeletionTimestamp == nil && !givenUpIn(c, st.DispatchEpoch) && st.CurrentPreemption() == nil && !wl.Spec.Stopped {
				t.Fatalf("%s: deletes the winner's running Job", a)
			}
			if mine && wl.Spec.Stopped && a.Op != DeleteForeground && !jobkind.Of(wl).State(c.Job).Finished {
				t.Fatalf("%s: stops the winner's running Job other than pods first", a)
			}
		}
	}
	if p.HubJobStatus != nil && p.HubJobStatus.GetUID() != metav1.GetControllerOf(wl).UID {
		t.Fatalf("writes the status of a job of another UID under the name")
	}
	if p.Status != nil {
		checkStatusWrite(t, v, p)
	}
	if p.RemoveFinalizer && winner != "" && !finished {
		w := v.Clusters[winner]
		lost := w.Fenced || (!w.Connected && !w.FenceDue.IsZero() && !v.Now.Before(w.FenceDue))
		if !lost && (p.ConfirmGone != winner || !w.Connected || (w.Job != nil && w.Job.GetLabels()[gantry.WorkloadUIDLabel] == string(wl.UID))) {
			t.Fatalf("lets go of a Workload whose Job may run on %s", winner)
		}
	}
	if p.Status != nil && apimeta.IsStatusConditionTrue(p.Status.Conditions, gantry.WorkloadFinished) && !finished {
		reason := apimeta.FindStatusCondition(p.Status.Conditions, gantry.WorkloadFinished).Reason
		if reason == gantry.ReasonRemoteJobLost && p.ConfirmGone != st.ClusterName {
			t.Fatalf("finished as lost without a live check")
		}
		if (reason == gantry.ReasonQueueDrained || reason == gantry.ReasonInadmissible) && winner != "" {
			t.Fatalf("finished as %s while %s is its winner: its job may run there", reason, winner)
		}
	}
}

// checkStatusWrite checks that the plan's status write touches only the Workload controller's fields,
// and takes the winner back only behind a live check that its Job is gone.
func checkStatusWrite(t *testing.T, v View, p Plan) {
	t.Helper()
	st := v.Workload.Status
	for _, f := range hubtest.StatusFieldsChanged(&st, p.Status) {
		if !slices.Contains(hubtest.WorkloadControllerFields, f) {
			t.Fatalf("writes %s, a field it does not own", f)
		}
	}
	if winner := st.Winner(); winner != "" && p.Status.Winner() != winner {
		w := v.Clusters[winner]
		confirmed := p.ConfirmGone == winner || w.Fenced || (!w.Connected && !w.FenceDue.IsZero() && !v.Now.Before(w.FenceDue))
		if !confirmed || !p.Status.TakenBack() {
			t.Fatalf("winner %q taken back without a confirmed eviction (confirm %q)", winner, p.ConfirmGone)
		}
	}
}

func givenUpIn(c Cluster, epoch int64) bool {
	return c.Copy != nil && epochOf(c.Copy.Labels) == epoch && givenUp(c.Copy)
}

type byteSource struct {
	data []byte
	i    int
}

func (b *byteSource) next(n int) int {
	if b.i >= len(b.data) {
		return 0
	}
	x := int(b.data[b.i])
	b.i++
	return x % n
}

func randomView(b *byteSource) View {
	names := []string{"w1", "w2", "w3"}
	w := workload()
	epoch := int64(b.next(3))
	var nominated []string
	for _, n := range names {
		if b.next(2) == 1 {
			nominated = append(nominated, n)
		}
	}
	w.Nominated("", epoch, nominated...)
	if len(nominated) > 0 && epoch > 0 && b.next(2) == 1 {
		w.AdmittedOn(nominated[b.next(len(nominated))])
		if b.next(2) == 1 {
			w.JobCreated()
		} else if b.next(3) == 0 {
			w.Refusing("w1 does not take the Job", now.Add(-time.Duration(b.next(3))*time.Minute))
		}
		if b.next(4) == 0 {
			w.Finished(gantry.ReasonJobSucceeded)
		}
	}
	if b.next(4) == 0 {
		w.Deleting()
	}
	job := hubJob()
	if b.next(5) == 0 {
		job = nil
	}
	v := view(w.Obj(), job)
	for _, n := range names {
		v.Clusters[n] = randomCluster(b, n)
	}
	if b.next(3) == 0 {
		v.LastMirror = &Mirror{At: now.Add(-time.Duration(b.next(3)) * 400 * time.Millisecond), Replaced: []string{"9", "10"}[b.next(2)]}
	}
	if b.next(3) == 0 { // drawn late, so that inputs found before preemption keep their meaning
		st := &v.Workload.Status
		st.Preemption = &gantry.Preemption{Cluster: names[b.next(3)], Epoch: int64(b.next(3)), Preemptor: "ns/urgent", Reason: gantry.ReasonInQueuePriority}
	}
	if b.next(4) == 0 { // drawn last, as preemption
		asTrainJobs(&v)
	}
	if b.next(4) == 0 && v.HubJob != nil { // the job deleted and submitted again under its name
		v.HubJob.SetUID("job-uid-2")
	}
	if b.next(3) == 0 && v.HubJob != nil { // the job's spec changed since the Workload was built, or not
		v.Workload.Spec.JobGeneration = 1
		v.HubJob.SetGeneration(int64(1 + b.next(2)))
	}
	if st := &v.Workload.Status; st.ClusterName != "" && b.next(4) == 0 { // taken back; the dispatcher has not cleared it yet
		st.Evictions = append(st.Evictions, gantry.Eviction{Cluster: st.ClusterName, Epoch: st.DispatchEpoch, Reason: gantry.ReasonPlacementTimeout, Time: metav1.NewTime(now.Add(-time.Second))})
	}
	if b.next(4) == 0 { // drawn last: its GlobalQueue held and drained
		v.DrainedBy = "closing"
	}
	if b.next(4) == 0 { // drawn last: its owner stopped it
		v.Workload.Spec.Stopped = true
	}
	return v
}

// asTrainJobs makes the view's jobs TrainJobs, which are suspended before they are deleted pods first
// (jobkind.SuspendsFirst): the same objects, suspended or not, running or complete alike.
func asTrainJobs(v *View) {
	v.Workload.Spec.JobKind = gantry.JobKindTrainJob
	convert := func(j *batchv1.Job) *trainer.TrainJob {
		tj := &trainer.TrainJob{ObjectMeta: *j.ObjectMeta.DeepCopy(), Spec: trainer.TrainJobSpec{Suspend: j.Spec.Suspend}}
		if apimeta.IsStatusConditionTrue(jobConditions(j), string(batchv1.JobComplete)) {
			tj.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue}}
		}
		return tj
	}
	if j, ok := v.HubJob.(*batchv1.Job); ok && j != nil {
		v.HubJob = convert(j)
	}
	for name, c := range v.Clusters {
		if j, ok := c.Job.(*batchv1.Job); ok && j != nil {
			c.Job = convert(j)
			v.Clusters[name] = c
		}
	}
}

// jobConditions are a batch Job's conditions in the form of metav1.Condition, for reading.
func jobConditions(j *batchv1.Job) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range j.Status.Conditions {
		out = append(out, metav1.Condition{Type: string(c.Type), Status: metav1.ConditionStatus(c.Status)})
	}
	return out
}

func randomCluster(b *byteSource, name string) Cluster {
	fenced := b.next(5) == 0
	var fenceDue time.Time
	switch b.next(3) {
	case 1:
		fenceDue = now.Add(-time.Second)
	case 2:
		fenceDue = now.Add(time.Minute)
	}
	if b.next(4) == 0 {
		c := down(name)
		c.Fenced, c.FenceDue = fenced, fenceDue
		return c
	}
	c := up(name)
	c.Fenced, c.FenceDue, c.LeaseRenewed = fenced, fenceDue, b.next(2) == 1
	owners := []string{uid, "old-uid"}
	switch b.next(3) {
	case 1:
		cp := copyOf(owners[b.next(2)], int64(b.next(3)))
		switch b.next(3) {
		case 1:
			cp.Admitted()
		case 2:
			cp.Condition(metav1.ConditionFalse, gantry.ReasonPlacementTimeout, "agent says")
		}
		c.Copy = cp.Obj()
	}
	if b.next(2) == 1 {
		job := remoteJob(owners[b.next(2)], int64(b.next(3)))
		switch b.next(4) {
		case 1:
			running(job)
		case 2:
			completed(job)
		case 3:
			deletingJob(job)
		}
		if b.next(3) == 0 {
			suspendedByTheAgent(job)
		}
		c.Job = job
	}
	if b.next(3) == 0 {
		c.CopyExpected = now.Add(time.Second)
	}
	if b.next(3) == 0 {
		c.JobExpected = now.Add(time.Second)
	}
	c.ForeignJob = b.next(5) == 0
	if b.next(5) == 0 {
		c.JobRefused = "refused"
	}
	if b.next(4) == 0 { // the last create did not take, for now
		c.JobCreateFailing, c.JobCreateFailedAt = "exceeded quota", now.Add(-time.Duration(b.next(3))*4*time.Second)
	}
	if b.next(4) == 0 { // the last create of the copy did not take
		c.CopyRefused, c.CopyRefusedAt, c.CopyRefusedNew = "being terminated", now.Add(-time.Duration(b.next(3))*4*time.Second), b.next(2) == 0
	}
	return c
}
