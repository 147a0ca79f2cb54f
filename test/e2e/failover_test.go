package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
)

// setFailover sets the failover policy of every worker, and Wait again when the test ends.
func setFailover(t *testing.T, policy gantry.FailoverPolicy, timeout time.Duration) {
	t.Helper()
	set := func(p gantry.FailoverPolicy) {
		for _, w := range tb.Workers {
			eventually(t, "setting the failover policy of "+w.Name, 10*time.Second, 100*time.Millisecond, func() error {
				var wc gantry.WorkerCluster
				if err := tb.Hub.Client.Get(context.Background(), types.NamespacedName{Name: w.Name}, &wc); err != nil {
					return err
				}
				wc.Spec.Failover = gantry.Failover{Policy: p, Timeout: &metav1.Duration{Duration: timeout}}
				return tb.Hub.Client.Update(context.Background(), &wc)
			})
		}
	}
	set(policy)
	t.Cleanup(func() { set(gantry.FailoverWait) })
	// The hub fails a cluster over only once its agent read the policy in the hub's lease.
	for _, w := range tb.Workers {
		eventually(t, "the hub's lease on "+w.Name+" saying "+string(policy), 30*time.Second, poll, func() error {
			var l coordinationv1.Lease
			key := types.NamespacedName{Namespace: gantry.GantryNamespace, Name: gantry.HubLeaseName}
			if err := w.Client.Get(context.Background(), key, &l); err != nil {
				return err
			}
			if got := l.Annotations[gantry.FailoverPolicyAnnotation]; got != string(policy) {
				return fmt.Errorf("policy %q", got)
			}
			return nil
		})
	}
}

// cutOff points the hub's registration Secret of a worker at an address nothing listens on, so the hub
// loses the worker while its agent, scheduler and kwok nodes go on. The returned function restores it.
func cutOff(t *testing.T, worker string) func() {
	t.Helper()
	ctx := context.Background()
	key := types.NamespacedName{Namespace: gantry.GantryNamespace, Name: worker + "-kubeconfig"}
	var secret corev1.Secret
	if err := tb.Hub.Client.Get(ctx, key, &secret); err != nil {
		t.Fatal(err)
	}
	good := secret.Data[workerconfig.SecretKey]
	write := func(kc []byte) {
		eventually(t, "writing the kubeconfig of "+worker, 10*time.Second, 100*time.Millisecond, func() error {
			var s corev1.Secret
			if err := tb.Hub.Client.Get(ctx, key, &s); err != nil {
				return err
			}
			s.Data[workerconfig.SecretKey] = kc
			return tb.Hub.Client.Update(ctx, &s)
		})
	}
	write([]byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", certificate-authority-data: ZmFrZQ==}}]
users: [{name: u, user: {token: cut-off}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`))
	restored := false
	restore := func() {
		if !restored {
			restored = true
			write(good)
		}
	}
	t.Cleanup(restore)
	return restore
}

// podsOn lists the Job's pods on a worker that are on a node and not finished.
func podsOn(w string, job *batchv1.Job) (int, error) {
	var pods corev1.PodList
	if err := tb.Worker(w).Client.List(context.Background(), &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{"batch.kubernetes.io/job-name": job.Name}); err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n, nil
}

// TestFenceMovesALostWorkersJobWithoutRunningItTwice: under the failover policy Fence, the hub loses the
// worker that runs a gang. The worker's agent suspends the Job and the Job controller deletes its pods;
// only then does the hub dispatch the gang elsewhere, as WorkerLost, where it runs. When the worker is
// back, the old Job goes. The etcd ledger of every pod ever written shows the gang never lived in two
// places at once, and the namespace's Usage counts both runs as the ledgers show them, the first lost.
func TestFenceMovesALostWorkersJobWithoutRunningItTwice(t *testing.T) {
	ns := newNamespace(t, "e2e-fence")
	dumpOnFailure(t, ns)
	const timeout = 30 * time.Second
	setFailover(t, gantry.FailoverFence, timeout)
	job := makeJob(ns, "moved").pods(2).gpus(8).runsFor("10m").obj()
	submit(t, job)
	first := runningOn(t, job)
	restore := cutOff(t, first)
	eventually(t, "the agent of "+first+" stopping the gang", timeout+time.Minute, poll, func() error {
		if n, err := podsOn(first, job); err != nil || n != 0 {
			return fmt.Errorf("%d pods still on %s (%v)", n, first, err)
		}
		return nil
	})
	var second string
	eventually(t, "the gang dispatched elsewhere as WorkerLost and running", 2*timeout+2*time.Minute, poll, func() error {
		wl := hubWorkload(t, job)
		if n := len(wl.Status.Evictions); n == 0 || wl.Status.Evictions[n-1].Reason != gantry.ReasonWorkerLost {
			return fmt.Errorf("evictions %+v", wl.Status.Evictions)
		}
		if second = wl.Status.ClusterName; second == "" || second == first {
			return fmt.Errorf("winner %q", second)
		}
		if n, err := podsOn(second, job); err != nil || n != 2 {
			return fmt.Errorf("%d pods running on %s (%v)", n, second, err)
		}
		return nil
	})
	restore()
	eventually(t, "the old Job removed from "+first, 2*time.Minute, poll, func() error {
		return workerJobGone(tb.Worker(first), job)
	})
	checkOneRun(t, ns)
	if err := tb.Hub.Client.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the gang gone from "+second, 2*time.Minute, poll, func() error {
		return workerJobGone(tb.Worker(second), job)
	})
	checkUsage(t, ns) // the run failed over, lost, and the one deleted
}
