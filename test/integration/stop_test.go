package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// A running job its owner stops is taken back from its worker as a preempted one is: its Job there
// deleted pods first, and only once it is gone its quota released; it then waits, Pending with the
// reason Stopped, and is not dispatched again while it is stopped. Resumed, the same Workload (its
// place in the queue) is dispatched again and runs. Over the whole history, no two Jobs of it are on
// workers at once, and it has one Workload throughout.
func TestAStoppedJobIsTakenBackAndResumedRunsAgain(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "stop", map[string]int64{"worker-1": 4})
	ns := newNamespace(t, "stop")
	dumpOnFailure(t, ns)
	hist := record(t, ns)

	train := gpuJob(ns, "train", 1, 4)
	submit(t, train)
	if where := runsOn(t, train); where != "worker-1" {
		t.Fatalf("runs on %s", where)
	}
	usesGPUs(t, "stop", "worker-1", 4)
	before := hubWorkload(t, train)

	setStopped(t, train, true)
	playGarbageCollector(t, "worker-1", train)
	c := pendingReason(t, train, gantry.ReasonStopped)
	if want := "kubectl gantry resume job/train -n " + ns; !strings.Contains(c.Message, want) {
		t.Errorf("the Pending message %q does not say %q", c.Message, want)
	}
	wl := hubWorkload(t, train)
	if n := len(wl.Status.Evictions); n == 0 || wl.Status.Evictions[n-1].Reason != gantry.ReasonStopped || wl.Status.Evictions[n-1].Cluster != "worker-1" {
		t.Errorf("evictions %+v, want the last one Stopped on worker-1", wl.Status.Evictions)
	}
	usesGPUs(t, "stop", "worker-1", 0)
	if !apimeta.IsStatusConditionTrue(hubWorkload(t, train).Status.Conditions, gantry.WorkloadStopped) {
		t.Errorf("no Stopped=True condition on the stopped Workload")
	}
	consistently(t, "the stopped job dispatched nowhere", 3*time.Second, func() error {
		if where, err := remoteJobs(train); err != nil || len(where) > 0 {
			return fmt.Errorf("on %v (%v)", where, err)
		}
		if wl := hubWorkload(t, train); wl.Status.Winner() != "" || len(wl.Status.NominatedClusters) > 0 || !wl.Spec.Stopped {
			return fmt.Errorf("winner %q, nominated %v, stopped %v", wl.Status.Winner(), wl.Status.NominatedClusters, wl.Spec.Stopped)
		}
		return nil
	})

	resumed := time.Now().Add(-time.Second) // the condition's time is to the second
	setStopped(t, train, false)
	if where := runsOn(t, train); where != "worker-1" {
		t.Fatalf("resumed, runs on %s", where)
	}
	// Its admission deadline counts from the resume.
	if c := apimeta.FindStatusCondition(hubWorkload(t, train).Status.Conditions, gantry.WorkloadStopped); c == nil ||
		c.Status != metav1.ConditionFalse || c.Reason != gantry.ReasonResumed || c.LastTransitionTime.Time.Before(resumed) {
		t.Errorf("the resumed Workload's Stopped condition: %+v, want False/Resumed from %s on", c, resumed)
	}
	usesGPUs(t, "stop", "worker-1", 4)
	if after := hubWorkload(t, train); after.UID != before.UID || !after.CreationTimestamp.Equal(&before.CreationTimestamp) {
		t.Errorf("resumed under another Workload (%s, created %s; was %s, %s): it lost its place", after.UID,
			after.CreationTimestamp, before.UID, before.CreationTimestamp)
	}
	eventually(t, "Events on train saying it was stopped and resumed", func() error {
		events := hubEvents(t, ns, train.Name)
		for _, want := range []string{"Normal Stopped", "Normal Evicted: Stopped on worker-1", "Normal Resumed"} {
			if !strings.Contains(events, want) {
				return fmt.Errorf("no %q in:\n%s", want, events)
			}
		}
		return nil
	})
	completeRemote(t, "worker-1", train)
	hubJobComplete(t, train)
	hist.neverTwice(t)
}

// setStopped stops or resumes the job as its owner does (kubectl gantry stop and resume): its
// annotation gantry.dev/stopped, set to "true" or removed.
func setStopped(t *testing.T, job *batchv1.Job, stopped bool) {
	t.Helper()
	var value any
	if stopped {
		value = "true"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{gantry.StoppedAnnotation: value}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := hubEnv.client.Patch(context.Background(), job.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("stopped=%v: %v", stopped, err)
	}
}

// usesGPUs waits until the GlobalQueue's status counts gpus GPUs admitted on the cluster.
func usesGPUs(t *testing.T, globalQueue, cluster string, gpus int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("GlobalQueue %s using %d GPUs on %s", globalQueue, gpus, cluster), func() error {
		var gq gantry.GlobalQueue
		if err := hubEnv.client.Get(context.Background(), client.ObjectKey{Name: globalQueue}, &gq); err != nil {
			return err
		}
		for _, u := range gq.Status.Usage {
			if u.Name != cluster {
				continue
			}
			q := u.Admitted[gantry.GPUResource]
			if q.Value() != gpus {
				return fmt.Errorf("admitted %v", u.Admitted)
			}
			return nil
		}
		return fmt.Errorf("no usage of %s in %+v", cluster, gq.Status.Usage)
	})
}

// neverTwice stops the recording and checks it over its whole length: no moment with Jobs of the
// namespace on two workers, or two on one; one Workload on the hub throughout, never deleted.
func (h *history) neverTwice(t *testing.T) {
	t.Helper()
	h.finish()
	if len(h.closed) > 0 {
		t.Fatalf("watches ended before the check: %v", h.closed)
	}
	live := map[types.UID]string{} // the workers' Jobs not yet seen gone, and where
	hubWorkloads := map[types.UID]bool{}
	for i, s := range h.sightings {
		switch {
		case s.where == "hub" && s.kind == "Workload":
			hubWorkloads[s.uid] = true
			if s.event == watch.Deleted || s.deleting {
				t.Errorf("sighting %d: the hub Workload %s deleted", i, s.uid)
			}
		case s.where == "hub" || s.kind != "Job":
		case s.event == watch.Deleted:
			delete(live, s.uid)
		default:
			live[s.uid] = s.where
			if len(live) > 1 {
				t.Errorf("sighting %d: Jobs live at once: %v", i, live)
			}
		}
	}
	if len(hubWorkloads) != 1 {
		t.Errorf("%d hub Workloads seen, want the same one throughout", len(hubWorkloads))
	}
	t.Logf("%d watch events checked", len(h.sightings))
}
