package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// A held GlobalQueue dispatches nothing: a job submitted to it waits (QueueHeld) and goes to no
// worker, the queue says it is held, and what runs goes on. Once no longer held, the job runs. Held
// and drained, a job that waits is finished as QueueDrained and its hub Job marked Failed, while the
// running one goes on.
func TestAHeldQueueDispatchesNothingAndADrainedOneEndsWhatWaits(t *testing.T) {
	ctx := context.Background()
	startHub(t)
	newGlobalQueue(t, "hold", map[string]int64{"worker-1": 8})
	ns := newNamespace(t, "hold")
	dumpOnFailure(t, ns)
	gq := hubtest.MakeGlobalQueue("hold").Obj()

	running := gpuJob(ns, "running", 1, 4)
	submit(t, running)
	winner := runsOn(t, running)

	updateSpec(t, gq, func(gq *gantry.GlobalQueue) { gq.Spec.Held = true })
	held := gpuJob(ns, "held", 1, 4)
	submit(t, held)
	pendingReason(t, held, gantry.ReasonQueueHeld)
	eventually(t, "the GlobalQueue says it is held", func() error {
		var got gantry.GlobalQueue
		if err := hubEnv.client.Get(ctx, client.ObjectKeyFromObject(gq), &got); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(got.Status.Conditions, gantry.QueueActive); c == nil || c.Reason != gantry.ReasonQueueHeld {
			return fmt.Errorf("Active condition %+v", c)
		}
		return nil
	})
	consistently(t, "the held job goes nowhere and the running one goes on", 2*time.Second, func() error {
		if where, err := remoteJobs(held); err != nil || len(where) > 0 {
			return fmt.Errorf("held job on %v (%v)", where, err)
		}
		if w := hubWorkload(t, running).Status.Winner(); w != winner {
			return fmt.Errorf("the running job's winner is %q, was %q", w, winner)
		}
		return nil
	})

	updateSpec(t, gq, func(gq *gantry.GlobalQueue) { gq.Spec.Held = false })
	runsOn(t, held)

	updateSpec(t, gq, func(gq *gantry.GlobalQueue) { gq.Spec.Held, gq.Spec.DrainWhileHeld = true, true })
	drained := gpuJob(ns, "drained", 1, 4)
	submit(t, drained)
	workloadFinishes(t, ns, "job-drained", gantry.ReasonQueueDrained)
	eventually(t, "the drained job's hub Job shows Failed "+gantry.ReasonQueueDrained, func() error {
		var hub batchv1.Job
		if err := hubEnv.client.Get(ctx, client.ObjectKeyFromObject(drained), &hub); err != nil {
			return err
		}
		if c := jobCondition(&hub, batchv1.JobFailed); c == nil || c.Reason != gantry.ReasonQueueDrained {
			return fmt.Errorf("the hub Job's Failed condition %+v", c)
		}
		return nil
	})
	for _, j := range []*batchv1.Job{running, held} {
		if c := apimeta.FindStatusCondition(hubWorkload(t, j).Status.Conditions, gantry.WorkloadFinished); c != nil && c.Reason == gantry.ReasonQueueDrained {
			t.Errorf("%s, admitted before the drain, was drained: %s", j.Name, c.Message)
		}
	}
	if where, err := remoteJobs(drained); err != nil || len(where) > 0 {
		t.Errorf("drained job on %v (%v)", where, err)
	}
}

// drainWhileHeld means nothing without held: the API server refuses it.
func TestDrainWithoutHoldIsRefused(t *testing.T) {
	gq := hubtest.MakeGlobalQueue("drain-alone").SelectAll().Cluster("worker-1", gantry.GPUResource, "1").Obj()
	gq.Spec.DrainWhileHeld = true
	err := hubEnv.client.Create(context.Background(), gq)
	if err == nil {
		_ = hubEnv.client.Delete(context.Background(), gq)
	}
	if err == nil || !strings.Contains(err.Error(), "drainWhileHeld needs held") {
		t.Errorf("creating a GlobalQueue with drainWhileHeld alone: %v, want it refused", err)
	}
}
