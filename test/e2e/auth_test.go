package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
)

// hubIdentity is the ServiceAccount, ClusterRoleBinding and RoleBinding the testbed gives the hub on
// each worker (deploy/worker/hub-access.yaml).
const hubIdentity = "gantry-hub-remote"

// waitConnected waits until the WorkerCluster's Connected condition has that status and reason.
func waitConnected(t *testing.T, name string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s Connected=%s (%s)", name, status, reason), 2*time.Minute, poll, func() error {
		var wc gantry.WorkerCluster
		if err := tb.Hub.Client.Get(context.Background(), types.NamespacedName{Name: name}, &wc); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(wc.Status.Conditions, gantry.ClusterConnected)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("connected %+v", c)
		}
		return nil
	})
}

// checkHeld checks that the hub neither moved nor removed the job while it could not act on its worker.
func checkHeld(t *testing.T, job *batchv1.Job, at string) {
	t.Helper()
	checkStayed(t, job, at)
	if n, err := podsOn(at, job); err != nil || n != 1 {
		t.Fatalf("%d pods of %s on %s (%v), want it left running", n, job.Name, at, err)
	}
}

// TestTheHubLosesItsRightsOrItsTokenOnAWorker removes the binding that grants the hub its rights on the
// worker a job runs on, then restores it; then revokes the hub's token there (its ServiceAccount is
// deleted) and rotates the kubeconfig Secret to a new one. Each time the WorkerCluster says
// Unauthorized, nothing is deleted or dispatched elsewhere, and the hub picks the fix up without a
// restart.
func TestTheHubLosesItsRightsOrItsTokenOnAWorker(t *testing.T) {
	ns := newNamespace(t, "e2e-auth")
	dumpOnFailure(t, ns)
	ctx := context.Background()
	job := makeJob(ns, "held").gpus(4).runsFor("10m").stopsWithin(2).obj()
	submit(t, job)
	at := runningOn(t, job)
	w := tb.Worker(at)

	var crb rbacv1.ClusterRoleBinding
	if err := w.Client.Get(ctx, types.NamespacedName{Name: hubIdentity}, &crb); err != nil {
		t.Fatal(err)
	}
	if err := w.Client.Delete(ctx, &crb); err != nil {
		t.Fatal(err)
	}
	restored := false
	restoreBinding := func() {
		if !restored {
			restored = true
			crb.ResourceVersion, crb.UID = "", ""
			if err := w.Client.Create(ctx, &crb); err != nil {
				t.Errorf("restoring the hub's binding on %s: %v", at, err)
			}
		}
	}
	t.Cleanup(restoreBinding)
	waitConnected(t, at, metav1.ConditionFalse, gantry.ReasonUnauthorized)
	checkHeld(t, job, at)
	restoreBinding()
	waitConnected(t, at, metav1.ConditionTrue, gantry.ReasonConnected)

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: gantry.GantryNamespace, Name: hubIdentity}}
	if err := w.Client.Delete(ctx, sa); err != nil {
		t.Fatal(err)
	}
	rotate := func() {
		sa.ResourceVersion, sa.UID = "", ""
		if err := w.Client.Create(ctx, sa); err != nil {
			t.Fatalf("recreating the hub's ServiceAccount on %s: %v", at, err)
		}
		tr, err := w.Clientset.CoreV1().ServiceAccounts(gantry.GantryNamespace).CreateToken(ctx, hubIdentity,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](8760 * 3600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		setHubToken(t, at, tr.Status.Token)
	}
	waitConnected(t, at, metav1.ConditionFalse, gantry.ReasonUnauthorized)
	checkHeld(t, job, at)
	rotate()
	waitConnected(t, at, metav1.ConditionTrue, gantry.ReasonConnected)
	checkHeld(t, job, at)
	checkPromiseKept(t, []*batchv1.Job{job})
}

// setHubToken writes a new token into the hub's kubeconfig Secret of a worker.
func setHubToken(t *testing.T, worker, token string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, "rotating the token of "+worker, 10*time.Second, 100*time.Millisecond, func() error {
		var s corev1.Secret
		key := types.NamespacedName{Namespace: gantry.GantryNamespace, Name: worker + "-kubeconfig"}
		if err := tb.Hub.Client.Get(ctx, key, &s); err != nil {
			return err
		}
		cfg, err := clientcmd.Load(s.Data[workerconfig.SecretKey])
		if err != nil {
			return err
		}
		for _, ai := range cfg.AuthInfos {
			ai.Token = token
		}
		if s.Data[workerconfig.SecretKey], err = clientcmd.Write(*cfg); err != nil {
			return err
		}
		return tb.Hub.Client.Update(ctx, &s)
	})
}
