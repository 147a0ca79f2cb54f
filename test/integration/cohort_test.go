package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// Two GlobalQueues of one cohort, 8 GPUs each on worker-1 (which has room for 16): the borrower runs a
// second 8-GPU job on what the lender leaves unused, and the queues' status says so (borrowed, lent);
// the lender's own job then waits for its quota until the borrowed GPUs are given back, and runs.
func TestQueuesOfACohortBorrowAndGiveBack(t *testing.T) {
	startHub(t)
	for _, name := range []string{"cohort-lender", "cohort-borrower"} {
		newGlobalQueue(t, name, map[string]int64{"worker-1": 8})
		joinCohort(t, name, "cohort-it")
	}
	borrowerNS, lenderNS := newNamespace(t, "cohort-borrower"), newNamespace(t, "cohort-lender")
	dumpOnFailure(t, borrowerNS)
	dumpOnFailure(t, lenderNS)

	own, borrowed := gpuJob(borrowerNS, "own", 1, 8), gpuJob(borrowerNS, "borrowed", 1, 8)
	submitToRunOn(t, "worker-1", own, borrowed)
	eight := resource.MustParse("8")
	eventually(t, "the queues' status saying what is borrowed and lent", func() error {
		b, l := usageOn(t, "cohort-borrower", "worker-1"), usageOn(t, "cohort-lender", "worker-1")
		got, lent := b.Borrowed[gantry.GPUResource], l.Lent[gantry.GPUResource]
		if got.Cmp(eight) != 0 || lent.Cmp(eight) != 0 {
			return fmt.Errorf("borrower %+v, lender %+v", b, l)
		}
		return nil
	})

	lenders := gpuJob(lenderNS, "lenders", 1, 8)
	submit(t, lenders)
	waitsForQuota(t, lenders)
	completeRemote(t, "worker-1", own)
	if got := runsOn(t, lenders); got != "worker-1" {
		t.Fatalf("the lender's job runs on %s", got)
	}
}

// usageOn is what a GlobalQueue's status says of one cluster.
func usageOn(t *testing.T, globalQueue, cluster string) gantry.ClusterUsage {
	t.Helper()
	var gq gantry.GlobalQueue
	if err := hubEnv.client.Get(context.Background(), client.ObjectKey{Name: globalQueue}, &gq); err != nil {
		t.Fatal(err)
	}
	for _, u := range gq.Status.Usage {
		if u.Name == cluster {
			return u
		}
	}
	return gantry.ClusterUsage{Name: cluster}
}

// A tree of cohorts: team-a and team-b under org, GlobalQueue a in team-a and b in team-b, 8 GPUs each
// on worker-1 (which has room for 16). b runs 16 GPUs there, borrowing through org the 8 that a leaves
// unused; a's own job then waits for its quota until b gives GPUs back, and runs.
func TestCohortsOfATreeLendThroughTheirParent(t *testing.T) {
	startHub(t)
	newCohort(t, "org", "")
	newCohort(t, "team-a", "org")
	newCohort(t, "team-b", "org")
	newGlobalQueue(t, "a", map[string]int64{"worker-1": 8})
	joinCohort(t, "a", "team-a")
	newGlobalQueue(t, "b", map[string]int64{"worker-1": 8})
	joinCohort(t, "b", "team-b")
	aNS, bNS := newNamespace(t, "a"), newNamespace(t, "b")
	dumpOnFailure(t, aNS)
	dumpOnFailure(t, bNS)
	for _, name := range []string{"org", "team-a", "team-b"} {
		cohortActive(t, name, metav1.ConditionTrue, gantry.ReasonInTree)
	}

	own, borrowed := gpuJob(bNS, "own", 1, 8), gpuJob(bNS, "borrowed", 1, 8)
	submitToRunOn(t, "worker-1", own, borrowed)
	eight := resource.MustParse("8")
	eventually(t, "b's status saying it borrows 8 GPUs", func() error {
		b := usageOn(t, "b", "worker-1")
		if got := b.Borrowed[gantry.GPUResource]; got.Cmp(eight) != 0 {
			return fmt.Errorf("b %+v", b)
		}
		return nil
	})
	eventually(t, "team-b's status saying its tree borrows 8 GPUs through org", func() error {
		var c gantry.Cohort
		if err := hubEnv.client.Get(context.Background(), client.ObjectKey{Name: "team-b"}, &c); err != nil {
			return err
		}
		for _, u := range c.Status.Usage {
			if got := u.Borrowed[gantry.GPUResource]; u.Name == "worker-1" && got.Cmp(eight) == 0 {
				return nil
			}
		}
		return fmt.Errorf("usage %+v", c.Status.Usage)
	})

	as := gpuJob(aNS, "as-own", 1, 8)
	submit(t, as)
	waitsForQuota(t, as)
	completeRemote(t, "worker-1", own)
	if got := runsOn(t, as); got != "worker-1" {
		t.Fatalf("a's job runs on %s", got)
	}
}

// Cohorts whose parents lead round in a cycle are each treated as a root and say so, naming the cycle;
// once the cycle is broken they are in the tree again.
func TestCohortsOnAParentCycleAreNotActive(t *testing.T) {
	startHub(t)
	newCohort(t, "cycle-x", "cycle-y")
	newCohort(t, "cycle-y", "cycle-x")
	newCohort(t, "below-cycle", "cycle-x")
	if cond := cohortActive(t, "cycle-x", metav1.ConditionFalse, gantry.ReasonParentCycle); !strings.Contains(cond.Message, "cycle-x -> cycle-y -> cycle-x") {
		t.Errorf("cycle-x: message %q does not name the cycle", cond.Message)
	}
	cohortActive(t, "cycle-y", metav1.ConditionFalse, gantry.ReasonParentCycle)
	cohortActive(t, "below-cycle", metav1.ConditionTrue, gantry.ReasonInTree)

	updateSpec(t, hubtest.MakeCohort("cycle-y").Obj(), func(y *gantry.Cohort) { y.Spec.Parent = "" })
	cohortActive(t, "cycle-x", metav1.ConditionTrue, gantry.ReasonInTree)
	cohortActive(t, "cycle-y", metav1.ConditionTrue, gantry.ReasonInTree)
}

// newCohort creates a Cohort under parent (none when empty), deleted when the test ends.
func newCohort(t *testing.T, name, parent string) {
	t.Helper()
	c := hubtest.MakeCohort(name).Parent(parent).Obj()
	if err := hubEnv.client.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(context.Background(), c) })
}

// joinCohort puts the GlobalQueue in the cohort.
func joinCohort(t *testing.T, globalQueue, cohort string) {
	t.Helper()
	updateSpec(t, hubtest.MakeGlobalQueue(globalQueue).Obj(), func(gq *gantry.GlobalQueue) {
		gq.Spec.Cohort = cohort
	})
}

// cohortActive waits until the Cohort's Active condition has the status and reason, and returns it.
func cohortActive(t *testing.T, name string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	eventually(t, fmt.Sprintf("Cohort %s Active=%s (%s)", name, status, reason), func() error {
		var c gantry.Cohort
		if err := hubEnv.client.Get(context.Background(), client.ObjectKey{Name: name}, &c); err != nil {
			return err
		}
		cond = apimeta.FindStatusCondition(c.Status.Conditions, gantry.CohortActive)
		if cond == nil || cond.Status != status || cond.Reason != reason {
			return fmt.Errorf("conditions %+v", c.Status.Conditions)
		}
		return nil
	})
	return cond
}

// A Cohort or GlobalQueue that says nothing of fair sharing has weight 1, as kubectl get shows.
func TestFairSharingWeightDefaultsToOne(t *testing.T) {
	newCohort(t, "defaults", "")
	var c gantry.Cohort
	if err := hubEnv.client.Get(context.Background(), client.ObjectKey{Name: "defaults"}, &c); err != nil {
		t.Fatal(err)
	}
	if w := c.Spec.FairSharing.Weight; w == nil || *w != 1 {
		t.Errorf("Cohort weight %v, want 1", w)
	}
	newGlobalQueue(t, "defaults", map[string]int64{"worker-1": 8})
	var gq gantry.GlobalQueue
	if err := hubEnv.client.Get(context.Background(), client.ObjectKey{Name: "defaults"}, &gq); err != nil {
		t.Fatal(err)
	}
	if w := gq.Spec.FairSharing.Weight; w == nil || *w != 1 {
		t.Errorf("GlobalQueue weight %v, want 1", w)
	}
}

// submitToRunOn submits the jobs and waits until each runs on the cluster.
func submitToRunOn(t *testing.T, cluster string, jobs ...*batchv1.Job) {
	t.Helper()
	for _, j := range jobs {
		submit(t, j)
	}
	for _, j := range jobs {
		if got := runsOn(t, j); got != cluster {
			t.Fatalf("%s runs on %s, want %s", j.Name, got, cluster)
		}
	}
}
