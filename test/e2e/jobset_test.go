package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// TestJobSetOnWorkers runs hack/testbed/check-jobset.sh on the suite's testbed: on each worker a JobSet
// created directly there is defaulted and validated by JobSet's webhooks, runs its pods on kwok nodes,
// reaches Completed, and leaves nothing behind once deleted. It works in a namespace of its own
// (jobset-check), which no other test uses.
func TestJobSetOnWorkers(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "testbed", "check-jobset.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GANTRY_DEV_DIR="+tb.Dir, "GANTRY_CHECK_TIMEOUT=90")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("hack/testbed/check-jobset.sh:\n%s", out)
	if err != nil {
		t.Fatalf("hack/testbed/check-jobset.sh: %v", err)
	}
}

// A JobSet submitted to the hub runs on one worker under the real JobSet controller, to completion: its
// status comes back to the hub's JobSet, its Workload finishes Succeeded, and the etcd ledger shows its
// pods on one worker only, each labelled with its pod set.
func TestAJobSetRunsThroughTheHubToCompletion(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "jobset-hub")
	dumpOnFailure(t, ns)
	job := func(name string, replicas, pods int32) jobset.ReplicatedJob {
		tpl := makeJob(ns, name).pods(pods).gpus(1).runsFor("2s").obj()
		return jobset.ReplicatedJob{Name: name, Replicas: replicas, Template: batchv1.JobTemplateSpec{Spec: tpl.Spec}}
	}
	js := &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns, Labels: map[string]string{gantry.QueueLabel: queueName}},
		Spec:       jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{job("driver", 1, 1), job("workers", 2, 2)}},
	}
	if err := tb.Hub.Client.Create(ctx, js); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.Hub.Client.Delete(context.Background(), js) })
	eventually(t, "the hub's JobSet Completed", 3*time.Minute, poll, func() error {
		var hub jobset.JobSet
		if err := tb.Hub.Client.Get(ctx, client.ObjectKeyFromObject(js), &hub); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(hub.Status.Conditions, string(jobset.JobSetCompleted)) {
			return fmt.Errorf("status %+v", hub.Status)
		}
		return nil
	})
	// The hub JobSet's end is mirrored in the same plan as the Workload's Finished, just before it.
	var wl gantry.Workload
	eventually(t, "the Workload Finished as succeeded", 30*time.Second, poll, func() error {
		if err := tb.Hub.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "jobset-train"}, &wl); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadFinished); c == nil || c.Reason != gantry.ReasonJobSucceeded {
			return fmt.Errorf("finished %+v", c)
		}
		return nil
	})
	checkOneRun(t, ns)
	gangJoined(t, ns)
	where := map[string]bool{}
	sets := map[string]int{}
	for _, p := range audit.Pods(ns) {
		where[p.Cluster] = true
		sets[p.PodSet]++
	}
	if len(where) != 1 || !where[wl.Status.ClusterName] {
		t.Errorf("pods on %v, winner %s", where, wl.Status.ClusterName)
	}
	if sets["driver"] == 0 || sets["workers"] == 0 || sets[""] != 0 {
		t.Errorf("pod records by pod set %v", sets)
	}
	if err := tb.Hub.Client.Delete(ctx, js); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the JobSet gone from "+wl.Status.ClusterName, time.Minute, poll, func() error {
		err := tb.Worker(wl.Status.ClusterName).Client.Get(ctx, client.ObjectKeyFromObject(js), &jobset.JobSet{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}
