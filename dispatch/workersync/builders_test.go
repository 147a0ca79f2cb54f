package workersync

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const uid = "wl-uid"

// workload starts the hub Workload job-train in ns, of UID uid, owned by Job train, as the hub's job
// controller makes it; the conditions set on it changed an hour ago.
func workload() *hubtest.WorkloadWrapper {
	return hubtest.MakeWorkload("job-train", "ns").UID(uid).Generation(1).Finalizer(gantry.WorkloadFinalizer).
		OwnedByJob("train", "job-uid").Queue("q").PodSet("main", 1).Now(now.Add(-time.Hour))
}

// failingCreate says the cluster's last create of the Job failed at the given time, for now.
func failingCreate(c Cluster, at time.Time) Cluster {
	c.JobCreateFailing, c.JobCreateFailedAt = `jobs "train" is forbidden: exceeded quota: gpus`, at
	return c
}

// copyOf starts the Workload's copy on a worker in the given epoch, of the Workload UID u.
func copyOf(u string, epoch int64) *hubtest.CopyWrapper {
	return hubtest.MakeCopy("job-train", "ns", u, epoch).UID(fmt.Sprintf("copy-%s-%d", u, epoch))
}

// remoteJob is Gantry's Job on a worker for the Workload UID u.
func remoteJob(u string, epoch int64) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns",
		UID: types.UID(fmt.Sprintf("job-%s-%d", u, epoch)), Labels: labels(u, epoch)}}
}

func completed(j *batchv1.Job) *batchv1.Job {
	j.Status = batchv1.JobStatus{Succeeded: 1, StartTime: ptr.To(metav1.NewTime(now.Add(-time.Minute))),
		CompletionTime: ptr.To(metav1.NewTime(now)),
		Conditions:     []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	return j
}

func running(j *batchv1.Job) *batchv1.Job {
	j.Status = batchv1.JobStatus{Active: 1, StartTime: ptr.To(metav1.NewTime(now.Add(-time.Minute)))}
	return j
}

func suspendedByTheAgent(j *batchv1.Job) *batchv1.Job {
	j.Spec.Suspend = ptr.To(true)
	j.Annotations = map[string]string{gantry.SuspendedByAnnotation: gantry.SuspendedByFence}
	return j
}

func deletingJob(j *batchv1.Job) *batchv1.Job {
	j.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	return j
}

func labels(u string, epoch int64) map[string]string {
	return map[string]string{gantry.WorkloadUIDLabel: u, gantry.DispatchEpochLabel: strconv.FormatInt(epoch, 10)}
}

func hubJob() *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: "job-uid", ResourceVersion: "10"},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(gantry.JobManagedBy), Suspend: ptr.To(true)}}
}

// atGeneration sets the job's metadata.generation.
func atGeneration(g int64, j *batchv1.Job) *batchv1.Job {
	j.Generation = g
	return j
}

// resubmitted makes j another job under the same name: deleted and submitted again, with a new UID.
func resubmitted(j *batchv1.Job) *batchv1.Job {
	j.UID = "job-uid-2"
	return j
}

// up and down are a connected and a disconnected cluster.
func up(name string) Cluster { return Cluster{Name: name, Connected: true} }

func down(name string) Cluster {
	return Cluster{Name: name, DisconnectedSince: now.Add(-10 * time.Minute)}
}

// unauthorized says the cluster is down because it refuses the hub's token or rights.
func unauthorized(c Cluster) Cluster {
	c.DisconnectedReason = gantry.ReasonUnauthorized
	return c
}

// underFence sets the policy Fence, due at the given offset from now.
func (c Cluster) underFence(due time.Duration, renewed bool) Cluster {
	c.FenceDue, c.LeaseRenewed = now.Add(due), renewed
	return c
}

func (c Cluster) with(cp *hubtest.CopyWrapper, job *batchv1.Job) Cluster {
	c.Copy, c.Job = nil, nil
	if cp != nil {
		c.Copy = cp.Obj()
	}
	if job != nil { // no typed nil in the interface
		c.Job = job
	}
	return c
}

func view(wl *gantry.Workload, job *batchv1.Job, clusters ...Cluster) View {
	v := View{Now: now, Workload: wl, Clusters: map[string]Cluster{}}
	if job != nil {
		v.HubJob = job
	}
	for _, c := range clusters {
		v.Clusters[c.Name] = c
	}
	return v
}

// outcome is a Plan as a test reads it.
type outcome struct {
	Worker          []string
	ConfirmGone     string
	HubJob          string   // "", "cleared", "mirrored" or "Failed/<reason>"
	Changed         []string // conditions whose status or reason the plan changes: "Type=Status/Reason"
	Winner          string   // the winner the plan leaves, when it changes it ("-" for taken back)
	Evictions       int      // evictions the plan adds
	RemoveFinalizer bool
	Events          []string // "Type Reason"
	Requeue         time.Duration
}

func summarize(v View, p Plan) outcome {
	o := outcome{ConfirmGone: p.ConfirmGone, RemoveFinalizer: p.RemoveFinalizer, Requeue: p.RequeueAfter}
	for _, a := range p.Worker {
		o.Worker = append(o.Worker, a.String())
	}
	var st *batchv1.JobStatus
	if p.HubJobStatus != nil {
		st = &p.HubJobStatus.(*batchv1.Job).Status
	}
	switch {
	case st == nil:
	case len(st.Conditions) == 0 && st.StartTime == nil:
		o.HubJob = "cleared"
	case apimetaJobFailed(st):
		o.HubJob = "Failed/" + st.Conditions[len(st.Conditions)-1].Reason
	default:
		o.HubJob = "mirrored"
	}
	if p.Status != nil {
		old := v.Workload.Status
		for _, c := range p.Status.Conditions {
			prev := apimeta.FindStatusCondition(old.Conditions, c.Type)
			if prev == nil || prev.Status != c.Status || prev.Reason != c.Reason {
				o.Changed = append(o.Changed, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
			}
		}
		sort.Strings(o.Changed)
		if p.Status.Winner() != old.Winner() {
			o.Winner = p.Status.Winner()
			if o.Winner == "" {
				o.Winner = "-"
			}
		}
		o.Evictions = len(p.Status.Evictions) - len(old.Evictions)
	}
	for _, e := range p.Events {
		o.Events = append(o.Events, e.Type+" "+e.Reason)
	}
	return o
}

func apimetaJobFailed(st *batchv1.JobStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
