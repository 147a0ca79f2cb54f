package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// A GlobalQueue's admission deadline ends a job no cluster admitted in time: its Workload finishes as
// Inadmissible saying what blocked it, the hub Job shows Failed with that reason and a Warning Event,
// and nothing of it is on a worker. A job with a deadline of its own waits on; one admitted in time
// runs on past the deadline.
func TestAJobPastItsAdmissionDeadlineEndsAsInadmissible(t *testing.T) {
	ctx := context.Background()
	startHub(t)
	newGlobalQueue(t, "deadline", map[string]int64{"worker-1": 8, "worker-2": 8})
	updateSpec(t, hubtest.MakeGlobalQueue("deadline").Obj(), func(gq *gantry.GlobalQueue) {
		gq.Spec.AdmissionDeadline = &metav1.Duration{Duration: 3 * time.Second}
	})
	ns := newNamespace(t, "deadline")
	dumpOnFailure(t, ns)

	admitted := gpuJob(ns, "in-time", 1, 8)
	submit(t, admitted)
	winner := runsOn(t, admitted)
	huge := gpuJob(ns, "huge", 2, 8) // 16 GPUs, over the queue's 8 on any cluster
	patient := gpuJob(ns, "patient", 2, 8)
	patient.Annotations = map[string]string{gantry.AdmissionDeadlineAnnotation: "1h"}
	submit(t, huge)
	submit(t, patient)
	pendingReason(t, huge, gantry.ReasonNoClusterCanHold)

	workloadFinishes(t, ns, "job-huge", gantry.ReasonInadmissible)
	finished := apimeta.FindStatusCondition(hubWorkload(t, huge).Status.Conditions, gantry.WorkloadFinished)
	if !strings.Contains(finished.Message, "admission deadline of 3s") || !strings.Contains(finished.Message, "can ever hold") {
		t.Errorf("finished: %q; want the deadline and what blocked it", finished.Message)
	}
	t.Logf("%s", finished.Message)
	// The hub Job follows its Workload in a write of its own.
	eventually(t, "the hub Job shows Failed "+gantry.ReasonInadmissible, func() error {
		var hub batchv1.Job
		if err := hubEnv.client.Get(ctx, client.ObjectKeyFromObject(huge), &hub); err != nil {
			return err
		}
		if c := jobCondition(&hub, batchv1.JobFailed); c == nil || c.Reason != gantry.ReasonInadmissible {
			return fmt.Errorf("the hub Job's Failed condition %+v", c)
		}
		return nil
	})
	eventually(t, "a Warning Event on the hub Job", func() error {
		if ev := hubEvents(t, ns, huge.Name); !strings.Contains(ev, "Warning Finished: no cluster admitted it within its admission deadline") {
			return fmt.Errorf("events on the hub Job:\n%s", ev)
		}
		return nil
	})

	consistently(t, "the others go on", 2*time.Second, func() error {
		if c := apimeta.FindStatusCondition(hubWorkload(t, patient).Status.Conditions, gantry.WorkloadFinished); c != nil && c.Status == metav1.ConditionTrue {
			return fmt.Errorf("the job with a deadline of 1h finished: %s", c.Message)
		}
		wl := hubWorkload(t, admitted)
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadFinished); c != nil && c.Status == metav1.ConditionTrue || wl.Status.Winner() != winner {
			return fmt.Errorf("the admitted job: winner %q, finished %+v", wl.Status.Winner(), c)
		}
		for _, j := range []*batchv1.Job{huge, patient} {
			if where, err := remoteJobs(j); err != nil || len(where) > 0 {
				return fmt.Errorf("%s on %v (%v)", j.Name, where, err)
			}
		}
		return nil
	})
}

func jobCondition(j *batchv1.Job, typ batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if c := &j.Status.Conditions[i]; c.Type == typ && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}
