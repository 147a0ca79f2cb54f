package jobs

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

// gpuJob is a queued Job of the given generation running pods pods of gpus GPUs each.
func gpuJob(uid types.UID, generation int64, pods int32, gpus int64) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: uid, Generation: generation,
			Labels: map[string]string{gantry.QueueLabel: "gpu"}},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(gantry.JobManagedBy), Suspend: ptr.To(true), Parallelism: ptr.To(pods),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}},
	}
}

// workloadOf is the Workload the job had when it was built, at its generation.
func workloadOf(t *testing.T, job *batchv1.Job, status gantry.WorkloadStatus) *gantry.Workload {
	t.Helper()
	wl, err := jobkind.NewWorkload(jobkind.Job{}, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	wl.UID, wl.Status = "wl-"+job.UID, status
	return wl
}

func admittedOn(cluster string, created bool) gantry.WorkloadStatus {
	st := gantry.WorkloadStatus{DispatchEpoch: 1, NominatedClusters: []string{cluster}, ClusterName: cluster}
	if created {
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: gantry.WorkloadJobCreated, Status: metav1.ConditionTrue, Reason: gantry.ReasonJobCreated})
	}
	return st
}

// stopped is the job with the annotation of its owner's stop.
func stopped(job *batchv1.Job) *batchv1.Job {
	metav1.SetMetaDataAnnotation(&job.ObjectMeta, gantry.StoppedAnnotation, "true")
	return job
}

// finished is the status with Finished=True.
func finished(st gantry.WorkloadStatus) gantry.WorkloadStatus {
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: gantry.WorkloadFinished, Status: metav1.ConditionTrue, Reason: gantry.ReasonJobSucceeded})
	return st
}

// A queued job's Workload always describes the job: a change while it waits makes the Workload anew, a
// change that leaves its demand alone is recorded, a change once a winner admitted it is not carried
// (and said so), and a Workload left by an earlier job of the name goes. Its owner's stop and resume
// (the annotation gantry.dev/stopped) are copied to the Workload it has, but for one that finished.
func TestAWorkloadIsKeptTrueToItsJob(t *testing.T) {
	cases := map[string]struct {
		job     *batchv1.Job
		wl      *gantry.Workload
		gone    bool
		recheck bool
		event   string // a reason, and a word the message holds
		gen     int64  // the generation the Workload records afterwards, when it stays
		stopped bool   // what the Workload's spec.stopped says afterwards, when it stays
	}{
		"unchanged": {
			job: gpuJob("u1", 1, 1, 1), wl: workloadOf(t, gpuJob("u1", 1, 1, 1), gantry.WorkloadStatus{}), gen: 1,
		},
		"parallelism raised while it waits: made anew": {
			job: gpuJob("u1", 2, 3, 1), wl: workloadOf(t, gpuJob("u1", 1, 1, 1), gantry.WorkloadStatus{DispatchEpoch: 1, NominatedClusters: []string{"w1"}}),
			gone: true, event: EventJobChanged + " pod set main pods 1 -> 3",
		},
		"GPUs raised while it waits: made anew": {
			job: gpuJob("u1", 2, 1, 8), wl: workloadOf(t, gpuJob("u1", 1, 1, 1), gantry.WorkloadStatus{}),
			gone: true, event: EventJobChanged + " nvidia.com/gpu=8",
		},
		"a change that leaves the demand alone: the generation is recorded": {
			job: func() *batchv1.Job { j := gpuJob("u1", 2, 1, 1); j.Spec.BackoffLimit = ptr.To[int32](9); return j }(),
			wl:  workloadOf(t, gpuJob("u1", 1, 1, 1), gantry.WorkloadStatus{}), gen: 2,
		},
		"changed between the winner and its Job: looked at again once the workload path took it back": {
			job: gpuJob("u1", 2, 3, 1), wl: workloadOf(t, gpuJob("u1", 1, 1, 1), admittedOn("w1", false)), recheck: true, gen: 1,
		},
		"changed after its Job was created: it runs as admitted, and the job says so": {
			job: gpuJob("u1", 2, 5, 1), wl: workloadOf(t, gpuJob("u1", 1, 3, 1), admittedOn("w1", true)),
			event: EventChangeNotCarried + " pod set main pods 3 -> 5", gen: 1,
		},
		"a Workload of an earlier job of the name: it goes": {
			job: gpuJob("u2", 1, 1, 1), wl: workloadOf(t, gpuJob("u1", 1, 1, 1), admittedOn("w1", true)), gone: true,
		},
		"stopped while it runs: its Workload records it": {
			job: stopped(gpuJob("u1", 1, 1, 1)), wl: workloadOf(t, gpuJob("u1", 1, 1, 1), admittedOn("w1", true)),
			gen: 1, stopped: true, event: EventStopped + " " + gantry.StoppedAnnotation,
		},
		"resumed: its Workload records it": {
			job: gpuJob("u1", 1, 1, 1), wl: workloadOf(t, stopped(gpuJob("u1", 1, 1, 1)), gantry.WorkloadStatus{}),
			gen: 1, event: EventResumed + " in its place",
		},
		"stopped and changed while it waits: the stop is recorded first, the change looked at again": {
			job: stopped(gpuJob("u1", 2, 3, 1)), wl: workloadOf(t, gpuJob("u1", 1, 1, 1), gantry.WorkloadStatus{}),
			gen: 1, stopped: true, recheck: true, event: EventStopped,
		},
		"stopped once it finished: nothing to stop": {
			job: stopped(gpuJob("u1", 1, 1, 1)), wl: workloadOf(t, gpuJob("u1", 1, 1, 1), finished(admittedOn("w1", true))), gen: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gantry.AddToScheme} {
				if err := add(scheme); err != nil {
					t.Fatal(err)
				}
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.job, tc.wl).WithStatusSubresource(tc.wl).Build()
			recorder := events.NewFakeRecorder(10)
			r := &Reconciler{Client: c, Recorder: recorder, Kind: jobkind.Job{}}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.job)})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.RequeueAfter > 0 && res.RequeueAfter <= time.Minute; got != tc.recheck {
				t.Errorf("requeue %v, want a recheck %v", res.RequeueAfter, tc.recheck)
			}
			var wl gantry.Workload
			err = c.Get(context.Background(), client.ObjectKeyFromObject(tc.wl), &wl)
			switch {
			case tc.gone && err == nil && wl.DeletionTimestamp != nil: // its finalizer holds it while it is withdrawn
			case tc.gone && !apierrors.IsNotFound(err):
				t.Errorf("the Workload stays: %v", err)
			case !tc.gone && err != nil:
				t.Errorf("the Workload went: %v", err)
			case !tc.gone && wl.Spec.JobGeneration != tc.gen:
				t.Errorf("the Workload records generation %d, want %d", wl.Spec.JobGeneration, tc.gen)
			case !tc.gone && wl.Spec.Stopped != tc.stopped:
				t.Errorf("the Workload says stopped %v, want %v", wl.Spec.Stopped, tc.stopped)
			}
			var got string
			select {
			case got = <-recorder.Events:
			default:
			}
			want := strings.Fields(tc.event)
			if (len(want) == 0) != (got == "") || len(want) > 0 && (!strings.Contains(got, want[0]) || !strings.Contains(got, strings.Join(want[1:], " "))) {
				t.Errorf("event %q, want %q", got, tc.event)
			}
		})
	}
}
