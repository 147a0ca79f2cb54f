package workersync

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func TestDecide(t *testing.T) {
	const other = "old-uid"
	cases := map[string]struct {
		view View
		want outcome
	}{
		// Pending: copies follow the nomination.
		"nominated: a copy on each nominated cluster": {
			view: view(workload().Nominated("", 2, "w1", "w2").Obj(), hubJob(), up("w1"), up("w2"), up("w3")),
			want: outcome{Worker: []string{
				"CreateCopy w1 Copy ns/job-train uid=wl-uid epoch=2",
				"CreateCopy w2 Copy ns/job-train uid=wl-uid epoch=2",
			}},
		},
		"nominated: a copy of an earlier epoch is fenced before the new one": {
			view: view(workload().Nominated("", 2, "w1").Obj(), hubJob(), up("w1").with(copyOf(uid, 1), nil)),
			want: outcome{Worker: []string{"Delete w1 Copy ns/job-train uid=wl-uid epoch=1"},
				Events: []string{"Normal Withdrawn"}},
		},
		"nominated: a created copy the cache does not show yet is not created again": {
			view: func() View {
				c := up("w1")
				c.CopyExpected = now.Add(3 * time.Second)
				return view(workload().Nominated("", 2, "w1").Obj(), hubJob(), c)
			}(),
			want: outcome{Requeue: 3 * time.Second},
		},
		"nominated: a copy the cluster does not take is said once, and asked again after JobCreateRetry": {
			view: func() View {
				c := up("w1")
				c.CopyRefused, c.CopyRefusedAt, c.CopyRefusedNew = `namespace ns is being terminated`, now.Add(-time.Second), true
				return view(workload().Nominated("", 2, "w1").Obj(), hubJob(), c)
			}(),
			want: outcome{Requeue: JobCreateRetry - time.Second, Events: []string{"Warning CopyNotCreated"}},
		},
		"nominated: a copy the cluster did not take is asked for again, quietly": {
			view: func() View {
				c := up("w1")
				c.CopyRefused, c.CopyRefusedAt = `namespace ns is being terminated`, now.Add(-JobCreateRetry)
				return view(workload().Nominated("", 2, "w1").Obj(), hubJob(), c)
			}(),
			want: outcome{Worker: []string{"CreateCopy w1 Copy ns/job-train uid=wl-uid epoch=2"}},
		},
		"nominated: a copy on a cluster no longer nominated is withdrawn": {
			view: view(workload().Nominated("", 2, "w1").Obj(), hubJob(), up("w1").with(copyOf(uid, 2), nil), up("w3").with(copyOf(uid, 2), nil)),
			want: outcome{Worker: []string{"Delete w3 Copy ns/job-train uid=wl-uid epoch=2"}, Events: []string{"Normal Withdrawn"}},
		},
		"nominated: a disconnected nominated cluster gets nothing": {
			view: view(workload().Nominated("", 2, "w1").Obj(), hubJob(), down("w1")),
			want: outcome{},
		},
		"pending: a Job without a winner is removed, pods first": {
			view: view(workload().Nominated("", 2, "w1").Obj(), hubJob(), up("w1").with(copyOf(uid, 2), remoteJob(uid, 1))),
			want: outcome{Worker: []string{"DeleteForeground w1 Job ns/train uid=wl-uid epoch=1"}},
		},
		"leftovers of an earlier Workload of the same name are removed before the copy is created": {
			view: view(workload().Nominated("", 1, "w1").Obj(), hubJob(), up("w1").with(copyOf(other, 4), running(remoteJob(other, 4)))),
			want: outcome{Worker: []string{
				"Delete w1 Copy ns/job-train uid=old-uid epoch=4",
				"Delete w1 Job ns/train uid=old-uid epoch=4",
			}},
		},

		// Winner: the Job is created once, recorded, mirrored, finished.
		"winner: the Job is created and the losers withdrawn": {
			view: view(workload().Nominated("", 2, "w1", "w2").AdmittedOn("w1").Obj(), hubJob(),
				up("w1").with(copyOf(uid, 2).Admitted(), nil), up("w2").with(copyOf(uid, 2), nil)),
			want: outcome{Worker: []string{
				"Delete w2 Copy ns/job-train uid=wl-uid epoch=2",
				"CreateJob w1 Job ns/train uid=wl-uid epoch=2",
			}},
		},
		"winner: a loser that cannot be reached does not hold back the Job": {
			view: view(workload().Nominated("", 2, "w1", "w2").AdmittedOn("w1").Obj(), hubJob(), up("w1"), down("w2")),
			want: outcome{Worker: []string{"CreateJob w1 Job ns/train uid=wl-uid epoch=2"}},
		},
		"winner that does not take the Job: the Workload says why at once, and the job is asked again later": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").Obj(), hubJob(), failingCreate(up("w1"), now)),
			want: outcome{Changed: []string{"JobCreated=False/" + gantry.ReasonWorkerRefusing}, Events: []string{"Warning " + EventNotCreated},
				Requeue: JobCreateRetry},
		},
		"winner still not taking the Job, its last refusal a while ago: asked again, no second Event": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").Refusing("w1 does not take the Job", now.Add(-time.Minute)).Obj(), hubJob(),
				failingCreate(up("w1"), now.Add(-JobCreateRetry))),
			want: outcome{Worker: []string{"CreateJob w1 Job ns/train uid=wl-uid epoch=2"}},
		},
		"winner that has not taken the Job for the grace: taken back after a live check, and dispatched again": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").Refusing("w1 does not take the Job", now.Add(-JobCreateGrace)).Obj(), hubJob(),
				failingCreate(up("w1"), now.Add(-time.Second))),
			want: outcome{ConfirmGone: "w1", Winner: "-", Evictions: 1, Events: []string{"Warning Evicted"},
				Changed: []string{"JobCreated=False/Evicted"}},
		},
		"winner, and the job changed since it was admitted: nothing is built from it, it is taken back": {
			view: view(workload().JobGeneration(3).Nominated("", 2, "w1").AdmittedOn("w1").Obj(), atGeneration(4, hubJob()),
				up("w1").with(copyOf(uid, 2).Admitted(), nil)),
			want: outcome{ConfirmGone: "w1", Winner: "-", Evictions: 1, Events: []string{"Warning Evicted"},
				Changed: []string{"JobCreated=False/Evicted"}},
		},
		"winner, and the job is at the generation admitted: the Job is created": {
			view: view(workload().JobGeneration(3).Nominated("", 2, "w1").AdmittedOn("w1").Obj(), atGeneration(3, hubJob()), up("w1")),
			want: outcome{Worker: []string{"CreateJob w1 Job ns/train uid=wl-uid epoch=2"}},
		},
		"winner, a Workload that does not know its job's generation: the Job is created": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").Obj(), atGeneration(4, hubJob()), up("w1")),
			want: outcome{Worker: []string{"CreateJob w1 Job ns/train uid=wl-uid epoch=2"}},
		},
		"winner, the job changed after its Job was created: it runs as admitted, nothing is taken back": {
			view: view(workload().JobGeneration(3).Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), atGeneration(4, hubJob()),
				up("w1").with(copyOf(uid, 2), running(remoteJob(uid, 2)))),
			want: outcome{HubJob: "mirrored"},
		},
		"winner: a created Job is recorded before the cache shows it": {
			view: func() View {
				c := up("w1")
				c.JobExpected = now.Add(10 * time.Second)
				return view(workload().Nominated("", 2, "w1").AdmittedOn("w1").Obj(), hubJob(), c)
			}(),
			want: outcome{Changed: []string{"JobCreated=True/Created"}},
		},
		"winner: a recorded Job the cache does not show yet is waited for": {
			view: func() View {
				c := up("w1")
				c.JobExpected = now.Add(10 * time.Second)
				return view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), hubJob(), c)
			}(),
			want: outcome{Requeue: 10 * time.Second},
		},
		"winner: a Job created by an earlier hub is recorded and mirrored": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").Obj(), hubJob(), up("w1").with(nil, running(remoteJob(uid, 2)))),
			want: outcome{Changed: []string{"JobCreated=True/Created"}, HubJob: "mirrored"},
		},
		"winner: a recorded Job that is gone is not created again": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), hubJob(), up("w1")),
			want: outcome{ConfirmGone: "w1", HubJob: "Failed/" + gantry.ReasonRemoteJobLost,
				Changed: []string{"Finished=True/RemoteJobLost"}, Events: []string{"Warning Finished"}},
		},
		"winner: a Job of that name that Gantry did not create is never run over": {
			view: func() View {
				c := up("w1")
				c.ForeignJob = true
				return view(workload().Nominated("", 2, "w1").AdmittedOn("w1").Obj(), hubJob(), c)
			}(),
			want: outcome{HubJob: "Failed/" + gantry.ReasonRemoteJobConflict,
				Changed: []string{"Finished=True/RemoteJobConflict"}, Events: []string{"Warning Finished"}},
		},
		"winner: a Job the winner refused is taken back and dispatched again": {
			view: func() View {
				c := up("w1").with(copyOf(uid, 2).Admitted(), nil)
				c.JobRefused = `admission webhook denied the request: spec.runtimeRef: "torch" not found`
				return view(workload().Nominated("", 2, "w1").AdmittedOn("w1").Obj(), hubJob(), c)
			}(),
			want: outcome{Winner: "-", Evictions: 1, ConfirmGone: "w1",
				Changed: []string{"JobCreated=False/Evicted"},
				Events:  []string{"Warning Evicted"}},
		},
		"winner: a completed Job is mirrored and the Workload finished": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), hubJob(), up("w1").with(nil, completed(remoteJob(uid, 2)))),
			want: outcome{HubJob: "mirrored", Changed: []string{"Finished=True/Succeeded"}},
		},
		"winner: a running Job is mirrored at most once per interval": {
			view: func() View {
				v := view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), hubJob(), up("w1").with(nil, running(remoteJob(uid, 2))))
				v.LastMirror = &Mirror{At: now.Add(-300 * time.Millisecond), Replaced: "9"}
				return v
			}(),
			want: outcome{Requeue: 700 * time.Millisecond},
		},
		"winner: a started Job's progress waits for its interval": {
			view: mirrorOfStarted(func(s *batchv1.JobStatus) { s.Succeeded = 1 }, 3*time.Second),
			want: outcome{Requeue: MirrorProgressInterval - 3*time.Second},
		},
		"winner: a started Job's progress is mirrored once its interval passed": {
			view: mirrorOfStarted(func(s *batchv1.JobStatus) { s.Succeeded = 1 }, MirrorProgressInterval),
			want: outcome{HubJob: "mirrored"},
		},
		"winner: pods that come and go alone wait for the longest interval": {
			view: mirrorOfStarted(func(s *batchv1.JobStatus) {
				s.Ready = ptr.To[int32](1)
				s.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"pod"}}
			}, MirrorProgressInterval),
			want: outcome{Requeue: MirrorRestInterval - MirrorProgressInterval},
		},
		"winner: a Job whose end was decided waits for its end": {
			view: mirrorOfStarted(endingSince(now.Add(-3*time.Second)), time.Minute),
			want: outcome{Requeue: MirrorProgressInterval - 3*time.Second},
		},
		"winner: a Job whose end was decided is mirrored when its end is slow to come": {
			view: mirrorOfStarted(endingSince(now.Add(-MirrorProgressInterval)), time.Minute),
			want: outcome{HubJob: "mirrored"},
		},
		"winner: a Job whose end was decided before its start was mirrored is mirrored at once": {
			view: func() View {
				v := mirrorOfStarted(endingSince(now.Add(-time.Second)), time.Minute)
				v.HubJob.(*batchv1.Job).Status = batchv1.JobStatus{} // the hub does not show the start yet
				return v
			}(),
			want: outcome{HubJob: "mirrored"},
		},
		"winner: a Job whose end was decided is mirrored with its end": {
			view: mirrorOfStarted(func(s *batchv1.JobStatus) {
				endingSince(now.Add(-time.Second))(s)
				s.Conditions = append(s.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})
			}, time.Minute),
			want: outcome{HubJob: "mirrored", Changed: []string{"Finished=True/Succeeded"}},
		},
		"winner: no mirror over a cache that does not show the last one": {
			view: func() View {
				v := view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), hubJob(), up("w1").with(nil, completed(remoteJob(uid, 2))))
				v.LastMirror = &Mirror{At: now.Add(-time.Minute), Replaced: "10"}
				return v
			}(),
			want: outcome{Requeue: CacheCatchUp},
		},
		"winner: unreachable, it keeps its quota and says so": {
			view: view(workload().Nominated("", 2, "w1", "w2").AdmittedOn("w1").JobCreated().Obj(), hubJob(), down("w1"), up("w2").with(copyOf(uid, 2), nil)),
			want: outcome{Worker: []string{"Delete w2 Copy ns/job-train uid=wl-uid epoch=2"},
				Changed: []string{"ClusterReachable=False/Unreachable"}, Events: []string{"Warning ClusterUnreachable"}},
		},
		"winner: refuses the hub's token or rights, held as unreachable": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), hubJob(), unauthorized(down("w1"))),
			want: outcome{Changed: []string{"ClusterReachable=False/Unreachable"}, Events: []string{"Warning ClusterUnreachable"}},
		},
		"winner: reachable again": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Condition(gantry.WorkloadClusterReachable, metav1.ConditionFalse, gantry.ReasonClusterUnreachable, "set by the test").Obj(),
				hubJob(), up("w1").with(nil, remoteJob(uid, 2))),
			want: outcome{Changed: []string{"ClusterReachable=True/Reachable"}},
		},
		"winner gave it up: its Job is deleted, pods first": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), hubJob(),
				up("w1").with(copyOf(uid, 2).Condition(metav1.ConditionFalse, gantry.ReasonPlacementTimeout, "agent says"), remoteJob(uid, 2))),
			want: outcome{Worker: []string{"DeleteForeground w1 Job ns/train uid=wl-uid epoch=2"}, Requeue: DeletionPoll},
		},
		"winner gave it up: a Job being deleted is waited for": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), hubJob(),
				up("w1").with(copyOf(uid, 2).Condition(metav1.ConditionFalse, gantry.ReasonPlacementTimeout, "agent says"), deletingJob(remoteJob(uid, 2)))),
			want: outcome{Requeue: DeletionPoll},
		},
		"winner gave it up: once its Job is gone, the eviction is recorded": {
			view: func() View {
				job := hubJob()
				job.Status = running(remoteJob(uid, 2)).Status
				return view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), job,
					up("w1").with(copyOf(uid, 2).Condition(metav1.ConditionFalse, gantry.ReasonPlacementTimeout, "agent says"), nil))
			}(),
			want: outcome{ConfirmGone: "w1", HubJob: "cleared", Winner: "-", Evictions: 1,
				Changed: []string{"JobCreated=False/Evicted"},
				Events:  []string{"Warning Evicted"}},
		},
		"winner preempted: its Job is deleted, pods first": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Preempted("w1", 2, "ns/urgent", gantry.ReasonInQueuePriority).Obj(), hubJob(),
				up("w1").with(copyOf(uid, 2).Admitted(), running(remoteJob(uid, 2)))),
			want: outcome{Worker: []string{"DeleteForeground w1 Job ns/train uid=wl-uid epoch=2"}, Requeue: DeletionPoll},
		},
		"winner preempted: a Job created but not in the cache yet is waited for": {
			view: func() View {
				c := up("w1").with(copyOf(uid, 2).Admitted(), nil)
				c.JobExpected = now.Add(time.Second)
				return view(workload().Nominated("", 2, "w1").AdmittedOn("w1").Preempted("w1", 2, "ns/urgent", gantry.ReasonInQueuePriority).Obj(), hubJob(), c)
			}(),
			want: outcome{Requeue: time.Second},
		},
		"winner preempted: once its Job is gone, its copy goes and it is queued again behind a live check": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Preempted("w1", 2, "ns/urgent", gantry.ReasonInQueuePriority).Obj(), hubJob(),
				up("w1").with(copyOf(uid, 2).Admitted(), nil)),
			want: outcome{Worker: []string{"Delete w1 Copy ns/job-train uid=wl-uid epoch=2"}, ConfirmGone: "w1", Winner: "-", Evictions: 1,
				Changed: []string{"JobCreated=False/Evicted"},
				Events:  []string{"Warning Evicted"}},
		},
		"winner preempted but unreachable: it keeps its quota until its Job can be removed": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Preempted("w1", 2, "ns/urgent", gantry.ReasonInQueuePriority).Obj(), hubJob(), down("w1")),
			want: outcome{Changed: []string{"ClusterReachable=False/Unreachable"}, Events: []string{"Warning ClusterUnreachable"}},
		},
		"a preemption recorded for an earlier epoch is void": {
			view: view(workload().Nominated("", 3, "w1").AdmittedOn("w1").JobCreated().Preempted("w1", 2, "ns/urgent", gantry.ReasonInQueuePriority).Obj(), hubJob(),
				up("w1").with(copyOf(uid, 3).Admitted(), running(remoteJob(uid, 3)))),
			want: outcome{HubJob: "mirrored"},
		},
		"winner fenced: dispatched again at once, recorded as WorkerLost": {
			view: func() View {
				c := down("w1")
				c.Fenced = true
				return view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), hubJob(), c)
			}(),
			want: outcome{Winner: "-", Evictions: 1,
				Changed: []string{"JobCreated=False/Evicted"},
				Events:  []string{"Warning Evicted"}},
		},
		"back after a fence: what is left of an older epoch goes, pods first": {
			view: view(workload().Nominated("", 3, "w2").Obj(), hubJob(), up("w1").with(copyOf(uid, 2), running(remoteJob(uid, 2))), up("w2")),
			want: outcome{Worker: []string{
				"DeleteForeground w1 Job ns/train uid=wl-uid epoch=2",
				"Delete w1 Copy ns/job-train uid=wl-uid epoch=2",
				"CreateCopy w2 Copy ns/job-train uid=wl-uid epoch=3",
			}, Events: []string{"Normal Withdrawn"}},
		},
		"winner unreachable under Fence: waits for the fence to be due": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), hubJob(), down("w1").underFence(2*time.Minute, false)),
			want: outcome{Changed: []string{"ClusterReachable=False/Unreachable"}, Events: []string{"Warning ClusterUnreachable"},
				Requeue: 2 * time.Minute},
		},
		"winner unreachable under Fence past the timeout and margin: dispatched again as WorkerLost": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), hubJob(), down("w1").underFence(-time.Second, false)),
			want: outcome{Winner: "-", Evictions: 1,
				Changed: []string{"JobCreated=False/Evicted"},
				Events:  []string{"Warning Evicted"}},
		},
		"winner back before the fence: the Job the agent suspended is resumed in place": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), hubJob(),
				up("w1").underFence(time.Minute, true).with(nil, suspendedByTheAgent(remoteJob(uid, 2)))),
			want: outcome{Worker: []string{"Resume w1 Job ns/train uid=wl-uid epoch=2"}},
		},
		"winner back, lease not renewed yet: no resume, the agent would stop it again": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), hubJob(),
				up("w1").underFence(time.Minute, false).with(nil, suspendedByTheAgent(remoteJob(uid, 2)))),
			want: outcome{Requeue: LeasePoll},
		},
		"finished: the losers are withdrawn, the winner keeps its objects": {
			view: view(workload().Nominated("", 2, "w1", "w2").AdmittedOn("w1").JobCreated().Finished(gantry.ReasonJobSucceeded).Obj(), hubJob(),
				up("w1").with(copyOf(uid, 2), completed(remoteJob(uid, 2))), up("w2").with(copyOf(uid, 2), nil)),
			want: outcome{Worker: []string{"Delete w2 Copy ns/job-train uid=wl-uid epoch=2"}},
		},

		// Deletion: let go only once nothing of it can run.
		"deleting without a winner: withdrawn and let go": {
			view: view(workload().Nominated("", 2, "w1", "w2").Deleting().Obj(), nil, up("w1").with(copyOf(uid, 2), nil), down("w2")),
			want: outcome{Worker: []string{"Delete w1 Copy ns/job-train uid=wl-uid epoch=2"}, RemoveFinalizer: true},
		},
		"deleting with a running Job: the Job goes first, pods first": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Deleting().Obj(), nil,
				up("w1").with(copyOf(uid, 2), running(remoteJob(uid, 2)))),
			want: outcome{Worker: []string{
				"Delete w1 Copy ns/job-train uid=wl-uid epoch=2",
				"DeleteForeground w1 Job ns/train uid=wl-uid epoch=2",
			}, Requeue: DeletionPoll},
		},
		"deleting after the Job ended: it goes in the background, its controller makes nothing anew": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Finished(gantry.ReasonJobSucceeded).Deleting().Obj(), nil,
				up("w1").with(copyOf(uid, 2), completed(remoteJob(uid, 2)))),
			want: outcome{Worker: []string{
				"Delete w1 Copy ns/job-train uid=wl-uid epoch=2",
				"Delete w1 Job ns/train uid=wl-uid epoch=2",
			}, RemoveFinalizer: true},
		},
		"deleting once the winner's Job is gone: let go after a live check": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Deleting().Obj(), nil, up("w1")),
			want: outcome{ConfirmGone: "w1", RemoveFinalizer: true},
		},
		"deleting by hand while the hub job stands: the job is marked RanBefore as the Workload goes": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Deleting().Obj(), hubJob(), up("w1")),
			want: outcome{ConfirmGone: "w1", HubJob: "Failed/" + gantry.ReasonRanBefore, RemoveFinalizer: true},
		},
		"deleting after its job was deleted and submitted again under the name: the new job is not marked": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Deleting().Obj(), resubmitted(hubJob()), up("w1")),
			want: outcome{ConfirmGone: "w1", RemoveFinalizer: true},
		},
		"the winner's Job lost while a new job of the name waits: the new job is not marked": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), resubmitted(hubJob()), up("w1")),
			want: outcome{ConfirmGone: "w1", Changed: []string{"Finished=True/" + gantry.ReasonRemoteJobLost},
				Events: []string{"Warning Finished"}},
		},
		"a winner and no Job yet, and the job under the name is another one: its Job is not built from it": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").Obj(), resubmitted(hubJob()), up("w1")),
			want: outcome{},
		},
		"a running Job, and the job under the name is another one: nothing is mirrored to it": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), resubmitted(hubJob()),
				up("w1").with(copyOf(uid, 2), running(remoteJob(uid, 2)))),
			want: outcome{},
		},
		"deleting by hand while the hub job stands, the winner fenced: the job is marked RanBefore": {
			view: func() View {
				c := down("w1")
				c.Fenced = true
				return view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Deleting().Obj(), hubJob(), c)
			}(),
			want: outcome{HubJob: "Failed/" + gantry.ReasonRanBefore, RemoveFinalizer: true},
		},
		"deleting with its hub job, which is being deleted too: nothing to mark": {
			view: func() View {
				j := hubJob()
				j.DeletionTimestamp, j.Finalizers = &metav1.Time{Time: now}, []string{"x"}
				return view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Deleting().Obj(), j, up("w1"))
			}(),
			want: outcome{ConfirmGone: "w1", RemoveFinalizer: true},
		},
		"deleting by hand a Workload whose hub job completed: it keeps its status": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Deleting().Obj(), completed(hubJob()), up("w1")),
			want: outcome{ConfirmGone: "w1", RemoveFinalizer: true},
		},
		"deleting by hand before any winner: the job may run, nothing to mark": {
			view: view(workload().Nominated("", 2, "w1").Deleting().Obj(), hubJob(), up("w1")),
			want: outcome{RemoveFinalizer: true},
		},
		"deleting with the winner unreachable: held, with its quota": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Deleting().Obj(), nil, down("w1")),
			want: outcome{Changed: []string{"ClusterReachable=False/Unreachable", "Deleting=True/WaitingForWorker"},
				Events: []string{"Warning ClusterUnreachable"}},
		},
		"deleting with the winner fenced: let go": {
			view: func() View {
				c := down("w1")
				c.Fenced = true
				return view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Deleting().Obj(), nil, c)
			}(),
			want: outcome{RemoveFinalizer: true},
		},
		"deleting with the winner lost past its fence: let go": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Deleting().Obj(), nil, down("w1").underFence(-time.Second, false)),
			want: outcome{RemoveFinalizer: true},
		},
		"deleting a finished Workload: nothing runs, let go": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Finished(gantry.ReasonJobSucceeded).Deleting().Obj(), nil, down("w1")),
			want: outcome{RemoveFinalizer: true},
		},
		"deleting, finalizer already removed: nothing more": {
			view: func() View {
				v := view(workload().Nominated("", 2, "w1").Deleting().Obj(), nil, up("w1"))
				v.FinalizerRemoved = true
				return v
			}(),
			want: outcome{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.view.Workload.DeepCopy()
			got := summarize(tc.view, Decide(tc.view))
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.view.Workload); diff != "" {
				t.Errorf("Decide modified the Workload:\n%s", diff)
			}
		})
	}
}

// The ClusterReachable message says why the winner is not connected when the WorkerCluster says more
// than unreachable.
func TestDecideSaysWhyTheWinnerIsUnreachable(t *testing.T) {
	cases := map[string]struct {
		winner Cluster
		want   string
	}{
		"unreachable": {winner: down("w1"), want: "w1 is unreachable since 2026-12-01T11:50:00Z; its Job may still run there"},
		"unauthorized": {winner: unauthorized(down("w1")),
			want: "w1 is unreachable (Unauthorized) since 2026-12-01T11:50:00Z; its Job may still run there"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan := Decide(view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), hubJob(), tc.winner))
			if plan.Status == nil {
				t.Fatal("no status written")
			}
			c := apimeta.FindStatusCondition(plan.Status.Conditions, gantry.WorkloadClusterReachable)
			if c == nil || !strings.HasPrefix(c.Message, tc.want) {
				t.Errorf("ClusterReachable %+v, want a message starting %q", c, tc.want)
			}
		})
	}
}

func TestDecideWaitsForLeftoversBeforeCreating(t *testing.T) {
	v := view(workload().Nominated("", 2, "w1").AdmittedOn("w1").Obj(), hubJob(), up("w1").with(nil, remoteJob("old-uid", 7)))
	got := summarize(v, Decide(v))
	want := outcome{Worker: []string{"Delete w1 Job ns/train uid=old-uid epoch=7"}}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// A preempted workload's eviction says why and for whom, and its preemption record is void with its winner
// (the dispatcher clears both).
func TestPreemptionIsRecordedAsAnEviction(t *testing.T) {
	p := Decide(view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Preempted("w1", 2, "ns/urgent", gantry.ReasonInQueuePriority).Obj(), hubJob(),
		up("w1").with(copyOf(uid, 2).Admitted(), nil)))
	if p.Status == nil || p.Status.CurrentPreemption() != nil || p.Status.Winner() != "" || len(p.Status.Evictions) != 1 {
		t.Fatalf("status = %+v", p.Status)
	}
	if e := p.Status.Evictions[0]; e.Reason != gantry.ReasonPreempted || e.Cluster != "w1" || !strings.Contains(e.Message, "ns/urgent") {
		t.Errorf("eviction = %+v", e)
	}
	if len(p.Events) != 1 || !strings.Contains(p.Events[0].Message, "Preempted on w1 for ns/urgent") {
		t.Errorf("events = %+v", p.Events)
	}
}

// endingSince edits a running Job's status into one whose success was decided at since.
func endingSince(since time.Time) func(*batchv1.JobStatus) {
	return func(s *batchv1.JobStatus) {
		s.Active, s.Succeeded = 0, 1
		s.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(since)}}
	}
}

// mirrorOfStarted is the view of a running Job whose start the hub job shows, mirrored ago, whose
// worker status then changed by edit.
func mirrorOfStarted(edit func(*batchv1.JobStatus), ago time.Duration) View {
	started := hubJob()
	started.Status = running(remoteJob(uid, 2)).Status
	worker := running(remoteJob(uid, 2))
	edit(&worker.Status)
	v := view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Obj(), started, up("w1").with(nil, worker))
	v.LastMirror = &Mirror{At: now.Add(-ago), Replaced: "9"}
	return v
}

// A running TrainJob is suspended before it is deleted pods first, in the same plan: the trainer makes
// its JobSet anew while it goes, and only a suspended TrainJob's JobSet starts no pods. One that ended goes in the
// background, as any job.
func TestARunningTrainJobIsSuspendedBeforeItGoes(t *testing.T) {
	trainJob := func(suspended, complete bool) *trainer.TrainJob {
		tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: "tj-uid", Labels: labels(uid, 2)},
			Spec: trainer.TrainJobSpec{Suspend: ptr.To(suspended)}}
		if complete {
			tj.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue}}
		}
		return tj
	}
	hubTrainJob := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: "job-uid"},
		Spec: trainer.TrainJobSpec{Suspend: ptr.To(true)}}
	on := func(tj *trainer.TrainJob) Cluster {
		c := up("w1")
		c.Job = tj
		return c
	}
	const suspend, deleteForeground = "Suspend w1 TrainJob ns/train uid=wl-uid epoch=2", "DeleteForeground w1 TrainJob ns/train uid=wl-uid epoch=2"
	deleting := workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Deleting()
	preempted := workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Preempted("w1", 2, "ns/urgent", gantry.ReasonInQueuePriority)
	cases := map[string]struct {
		wl     *gantry.Workload
		hubJob client.Object
		remote *trainer.TrainJob
		want   []string
	}{
		"deleted while it runs: suspended, then deleted pods first": {deleting.Obj(), nil, trainJob(false, false),
			[]string{suspend, deleteForeground}},
		"deleted, once suspended: deleted pods first": {deleting.Obj(), nil, trainJob(true, false), []string{deleteForeground}},
		"deleted after it ended: deleted in the background": {workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Finished(gantry.ReasonJobSucceeded).Deleting().Obj(),
			nil, trainJob(false, true), []string{"Delete w1 TrainJob ns/train uid=wl-uid epoch=2"}},
		"preempted while it runs: suspended, then deleted pods first": {preempted.Obj(), hubTrainJob, trainJob(false, false),
			[]string{suspend, deleteForeground}},
		"preempted, once suspended: deleted pods first": {preempted.Obj(), hubTrainJob, trainJob(true, false), []string{deleteForeground}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.wl.Spec.JobKind = gantry.JobKindTrainJob
			v := View{Now: now, Workload: tc.wl, HubJob: tc.hubJob, Clusters: map[string]Cluster{"w1": on(tc.remote)}}
			var got []string
			for _, a := range Decide(v).Worker {
				if _, isCopy := a.Object.(*gantry.Workload); !isCopy {
					got = append(got, a.String())
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("writes to the TrainJob %q, want %q", got, tc.want)
			}
		})
	}
}
