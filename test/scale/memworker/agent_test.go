package memworker

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/agent/controller"
	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/testcluster"
)

// gpuCopy is a copy as the hub makes it, of pods pods of gpus GPUs each.
func gpuCopy(name string, pods int32, gpus int64) *gantry.Workload {
	cp := copyOf("team", "job-"+name, map[string]string{gantry.WorkloadUIDLabel: "uid-" + name, gantry.DispatchEpochLabel: "1", gantry.JobNameLabel: name})
	cp.Spec.PodSets[0].Count = pods
	cp.Spec.PodSets[0].Requests = corev1.ResourceList{gantry.GPUResource: *apiresource.NewQuantity(gpus, apiresource.DecimalSI)}
	return cp
}

func admitted(ctx context.Context, c client.Client, cp *gantry.Workload, status metav1.ConditionStatus, reason string) func() error {
	return func() error {
		var got gantry.Workload
		if err := c.Get(ctx, client.ObjectKeyFromObject(cp), &got); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, gantry.WorkloadAdmitted)
		if cond == nil || cond.Status != status || cond.Reason != reason || cond.ObservedGeneration != got.Generation {
			return fmt.Errorf("%s: Admitted %+v, want %s %s", cp.Name, cond, status, reason)
		}
		return nil
	}
}

func freeGPUs(ctx context.Context, c client.Client, want int64) func() error {
	return func() error {
		var r gantry.CapacityReport
		if err := c.Get(ctx, types.NamespacedName{Name: "mem-1"}, &r); err != nil {
			return err
		}
		st := r.Status
		if st.ClusterName != "mem-1" || time.Since(st.HeartbeatTime.Time) > time.Minute || len(st.Capacity.GPUProducts) != 1 {
			return fmt.Errorf("report %+v", st)
		}
		if p := st.Capacity.GPUProducts[0]; p.Product != testcluster.GPUProduct || p.Free != want || p.Allocatable != 8 {
			return fmt.Errorf("GPUs of the report %+v, want %d of 8 free", p, want)
		}
		return nil
	}
}

// The agent admits a copy that fits the worker's free GPUs, makes one that does not fit now wait and
// rejects one that never fits; its CapacityReport follows; the room of an admitted copy comes back when
// its Job completes or when the copy is withdrawn.
func TestTheAgentAdmitsWhatFitsAndReportsWhatIsFree(t *testing.T) {
	s := startServer(t, Options{Name: "mem-1"})
	c := newClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 2 {
		if err := testcluster.CreateGPUNode(ctx, c, fmt.Sprintf("mem-1-gpu-%d", i), 4); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.StartAgent(controller.Options{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first report", freeGPUs(ctx, c, 8))
	createNamespace(t, c, "team")
	big, more, huge := gpuCopy("big", 2, 3), gpuCopy("more", 1, 4), gpuCopy("huge", 1, 16)
	for _, cp := range []*gantry.Workload{big, more, huge} {
		if err := c.Create(ctx, cp); err != nil {
			t.Fatal(err)
		}
		if cp == big {
			eventually(t, "the copy that fits", admitted(ctx, c, big, metav1.ConditionTrue, gantry.ReasonFits))
		}
	}
	eventually(t, "a copy that does not fit now", admitted(ctx, c, more, metav1.ConditionFalse, gantry.ReasonInsufficientResources))
	eventually(t, "a copy that never fits", admitted(ctx, c, huge, metav1.ConditionFalse, gantry.ReasonNeverFits))
	eventually(t, "the report of the admission, at most every 5 s", freeGPUs(ctx, c, 2))

	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "big", Labels: map[string]string{gantry.WorkloadUIDLabel: "uid-big"}}}
	if err := c.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	job.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 2, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	if err := c.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the waiting copy once the Job of the first completed", admitted(ctx, c, more, metav1.ConditionTrue, gantry.ReasonFits))
	if err := c.Delete(ctx, more); err != nil {
		t.Fatal(err)
	}
	again := gpuCopy("again", 2, 4)
	if err := c.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a copy of all GPUs once the admitted one was withdrawn", admitted(ctx, c, again, metav1.ConditionTrue, gantry.ReasonFits))
	if n := s.Writes()[WriteKey{Client: ClientAgent, Verb: "update", Resource: "workloads/status"}]; n < 4 {
		t.Fatalf("%d status updates of copies counted as the agent's, want 4 or more", n)
	}
}
