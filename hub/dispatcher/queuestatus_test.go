package dispatcher

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/dispatch"
)

// A queue status write that conflicts (the cache had not seen the last one) is retried after the
// interval, not left stale until the next resync.
func TestAQueueStatusWriteThatFailsIsRetried(t *testing.T) {
	gq := &gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: "gpus"},
		Spec: gantry.GlobalQueueSpec{Clusters: []gantry.ClusterQuota{{Name: "w1"}}}}
	s := runtime.NewScheme()
	if err := gantry.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	conflicts := 1
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(gq).WithStatusSubresource(gq).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if _, ok := obj.(*gantry.GlobalQueue); ok && conflicts > 0 {
				conflicts--
				return apierrors.NewConflict(schema.GroupResource{Group: "gantry.dev", Resource: "globalqueues"}, obj.GetName(), nil)
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}).Build()
	clock := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	d := &Dispatcher{Client: c, Clock: clock}
	st := &hubState{globals: []gantry.GlobalQueue{*gq}}
	snap := &dispatch.Snapshot{Queues: map[string]*dispatch.GlobalQueue{"gpus": {Name: "gpus", Clusters: []string{"w1"}}},
		Clusters: map[string]dispatch.Cluster{"w1": {Name: "w1"}}}

	if wait := d.writeQueueStatus(context.Background(), st, snap); wait != queueStatusInterval {
		t.Fatalf("after a failed write: wait %v, want a retry in %v", wait, queueStatusInterval)
	}
	clock.Step(queueStatusInterval)
	if wait := d.writeQueueStatus(context.Background(), st, snap); wait != 0 {
		t.Fatalf("after a good write: wait %v, want none", wait)
	}
	var got gantry.GlobalQueue
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(gq), &got); err != nil {
		t.Fatal(err)
	}
	if !apimeta.IsStatusConditionTrue(got.Status.Conditions, gantry.QueueActive) {
		t.Errorf("GlobalQueue status after the retry: %+v, want Active", got.Status)
	}
}
