package integration

import (
	"context"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
)

// Two GlobalQueues of one cohort, 8 GPUs each on worker-1 (which has room for 16): the borrower runs a
// second 8-GPU job on what the lender leaves unused, and the queues' status says so (borrowed, lent);
// the lender's own job then waits for its quota until the borrowed GPUs are given back, and runs.
func TestQueuesOfACohortBorrowAndGiveBack(t *testing.T) {
	ctx := context.Background()
	startHub(t)
	for _, name := range []string{"cohort-lender", "cohort-borrower"} {
		newGlobalQueue(t, name, map[string]int64{"worker-1": 8})
		var gq gantry.GlobalQueue
		if err := hubEnv.client.Get(ctx, client.ObjectKey{Name: name}, &gq); err != nil {
			t.Fatal(err)
		}
		gq.Spec.Cohort = "cohort-it"
		if err := hubEnv.client.Update(ctx, &gq); err != nil {
			t.Fatal(err)
		}
	}
	borrowerNS, lenderNS := newNamespace(t, "cohort-borrower"), newNamespace(t, "cohort-lender")
	dumpOnFailure(t, borrowerNS)
	dumpOnFailure(t, lenderNS)

	own, borrowed := gpuJob(borrowerNS, "own", 1, 8), gpuJob(borrowerNS, "borrowed", 1, 8)
	submit(t, own)
	submit(t, borrowed)
	for _, j := range []*batchv1.Job{own, borrowed} {
		if got := runsOn(t, j); got != "worker-1" {
			t.Fatalf("%s runs on %s", j.Name, got)
		}
	}
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
