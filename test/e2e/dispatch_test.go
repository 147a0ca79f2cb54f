package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

// runTime is how long every pod "runs" on its kwok node.
const runTime = "3s"

// TestGPUJobsRunOnExactlyOneWorker submits more GPU work than both workers hold at once (104 GPUs
// asked, 64 there), so jobs queue, race for room and run in waves. Every Job must complete on the hub,
// and the workers' etcd must have seen exactly one Job created for each, on the recorded winner.
func TestGPUJobsRunOnExactlyOneWorker(t *testing.T) {
	ns := newNamespace(t, "e2e-gpu")
	dumpOnFailure(t, ns)
	var submitted []*batchv1.Job
	for i := range 8 {
		submitted = append(submitted, makeJob(ns, fmt.Sprintf("gpu1-%d", i)).gpus(1).runsFor(runTime).obj())
	}
	for i := range 8 {
		submitted = append(submitted, makeJob(ns, fmt.Sprintf("gpu4-%d", i)).gpus(4).runsFor(runTime).obj())
	}
	for i := range 4 {
		submitted = append(submitted, makeJob(ns, fmt.Sprintf("gang-2x8-%d", i)).pods(2).gpus(8).runsFor(runTime).obj())
	}
	for _, job := range submitted {
		submit(t, job)
	}
	allComplete(t, submitted, 4*time.Minute)
	checkOneRun(t, ns)

	a := auditJobs(t, ns)
	perWorker := map[string]int{}
	for _, job := range submitted {
		wl := hubWorkload(t, job)
		created := a.created[job.Name]
		if len(created) != 1 {
			t.Errorf("job %s was created %d times on workers (%v), want exactly once", job.Name, len(created), created)
			continue
		}
		if created[0] != wl.Status.ClusterName {
			t.Errorf("job %s was created on %s, but its hub workload records winner %q", job.Name, created[0], wl.Status.ClusterName)
		}
		perWorker[created[0]]++
	}
	for name := range a.created {
		if !contains(submitted, name) {
			t.Errorf("job %s was created on %v but never submitted", name, a.created[name])
		}
	}
	t.Logf("jobs per worker: %v", perWorker)
	checkFleetMetrics(t, len(submitted))
}

// TestNodeSelectorPicksTheH100Worker submits a Job that only fits on H100 nodes, which only worker-2 has.
func TestNodeSelectorPicksTheH100Worker(t *testing.T) {
	ns := newNamespace(t, "e2e-h100")
	dumpOnFailure(t, ns)
	job := makeJob(ns, "h100").gpus(4).runsFor(runTime).nodeSelector(gantry.GPUProductLabel, "NVIDIA-H100-80GB-HBM3").obj()
	submit(t, job)
	allComplete(t, []*batchv1.Job{job}, 2*time.Minute)

	if wl := hubWorkload(t, job); wl.Status.ClusterName != "worker-2" {
		t.Errorf("hub workload records winner %q, want worker-2 (the only worker with H100 nodes)", wl.Status.ClusterName)
	}
	if created := auditJobs(t, ns).created[job.Name]; len(created) != 1 || created[0] != "worker-2" {
		t.Errorf("job created on %v, want exactly once on worker-2", created)
	}
}

// TestDeletingTheHubJobRemovesItFromTheWorker deletes a running Job on the hub; Gantry must delete its
// Job on the winner and its copies everywhere.
func TestDeletingTheHubJobRemovesItFromTheWorker(t *testing.T) {
	ns := newNamespace(t, "e2e-delete")
	dumpOnFailure(t, ns)
	job := makeJob(ns, "doomed").gpus(1).runsFor("10m").obj()
	submit(t, job)

	var winner string
	eventually(t, "job doomed running on its winner", 2*time.Minute, poll, func() error {
		var wl gantry.Workload
		if err := tb.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}, &wl); err != nil {
			return err
		}
		if winner = wl.Status.ClusterName; winner == "" {
			return fmt.Errorf("no winner yet")
		}
		var j batchv1.Job
		if err := tb.Worker(winner).Client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		if j.Status.Active == 0 {
			return fmt.Errorf("job on %s has no active pod yet", winner)
		}
		return nil
	})

	if err := tb.Hub.Client.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "job doomed gone from "+winner, time.Minute, poll, func() error {
		return workerJobGone(tb.Worker(winner), job)
	})
	eventually(t, "hub workload and worker copies of doomed gone", time.Minute, poll, func() error {
		key := types.NamespacedName{Namespace: ns, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}
		for _, c := range tb.All() {
			var wl gantry.Workload
			if err := c.Client.Get(context.Background(), key, &wl); !apierrors.IsNotFound(err) {
				return fmt.Errorf("workload %s still on %s (%v)", key.Name, c.Name, err)
			}
		}
		return nil
	})

	a := auditJobs(t, ns)
	if created := a.created[job.Name]; len(created) != 1 || created[0] != winner {
		t.Errorf("job created on %v, want exactly once on %s", created, winner)
	}
	if deleted := a.deleted[job.Name]; len(deleted) != 1 || deleted[0] != winner {
		t.Errorf("job deleted on %v, want once on %s", deleted, winner)
	}
}

func contains(submitted []*batchv1.Job, name string) bool {
	for _, j := range submitted {
		if j.Name == name {
			return true
		}
	}
	return false
}
