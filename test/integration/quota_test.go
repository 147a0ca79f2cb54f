package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// A running job keeps the quota it was admitted under, whatever becomes of its Queue: worker-1 has room
// for two 8-GPU jobs, the GlobalQueue for one, so only the quota keeps the second job waiting.

func TestQuotaHoldsWhenTheQueueOfARunningJobIsDeleted(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "queue-deleted", map[string]int64{"worker-1": 8})
	ns := newNamespace(t, "queue-deleted")
	dumpOnFailure(t, ns)
	second := createQueue(t, ns, "second", "queue-deleted")

	running := gpuJob(ns, "running", 1, 8)
	submit(t, running)
	if got := runsOn(t, running); got != "worker-1" {
		t.Fatalf("running job on %s", got)
	}
	if err := hubEnv.client.Delete(context.Background(), hubtest.MakeQueue("q", ns).Obj()); err != nil {
		t.Fatal(err)
	}
	next := onQueue(gpuJob(ns, "next", 1, 8), second.Name)
	submit(t, next)
	waitsForQuota(t, next)

	createQueue(t, ns, "q", "queue-deleted") // the same name again
	waitsForQuota(t, next)

	completeRemote(t, "worker-1", running)
	if got := runsOn(t, next); got != "worker-1" {
		t.Fatalf("next job runs on %s", got)
	}
}

func TestQuotaHoldsWhenTheQueueOfARunningJobNamesAnotherGlobalQueue(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "queue-moved", map[string]int64{"worker-1": 8})
	ns := newNamespace(t, "queue-moved")
	dumpOnFailure(t, ns)
	elsewhere := hubtest.MakeGlobalQueue("queue-moved-elsewhere").Select("gantry-test", "queue-moved").Strategy(gantry.BestEffortFIFO).
		Cluster("worker-1", gantry.GPUResource, "8").Obj()
	if err := hubEnv.client.Create(context.Background(), elsewhere); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(context.Background(), elsewhere) })
	second := createQueue(t, ns, "second", "queue-moved")

	running := gpuJob(ns, "running", 1, 8)
	submit(t, running)
	if got := runsOn(t, running); got != "worker-1" {
		t.Fatalf("running job on %s", got)
	}
	updateSpec(t, hubtest.MakeQueue("q", ns).Obj(), func(q *gantry.Queue) {
		q.Spec.GlobalQueue = elsewhere.Name
	})
	next := onQueue(gpuJob(ns, "next", 1, 8), second.Name)
	submit(t, next)
	waitsForQuota(t, next)

	completeRemote(t, "worker-1", running)
	if got := runsOn(t, next); got != "worker-1" {
		t.Fatalf("next job runs on %s", got)
	}
}

// createQueue creates a Queue on the GlobalQueue in the namespace.
func createQueue(t *testing.T, ns, name, globalQueue string) *gantry.Queue {
	t.Helper()
	q := hubtest.MakeQueue(name, ns).GlobalQueue(globalQueue).Obj()
	if err := hubEnv.client.Create(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	return q
}

func onQueue(job *batchv1.Job, queue string) *batchv1.Job {
	job.Labels[gantry.QueueLabel] = queue
	return job
}

// waitsForQuota checks that the job waits for quota and stays off the workers for a while.
func waitsForQuota(t *testing.T, job *batchv1.Job) {
	t.Helper()
	pendingReason(t, job, gantry.ReasonWaitingForQuota)
	consistently(t, job.Name+" waits for quota", 2*time.Second, func() error {
		if where, err := remoteJobs(job); err != nil || len(where) > 0 {
			return fmt.Errorf("%s is on %v (%v)", job.Name, where, err)
		}
		if wl := hubWorkload(t, job); wl.Status.Winner() != "" || len(wl.Status.Nominated()) > 0 {
			return fmt.Errorf("%s nominated to %v, admitted by %q", job.Name, wl.Status.NominatedClusters, wl.Status.Winner())
		}
		return nil
	})
}
