package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
	"github.com/gantry-dev/gantry/jobkind"
)

// A job of higher priority that no cluster has quota for preempts one of lower priority of its queue:
// the victim's Job is deleted pods first, and the preemptor reaches the worker only once it is gone; the
// victim says why on its Workload and its job's Events, and is queued again.
func TestAHigherPriorityPreemptsWithinItsQueue(t *testing.T) {
	startHub(t)
	low, high := newPriorityClass(t, "preempt-low", 0), newPriorityClass(t, "preempt-high", 100)
	newGlobalQueue(t, "preempt", map[string]int64{"worker-1": 4})
	setPreemption(t, "preempt", gantry.PreemptionPolicy{WithinQueue: gantry.PreemptLowerPriority})
	ns := newNamespace(t, "preempt")
	dumpOnFailure(t, ns)

	victim := withPriorityClass(gpuJob(ns, "victim", 1, 4), low)
	submitToRunOn(t, "worker-1", victim)
	preemptor := withPriorityClass(gpuJob(ns, "preemptor", 1, 4), high)
	submit(t, preemptor)
	deleteWhenDone(t, victim, preemptor)
	preemptsThenRuns(t, "worker-1", victim, preemptor, gantry.ReasonInQueuePriority)
	waitsForQuota(t, victim)
}

// Where quota has room but the nodes have not, the agent of the cluster names the admitted copies whose
// going would let a waiting gang fit, and the hub preempts those its rules allow.
func TestAnAgentNamesWhatToPreempt(t *testing.T) {
	startHub(t)
	low, high := newPriorityClass(t, "nodes-low", 0), newPriorityClass(t, "nodes-high", 100)
	newGlobalQueue(t, "nodes", map[string]int64{"worker-1": 64})
	setPreemption(t, "nodes", gantry.PreemptionPolicy{WithinQueue: gantry.PreemptLowerPriority})
	ns := newNamespace(t, "nodes")
	dumpOnFailure(t, ns)

	victim := withPriorityClass(gpuJob(ns, "fills-the-nodes", 2, 8), low)
	submitToRunOn(t, "worker-1", victim)
	preemptor := withPriorityClass(gpuJob(ns, "urgent", 1, 8), high)
	submit(t, preemptor)
	deleteWhenDone(t, victim, preemptor)
	preemptsThenRuns(t, "worker-1", victim, preemptor, gantry.ReasonInQueuePriority)
	// Queued again, it waits for room (nothing of lower priority runs there to preempt), and the
	// preemptor is not preempted back.
	consistently(t, victim.Name+" waits and "+preemptor.Name+" keeps running", 2*time.Second, func() error {
		if p := hubWorkload(t, preemptor).Status.Preemption; p != nil {
			return fmt.Errorf("%s preempted: %+v", preemptor.Name, p)
		}
		wl := hubWorkload(t, victim)
		cond := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending)
		if wl.Status.Winner() != "" || cond == nil || (cond.Reason != gantry.ReasonWaitingForCapacity && cond.Reason != gantry.ReasonWaitingForAdmission) {
			return fmt.Errorf("%s: winner %q, pending %+v", victim.Name, wl.Status.Winner(), cond)
		}
		return nil
	})
}

// A queue takes back the quota it lent: the borrower's job is preempted for the lender's.
func TestALenderReclaimsWhatItLent(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "lender", map[string]int64{"worker-1": 4})
	joinCohort(t, "lender", "reclaim-lab")
	setPreemption(t, "lender", gantry.PreemptionPolicy{ReclaimWithinCohort: gantry.PreemptLowerOrEqualPriority})
	newGlobalQueue(t, "borrower", map[string]int64{"worker-1": 0})
	joinCohort(t, "borrower", "reclaim-lab")
	lenderNS, borrowerNS := newNamespace(t, "lender"), newNamespace(t, "borrower")
	dumpOnFailure(t, lenderNS)
	dumpOnFailure(t, borrowerNS)

	victim := gpuJob(borrowerNS, "borrowed", 1, 4)
	submitToRunOn(t, "worker-1", victim)
	preemptor := gpuJob(lenderNS, "own", 1, 4)
	submit(t, preemptor)
	deleteWhenDone(t, victim, preemptor)
	preemptsThenRuns(t, "worker-1", victim, preemptor, gantry.ReasonInCohortReclamation)
	waitsForQuota(t, victim)
}

// preemptsThenRuns checks that the victim is preempted for the preemptor on the cluster for reason, that
// the preemptor stays off every worker while the victim's Job is there, and runs there once the victim's
// pods are gone; the victim is queued again, its eviction and Events naming the preemptor.
func preemptsThenRuns(t *testing.T, cluster string, victim, preemptor *batchv1.Job, reason string) {
	t.Helper()
	preemptorKey := preemptor.Namespace + "/" + jobkind.WorkloadName(jobkind.Job{}, preemptor.Name)
	eventually(t, victim.Name+" preempted for "+preemptor.Name, func() error {
		p := hubWorkload(t, victim).Status.Preemption
		if p == nil || p.Preemptor != preemptorKey || p.Cluster != cluster || p.Reason != reason {
			return fmt.Errorf("preemption %+v, want on %s for %s", p, cluster, reason)
		}
		return nil
	})
	if c := pendingReason(t, preemptor, gantry.ReasonPreempting); !strings.Contains(c.Message, victim.Namespace+"/") {
		t.Errorf("the preemptor's Pending message %q does not name its victim", c.Message)
	}
	consistently(t, preemptor.Name+" off the workers while "+victim.Name+"'s Job is there", 2*time.Second, func() error {
		if where, err := remoteJobs(preemptor); err != nil || len(where) > 0 {
			return fmt.Errorf("%s is on %v (%v)", preemptor.Name, where, err)
		}
		return nil
	})
	playGarbageCollector(t, cluster, victim)
	if got := runsOn(t, preemptor); got != cluster {
		t.Fatalf("%s runs on %s, want %s", preemptor.Name, got, cluster)
	}
	wl := hubWorkload(t, victim)
	if n := len(wl.Status.Evictions); n == 0 || wl.Status.Evictions[n-1].Reason != gantry.ReasonPreempted || wl.Status.Preemption != nil {
		t.Errorf("victim's evictions %+v, preemption %+v", wl.Status.Evictions, wl.Status.Preemption)
	}
	eventually(t, "Events on "+victim.Name+" naming "+preemptor.Name, func() error {
		events := hubEvents(t, victim.Namespace, victim.Name)
		for _, want := range []string{"Warning Preempted: " + reason, "Warning Evicted: Preempted on " + cluster + " for " + preemptorKey} {
			if !strings.Contains(events, want) {
				return fmt.Errorf("no %q in:\n%s", want, events)
			}
		}
		return nil
	})
}

// deleteWhenDone deletes the jobs when the test ends, so that their copies give the workers' room back
// to the tests that follow.
func deleteWhenDone(t *testing.T, jobs ...*batchv1.Job) {
	t.Cleanup(func() {
		for _, j := range jobs {
			deleteJob(t, j)
		}
	})
}

// newPriorityClass creates a PriorityClass on the hub, which gives jobs their priority, and on every
// worker, whose agent rejects a copy whose pods name a class the cluster lacks.
func newPriorityClass(t *testing.T, name string, value int32) string {
	t.Helper()
	clients := []client.Client{hubEnv.client}
	for _, n := range names {
		clients = append(clients, workers[n].client)
	}
	for _, c := range clients {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if err := c.Create(context.Background(), pc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), pc) })
	}
	return name
}

func withPriorityClass(job *batchv1.Job, class string) *batchv1.Job {
	job.Spec.Template.Spec.PriorityClassName = class
	return job
}

func setPreemption(t *testing.T, globalQueue string, p gantry.PreemptionPolicy) {
	t.Helper()
	updateSpec(t, hubtest.MakeGlobalQueue(globalQueue).Obj(), func(gq *gantry.GlobalQueue) { gq.Spec.Preemption = p })
}
