package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
	"github.com/gantry-dev/gantry/jobkind"
)

// TestAJobChangedWhileItWaitsRunsAsItIsNow: a waiting Job whose parallelism and GPUs are raised gets a
// Workload made anew that counts what it now asks for, and runs as it is now; the Job on the worker and
// the Workload that holds its quota agree.
func TestAJobChangedWhileItWaitsRunsAsItIsNow(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "changed", map[string]int64{"worker-1": 8})
	ns := newNamespace(t, "changed")
	dumpOnFailure(t, ns)
	blocker := gpuJob(ns, "blocker", 1, 8)
	submit(t, blocker)
	winner := runsOn(t, blocker)
	grown := gpuJob(ns, "grown", 1, 1)
	grown.Spec.Completions = ptr.To[int32](4) // fixed; parallelism is not
	submit(t, grown)
	pendingReason(t, grown, gantry.ReasonWaitingForQuota)
	before := hubWorkload(t, grown)

	updateSpec(t, grown, func(j *batchv1.Job) {
		j.Spec.Parallelism = ptr.To[int32](2)
		j.Spec.Template.Spec.Containers[0].Resources.Limits[gantry.GPUResource] = resource.MustParse("2")
		j.Spec.Template.Spec.Containers[0].Resources.Requests[gantry.GPUResource] = resource.MustParse("2")
	})
	eventually(t, "the Workload made anew for what the job asks now", func() error {
		wl := hubWorkload(t, grown)
		gpus := wl.Spec.PodSets[0].Requests[gantry.GPUResource]
		if wl.UID == before.UID || wl.Spec.PodSets[0].Count != 2 || gpus.Value() != 2 {
			return fmt.Errorf("Workload %s: %d pods x %s GPUs", wl.UID, wl.Spec.PodSets[0].Count, gpus.String())
		}
		return nil
	})
	if ev := hubEvents(t, ns, grown.Name); !strings.Contains(ev, "JobChanged") || !strings.Contains(ev, "pod set main pods 1 -> 2") {
		t.Errorf("events of the job: %s", ev)
	}
	completeRemote(t, winner, blocker)
	if got := runsOn(t, grown); got != winner {
		t.Fatalf("runs on %s", got)
	}
	var remote batchv1.Job
	if err := workers[winner].client.Get(context.Background(), client.ObjectKeyFromObject(grown), &remote); err != nil {
		t.Fatal(err)
	}
	gpus := remote.Spec.Template.Spec.Containers[0].Resources.Requests[gantry.GPUResource]
	if *remote.Spec.Parallelism != 2 || gpus.Value() != 2 {
		t.Errorf("the Job on %s runs %d pods x %s GPUs, want 2 x 2", winner, *remote.Spec.Parallelism, gpus.String())
	}
}

// TestWhatAQueuedJobAsksIsFixedWhereGantryCouldNotHonourAChange: the hub's admission policy refuses a
// change of a queued Job's queue or placement annotations at any time, and of its spec once it ran.
func TestWhatAQueuedJobAsksIsFixedWhereGantryCouldNotHonourAChange(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "fixed", map[string]int64{"worker-1": 8})
	ns := newNamespace(t, "fixed")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "fixed", 1, 1)
	submit(t, job)
	winner := runsOn(t, job)

	refused := func(what, want string, change func(*batchv1.Job)) {
		t.Helper()
		var j batchv1.Job
		if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			t.Fatal(err)
		}
		change(&j)
		if err := hubEnv.client.Update(context.Background(), &j); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal saying %q", what, err, want)
		}
	}
	// A label Gantry sets on the jobs it creates on workers is no way around the rules of the hub's.
	refused("a workload UID of its own", "a job submitted to the hub may not carry them", func(j *batchv1.Job) { j.Labels[gantry.WorkloadUIDLabel] = "forged" })
	for i, label := range []string{gantry.DispatchEpochLabel, gantry.DispatchLabel} {
		forged := gpuJob(ns, fmt.Sprintf("forged-%d", i), 1, 1)
		forged.Labels[label] = "7"
		if err := hubEnv.client.Create(context.Background(), forged); err == nil || !strings.Contains(err.Error(), "a job submitted to the hub may not carry them") {
			t.Errorf("a queued Job created with label %s: %v, want it refused", label, err)
		}
	}
	refused("another queue", "the queue of a queued Job is fixed", func(j *batchv1.Job) { j.Labels[gantry.QueueLabel] = "other" })
	refused("no queue", "the queue of a queued Job is fixed", func(j *batchv1.Job) { delete(j.Labels, gantry.QueueLabel) })
	refused("a GPU product", "placement annotations", func(j *batchv1.Job) {
		j.Annotations = map[string]string{gantry.GPUProductsAnnotation: "NVIDIA-H100-80GB-HBM3"}
	})
	startAndMirror(t, winner, job)
	refused("parallelism once it ran", "delete it and submit it again", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](5) })
	updateSpec(t, job, func(j *batchv1.Job) { j.Labels["team"] = "vision" }) // a label of its own stays the user's
}

// A Workload whose job was deleted with --cascade=orphan while the hub was down (the garbage collector
// took its owner reference away) stands for nothing: the hub, finding it when it starts, deletes it
// rather than dispatch it, which would hold quota for a job that is not there.
func TestAWorkloadOrphanedWhileTheHubWasDownIsDeleted(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "orphans")
	dumpOnFailure(t, ns)
	orphan := hubtest.MakeWorkload(jobkind.WorkloadName(jobkind.Job{}, "gone"), ns).JobName("gone").Queue("q").
		PodSet("main", 1, gantry.GPUResource, "1").Obj()
	if err := hubEnv.client.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	startHub(t)
	newGlobalQueue(t, "orphans", map[string]int64{"worker-1": 8})
	eventually(t, "the orphaned Workload deleted", func() error {
		err := hubEnv.client.Get(ctx, client.ObjectKeyFromObject(orphan), &gantry.Workload{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}
