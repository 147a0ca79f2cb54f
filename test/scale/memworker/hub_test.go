package memworker

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/internal/workerconfig"
)

// The hub's own connection code connects to the server through the kubeconfig the hub's Secret would
// hold, as to a real worker: its identity, API and rights (the allowlist and no more), batch Jobs as the
// only kind; its cache sees a copy created on the server, a health check passes, and its identity may
// do there what the allowlist grants and nothing else.
func TestTheHubConnectsAsToARealWorker(t *testing.T) {
	s := startServer(t, Options{Name: "mem-1"})
	admin := newClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kc, err := s.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := workerconfig.RESTConfig(kc, workerconfig.Policy{AllowLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	m := remote.NewManager(agentScheme, remote.Options{AllowLoopback: true, QPS: 50, Burst: 100, SyncTimeout: 10 * time.Second})
	target := remote.Target{Config: cfg, Version: "secret/1", Hub: remote.HubIdentity{Host: "https://hub.example:6443", UID: "hub-uid"}}
	if err := m.Ensure(ctx, "mem-1", target); err != nil {
		t.Fatal(err)
	}
	defer m.DisconnectAll()
	c, ok := m.Get("mem-1")
	if !ok {
		t.Fatal("not connected")
	}
	if status, reason, msg := remote.LeastPrivilege(c.Rights()); status != metav1.ConditionTrue || reason != gantry.ReasonAllowlistOnly {
		t.Fatalf("least privilege %s/%s: %s", status, reason, msg)
	}
	if kinds := c.Kinds(); len(kinds) != 1 || kinds[0] != gantry.JobKindJob {
		t.Fatalf("kinds served %v, want batch Jobs only", kinds)
	}

	createNamespace(t, admin, "team")
	cp := copyOf("team", "job-a", map[string]string{gantry.WorkloadUIDLabel: "u1", gantry.DispatchEpochLabel: "1"})
	if err := admin.Create(ctx, cp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the hub's cache seeing the copy", func() error {
		return c.Cached().Get(ctx, client.ObjectKeyFromObject(cp), &gantry.Workload{})
	})
	if err := m.Ensure(ctx, "mem-1", target); err != nil {
		t.Fatalf("health check: %v", err)
	}

	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a", Labels: map[string]string{gantry.WorkloadUIDLabel: "u1"}}}
	if err := c.Writer().Create(ctx, job); err != nil {
		t.Fatalf("the hub creating a Job: %v", err)
	}
	if err := c.Writer().Update(ctx, job); !apierrors.IsForbidden(err) {
		t.Fatalf("the hub updating a Job, which the allowlist does not grant: %v, want Forbidden", err)
	}
	if n := s.Writes()[WriteKey{Client: ClientHub, Verb: "create", Resource: "jobs"}]; n != 1 {
		t.Fatalf("%d creates of Jobs counted as the hub's, want 1 (%v)", n, s.Writes())
	}
}
