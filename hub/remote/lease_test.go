package remote_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/hub/remote/remotetest"
)

type fixedFailovers map[string]gantry.Failover

func (f fixedFailovers) Failover(c string) (gantry.Failover, bool) {
	x, ok := f[c]
	return x, ok
}

// The renewer runs in a bubble: synctest.Wait returns once its renewals are done and it waits for its
// next tick.
func TestLeaseRenewer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := runtime.NewScheme()
		_ = clientgoscheme.AddToScheme(s)
		clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
		start := clk.Now()
		w1 := &remotetest.Worker{Store: fake.NewClientBuilder().WithScheme(s).Build()}
		w2 := &remotetest.Worker{Store: fake.NewClientBuilder().WithScheme(s).Build()}
		ws := &remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": w1, "w2": w2}}
		timeout := 2 * time.Minute
		r := &remote.LeaseRenewer{Workers: ws, Clock: clk,
			Failovers: fixedFailovers{"w1": {Policy: gantry.FailoverFence, Timeout: &metav1.Duration{Duration: timeout}}, "w2": {}}}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _ = r.Start(ctx) }()

		// The first round of renewals starts at once; once they are done the renewer waits on its ticker,
		// which the fake clock never fires.
		synctest.Wait()
		var lease coordinationv1.Lease
		key := types.NamespacedName{Namespace: gantry.GantryNamespace, Name: gantry.HubLeaseName}
		if err := w1.Store.Get(ctx, key, &lease); err != nil || !r.Renewed("w1") || !r.Renewed("w2") {
			t.Fatalf("the lease was not written: %v; renewed on w1 %v, on w2 %v", err, r.Renewed("w1"), r.Renewed("w2"))
		}
		if lease.Annotations[gantry.FailoverPolicyAnnotation] != string(gantry.FailoverFence) || *lease.Spec.LeaseDurationSeconds != 120 ||
			!lease.Spec.RenewTime.Equal(&metav1.MicroTime{Time: start}) {
			t.Errorf("lease %+v %+v", lease.Annotations, lease.Spec)
		}
		if got, want := r.FenceDue("w1", timeout), start.Add(timeout+remote.FenceMargin(timeout)); !got.Equal(want) {
			t.Errorf("FenceDue %v, want %v", got, want)
		}
		if got := r.FenceDue("w2", timeout); !got.IsZero() {
			t.Errorf("FenceDue of a cluster whose lease says Wait: %v, want never, whatever the spec says now", got)
		}
		if got := r.FenceDue("never-seen", timeout); !got.IsZero() {
			t.Errorf("FenceDue of a cluster whose agent never read Fence: %v, want never", got)
		}
		if got, want := r.FenceDue("w1", time.Minute), start.Add(timeout+remote.FenceMargin(timeout)); !got.Equal(want) {
			t.Errorf("FenceDue with a shorter timeout than the agent read: %v, want by the longer %v", got, want)
		}
		ws.Down = []string{"w1"}
		if r.Renewed("w1") {
			t.Errorf("renewed while not connected")
		}
		if at, ok := r.RenewedAt("w1"); !ok || !at.Equal(start) {
			t.Errorf("RenewedAt of a cluster no longer connected: %v %v, want its last renewal %v", at, ok, start)
		}
		if _, ok := r.RenewedAt("never-seen"); ok {
			t.Errorf("RenewedAt of a cluster never renewed says it was")
		}
	})
}
