package integration

import (
	"context"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

func TestCapacityReachesTheHub(t *testing.T) {
	startHub(t)
	eventually(t, "worker capacity on the hub", func() error {
		for _, n := range names {
			var wc gantry.WorkerCluster
			if err := hubEnv.client.Get(context.Background(), types.NamespacedName{Name: n}, &wc); err != nil {
				return err
			}
			c := wc.Status.Capacity
			if c == nil || c.ReadyNodes != 2 {
				return fmt.Errorf("%s capacity %+v", n, c)
			}
			if len(c.GPUProducts) != 1 {
				return fmt.Errorf("%s gpu products %+v", n, c.GPUProducts)
			}
			if p := c.GPUProducts[0]; p.Product != "NVIDIA-H100-80GB-HBM3" || p.Allocatable != 16 || p.Nodes != 2 {
				return fmt.Errorf("%s gpu products %+v", n, c.GPUProducts)
			}
			// jobSetWorker's API server serves the PodGroup API; the other's does not.
			want := map[bool]string{true: gantry.ReasonPodGroupsServed, false: gantry.ReasonNoPodGroupAPI}[n == jobSetWorker]
			if g := apimeta.FindStatusCondition(wc.Status.Conditions, gantry.ClusterGangScheduling); g == nil || g.Reason != want ||
				(g.Status == metav1.ConditionTrue) != (n == jobSetWorker) {
				return fmt.Errorf("%s GangScheduling %+v, want %s", n, g, want)
			}
		}
		return nil
	})
}

func TestOrphansOnWorkersAreCollected(t *testing.T) {
	ctx := context.Background()
	const ns = "orphans"
	w := workers["worker-2"]
	if err := w.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// Left behind by a hub Workload that no longer exists, as after a hub Job deleted while this cluster
	// was unreachable.
	owned := map[string]string{gantry.WorkloadUIDLabel: "0e3c4c2a-gone", gantry.DispatchEpochLabel: "1", gantry.JobNameLabel: "ghost"}
	copyObj := hubtest.MakeCopy("job-ghost", ns, "0e3c4c2a-gone", 1).JobName("ghost").Queue("q").PodSet("main", 1).Obj()
	job := gpuJob(ns, "ghost", 1, 1)
	job.Labels = owned
	// A Job of someone else's in the same namespace must survive.
	theirs := gpuJob(ns, "not-ours", 1, 1)
	theirs.Labels = nil
	for _, o := range []client.Object{copyObj, job, theirs} {
		if err := w.client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	startHub(t)
	eventually(t, "orphans deleted", func() error {
		var cp gantry.Workload
		if err := w.client.Get(ctx, client.ObjectKeyFromObject(copyObj), &cp); !apierrors.IsNotFound(err) {
			return fmt.Errorf("copy still there (%v)", err)
		}
		var j batchv1.Job
		err := w.client.Get(ctx, client.ObjectKeyFromObject(job), &j)
		if apierrors.IsNotFound(err) || (err == nil && j.DeletionTimestamp != nil) {
			return nil
		}
		return fmt.Errorf("orphaned job still there (%v)", err)
	})
	var j batchv1.Job
	if err := w.client.Get(ctx, client.ObjectKeyFromObject(theirs), &j); err != nil || j.DeletionTimestamp != nil {
		t.Fatalf("a Job Gantry did not create was touched: %v %v", err, ptr.Deref(j.DeletionTimestamp, metav1.Time{}))
	}
	_ = w.client.Delete(ctx, theirs)
}
