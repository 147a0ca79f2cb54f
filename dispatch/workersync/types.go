// Package workersync decides, for one hub Workload, what the hub does on the worker clusters: which
// copies to create and withdraw, when to create the Job on the winner and record that it did, what to
// mirror back to the hub Job, when the Workload has finished or been evicted, and when it may go.
//
// It does no I/O. hub/workload gathers a View of one Workload from its caches and its memory of its own
// writes, calls Decide, and carries out the Plan. The rules that keep a job from running twice live
// here, where they are table-tested and fuzzed:
//   - A Job is created only on the recorded winner, and only while no Job of the Workload is known to
//     have been created there before (the JobCreated condition, written right after the create). A Job
//     that is missing after that was deleted by someone else: the Workload finishes as RemoteJobLost.
//   - The winner is cleared (eviction) and a Workload being deleted lets go only once a live read shows
//     its Job on the winner gone; a winner that cannot be reached holds both back, and its quota stays
//     held.
//   - Objects of another Workload UID under the same name are left by an earlier Workload that is gone
//     (names are unique): they are removed wherever they are seen.
//   - Writes to one worker never wait on another: a loser that cannot be reached or refuses a
//     withdrawal does not hold back the Job on the winner.
package workersync

import (
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

// View is what the hub knows of one Workload at one moment.
type View struct {
	Now time.Time
	// Workload is the hub Workload; never nil.
	Workload *gantry.Workload
	// HubJob is the job the Workload stands for, of the Workload's kind (jobkind.Of); nil when it is gone.
	// A job of its name with another UID than the Workload's owner is not its job (HubJobOf).
	HubJob client.Object
	// Clusters holds every cluster the Workload may have objects on, by name: those it names, and the
	// connected ones whose caches hold an object under its names.
	Clusters map[string]Cluster
	// LastMirror is the last status mirror to HubJob; nil when there was none (or it was forgotten).
	LastMirror *Mirror
	// FinalizerRemoved: the executor removed the finalizer; the cache does not show it yet.
	FinalizerRemoved bool
	// AdmissionDeadline is how long the Workload may wait for a winner (its job's own, else its
	// GlobalQueue's); 0 for as long as it takes.
	AdmissionDeadline time.Duration
	// DrainedBy names the Workload's GlobalQueue when that is held and drained (spec.drainWhileHeld):
	// a Workload without a winner is finished. Empty otherwise.
	DrainedBy string
}

// Cluster is what the hub knows of one worker cluster for the Workload.
type Cluster struct {
	Name string
	// Connected: the hub holds a live connection. Copy, Job and ForeignJob are only known when it does.
	Connected bool
	// DisconnectedSince is when the hub last lost the cluster; zero when unknown or connected.
	DisconnectedSince time.Time
	// DisconnectedReason is why, as the WorkerCluster's Connected condition says (Unauthorized: the
	// worker refuses the hub's token or rights); empty when unknown or connected.
	DisconnectedReason string
	// Fenced: the operator said nothing of the cluster runs any more (WorkerCluster spec.fenced).
	Fenced bool
	// KueueLocalQueue is the LocalQueue of the worker's Kueue that the Workload's job goes through there
	// (WorkerCluster spec.kueue); empty when the worker's jobs do not go through Kueue.
	KueueLocalQueue string
	// FenceDue, under the failover policy Fence, is when the cluster's agent has surely stopped the hub's
	// Jobs there if the hub has not reached it since; zero under the policy Wait.
	FenceDue time.Time
	// LeaseRenewed: the hub renewed its lease on the current connection, so the agent stops nothing more
	// and a Job it suspended may be resumed.
	LeaseRenewed bool
	// Copy is the object with the Workload's namespace and name on the cluster, of any Workload UID.
	Copy *gantry.Workload
	// Job is Gantry's job of the Workload's kind with the hub job's namespace and name on the cluster,
	// of any Workload UID.
	Job client.Object
	// ForeignJob: a live read found a Job of that name that Gantry did not create.
	ForeignJob bool
	// JobRefused is why the cluster's API server refused, as invalid, the job Gantry created there for
	// the current epoch; empty when it did not.
	JobRefused string
	// JobCreateFailing is why the cluster's API server did not take the job Gantry created there for the
	// current epoch, the last time it tried (JobCreateFailedAt), when it was no refusal for good
	// (JobRefused): a quota, RBAC, a namespace. Empty when the last create did not fail.
	JobCreateFailing  string
	JobCreateFailedAt time.Time
	// CopyRefused is why the cluster's API server did not take the current epoch's copy the last time
	// the hub tried (CopyRefusedAt): a namespace being deleted, a quota or a policy on Workloads there.
	// CopyRefusedNew says this is the first decision that hears of it. Empty when the last create did not
	// fail.
	CopyRefused    string
	CopyRefusedAt  time.Time
	CopyRefusedNew bool
	// CopyExpected and JobExpected: the executor created the current epoch's copy (the Job) and its
	// cache does not show it yet; the zero time when it did not.
	CopyExpected time.Time
	JobExpected  time.Time
}

// Mirror is the executor's last write of a hub Job's status.
type Mirror struct {
	At time.Time
	// Replaced is the hub Job's resourceVersion the write replaced: while the cache shows that version,
	// it is behind the write.
	Replaced string
}

// Op is a write to a worker.
type Op string

// Writes to workers.
const (
	CreateCopy Op = "CreateCopy"
	CreateJob  Op = "CreateJob"
	// Delete deletes with background propagation: dependents (a Job's pods) go after the object.
	Delete Op = "Delete"
	// DeleteForeground deletes a Job's pods before the Job, so that "the Job is gone" means nothing of it
	// runs.
	DeleteForeground Op = "DeleteForeground"
	// Resume lifts the suspension the agent put on a Job when the hub's lease lapsed.
	Resume Op = "Resume"
	// Suspend suspends a job that is to be deleted pods first, which stops its pods: for a kind whose
	// controller makes the job's children anew while it is deleted (jobkind.SuspendsFirst).
	Suspend Op = "Suspend"
)

// WorkerAction is one write to one worker. Deletes name exactly the object read (UID precondition).
type WorkerAction struct {
	Op      Op
	Cluster string
	Object  client.Object
}

func (a WorkerAction) String() string {
	kind := "Copy"
	if k, ok := jobkind.ForObject(a.Object); ok {
		kind = string(k.Name())
	}
	l := a.Object.GetLabels()
	return fmt.Sprintf("%s %s %s %s/%s uid=%s epoch=%s", a.Op, a.Cluster, kind, a.Object.GetNamespace(), a.Object.GetName(),
		l[gantry.WorkloadUIDLabel], l[gantry.DispatchEpochLabel])
}

// Event is recorded on the hub Job once the writes it describes succeeded.
type Event struct {
	Type    string
	Reason  string
	Message string
}

// Plan is what to do for one Workload. The executor writes to workers first, each cluster's writes in
// order, a failed one stopping that cluster's later ones;
// then, in order and each only if the one before succeeded: the live check of ConfirmGone, the hub
// Job's status, the Workload's status, the finalizer; then the Events.
type Plan struct {
	Worker []WorkerAction
	// ConfirmGone names the cluster where a live read must show no Job of the Workload before Status or
	// RemoveFinalizer is written: a cache can trail a Job that still runs.
	ConfirmGone string
	// HubJobStatus, when set, is the hub job with the status it is to have: its status is written.
	HubJobStatus client.Object
	// Status, when set, becomes the Workload's status (written against the resourceVersion read).
	Status *gantry.WorkloadStatus
	// RemoveFinalizer lets the Workload go.
	RemoveFinalizer bool
	Events          []Event
	// RequeueAfter asks for another look that no watch event would bring; 0 for none.
	RequeueAfter time.Duration
}

// requeue asks for another look after d at the latest.
func (p *Plan) requeue(d time.Duration) {
	if d > 0 && (p.RequeueAfter == 0 || d < p.RequeueAfter) {
		p.RequeueAfter = d
	}
}

// Timing of looks that no watch event brings.
const (
	// CacheCatchUp is how long to wait for the cache to show a write of the hub's own.
	CacheCatchUp = 100 * time.Millisecond
	// DeletionPoll is how often a Job being deleted on a worker is looked at; its deletion event
	// usually comes first.
	DeletionPoll = time.Second
	// LeasePoll is how often a Job the agent suspended is looked at until the hub's lease on its cluster
	// is renewed and it can be resumed.
	LeasePoll = time.Second
	// MirrorInterval is the least time between two status mirrors of a running Job: a Job whose pods
	// start together would otherwise cost the hub a write per pod. A finished Job is mirrored at once.
	MirrorInterval = time.Second
	// MirrorProgressInterval is the least time between two mirrors of a started job whose progress
	// (jobkind.Kind.Progress: completions, failures, conditions) changed, and MirrorRestInterval that
	// of mirrors of the rest alone (pods active, ready, terminating, not yet counted). Its start and
	// its end are what users wait for; each mirror is a write of the whole status and a watch event of
	// the whole job on the hub, and the rest changes with every pod.
	MirrorProgressInterval = 10 * time.Second
	MirrorRestInterval     = time.Minute
	// JobCreateRetry is how often a winner that does not take the job yet is asked again, and
	// JobCreateGrace how long it may go on not taking it before the Workload is taken back and
	// dispatched elsewhere: room for a quota or a right to come back, bounded so that a job is not held
	// admitted where it cannot run.
	JobCreateRetry = 5 * time.Second
	JobCreateGrace = 2 * time.Minute
)
