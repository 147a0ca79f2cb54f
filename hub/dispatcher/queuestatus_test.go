package dispatcher

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/hub/dispatcher/queues"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// A queue status write that conflicts (the cache had not seen the last one) is retried after the
// interval, not left stale until the next resync. In a bubble, synctest.Wait returns once the retry
// waits on the clock.
func TestAQueueStatusWriteThatFailsIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gq := hubtest.MakeGlobalQueue("gpus").Cluster("w1").Obj()
		c, sw := conflictingOnce(t, gq)
		clock := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
		d := &Dispatcher{Client: c, Clock: clock}
		d.init()
		p := plannedOver(queues.Read{GlobalQueues: []gantry.GlobalQueue{*gq}, Clusters: map[string]dispatch.Cluster{"w1": {Name: "w1"}}})

		d.writeStatuses(context.Background(), p)
		waitForSlots(t, d)
		if sw.conflicts != 0 {
			t.Fatal("the status was not written")
		}
		synctest.Wait()
		select {
		case <-d.trigger:
			t.Fatal("a pass was asked for before the interval")
		default:
		}
		clock.Step(queueStatusInterval - time.Nanosecond)
		synctest.Wait()
		select {
		case <-d.trigger:
			t.Fatal("a pass was asked for before the interval")
		default:
		}
		clock.Step(time.Nanosecond)
		synctest.Wait()
		select {
		case <-d.trigger:
		default:
			t.Fatalf("no pass was asked for %v after the failed write", queueStatusInterval)
		}
		if due := d.statusesDue(); due > 0 {
			t.Fatalf("statuses due in %v after the interval, want now", due)
		}
		d.writeStatuses(context.Background(), p)
		waitForSlots(t, d)
		var got gantry.GlobalQueue
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(gq), &got); err != nil {
			t.Fatal(err)
		}
		if !apimeta.IsStatusConditionTrue(got.Status.Conditions, gantry.QueueActive) {
			t.Errorf("GlobalQueue status after the retry: %+v, want Active", got.Status)
		}
	})
}

// A cohort is Active while it sits in the tree as its spec says; one whose parents lead back to it is
// not, and its condition names the cycle. Its usage is what its tree lends, uses and borrows now.
func TestCohortStatuses(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	earlier := metav1.NewTime(now.Add(-time.Hour))
	cohort := func(name, parent string) gantry.Cohort {
		return *hubtest.MakeCohort(name).Generation(2).Parent(parent).Obj()
	}
	active := func(status metav1.ConditionStatus, reason, msg string, since metav1.Time) []metav1.Condition {
		return []metav1.Condition{{Type: gantry.CohortActive, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: 2, LastTransitionTime: since}}
	}
	stale := []gantry.CohortUsage{{Name: "w1", Used: corev1.ResourceList{gantry.GPUResource: resource.MustParse("4")}}}
	wasActive := cohort("team-a", "org")
	wasActive.Status = gantry.CohortStatus{Conditions: active(metav1.ConditionTrue, gantry.ReasonInTree, "", earlier), Usage: stale}
	gpus := func(n int64) corev1.ResourceList {
		return corev1.ResourceList{gantry.GPUResource: *resource.NewQuantity(n, resource.DecimalSI)}
	}

	cohorts := []gantry.Cohort{cohort("org", ""), wasActive, cohort("orphan", "gone"),
		cohort("x", "y"), cohort("y", "x"), cohort("below-the-cycle", "x")}
	snap := &dispatch.Snapshot{Cohorts: queues.NewManager(0).Full(queues.Read{Cohorts: cohorts}).Snapshot().Cohorts, Queues: map[string]*dispatch.GlobalQueue{
		"q": {Name: "q", Cohort: "team-a", Clusters: []string{"w1"}, Quota: map[string]dispatch.Resources{"w1": {gantry.GPUResource: 8000}}},
	}, Workloads: []*dispatch.Workload{{Key: "ns/a", GlobalQueue: "q", Phase: dispatch.Admitted, Winner: "w1",
		Requests: dispatch.Resources{gantry.GPUResource: 3000}}}}
	want := map[string]gantry.CohortStatus{
		"org": {Conditions: active(metav1.ConditionTrue, gantry.ReasonInTree, "a root", now),
			Usage: []gantry.CohortUsage{{Name: "w1", Lendable: gpus(8), Used: gpus(3)}}},
		"team-a": {Conditions: active(metav1.ConditionTrue, gantry.ReasonInTree, "under cohort org", earlier),
			Usage: []gantry.CohortUsage{{Name: "w1", Lendable: gpus(8), Used: gpus(3)}}},
		"orphan": {Conditions: active(metav1.ConditionTrue, gantry.ReasonInTree,
			"under cohort gone, which has no Cohort object: a root without quota of its own", now)},
		"x": {Conditions: active(metav1.ConditionFalse, gantry.ReasonParentCycle,
			"its parents lead back to it (x -> y -> x): it is treated as a root", now)},
		"y": {Conditions: active(metav1.ConditionFalse, gantry.ReasonParentCycle,
			"its parents lead back to it (y -> x -> y): it is treated as a root", now)},
		"below-the-cycle": {Conditions: active(metav1.ConditionTrue, gantry.ReasonInTree, "under cohort x", now)},
	}
	if diff := cmp.Diff(want, cohortStatuses(cohorts, snap, dispatch.UsageOf(snap).Cohorts, now)); diff != "" {
		t.Errorf("cohort statuses (-want +got):\n%s", diff)
	}
	if got := cohorts[1].Status.Conditions[0].Message; got != "" {
		t.Errorf("the cache's Cohort was changed: message %q", got)
	}
}

// Cohort statuses are written with the queues' and like them: a write that conflicts is retried after
// the interval, and a status that is already right is not written again.
func TestCohortStatusIsWrittenWhenItChanges(t *testing.T) {
	ctx := context.Background()
	x, y := hubtest.MakeCohort("x").Parent("y").Obj(), hubtest.MakeCohort("y").Parent("x").Obj()
	c, sw := conflictingOnce(t, x, y)
	clock := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	d := &Dispatcher{Client: c, Clock: clock}
	d.init()
	write := func() {
		var list gantry.CohortList
		if err := c.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		d.writeStatuses(ctx, plannedOver(queues.Read{Cohorts: list.Items}))
		waitForSlots(t, d)
		clock.Step(queueStatusInterval)
	}

	if write(); sw.writes != 2 {
		t.Fatalf("after a conflict: %d writes, want 2", sw.writes)
	}
	if write(); sw.writes != 3 {
		t.Fatalf("the retry: %d writes, want 3", sw.writes)
	}
	if write(); sw.writes != 3 {
		t.Fatalf("with nothing changed: %d writes, want still 3", sw.writes)
	}
	for _, name := range []string{"x", "y"} {
		var got gantry.Cohort
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &got); err != nil {
			t.Fatal(err)
		}
		if cond := apimeta.FindStatusCondition(got.Status.Conditions, gantry.CohortActive); cond == nil ||
			cond.Status != metav1.ConditionFalse || cond.Reason != gantry.ReasonParentCycle {
			t.Errorf("Cohort %s: conditions %+v, want Active=False (%s)", name, got.Status.Conditions, gantry.ReasonParentCycle)
		}
	}
}

// A queue whose Active condition is all that changes gets it written.
func TestAQueueConditionThatAloneChangesIsWritten(t *testing.T) {
	ctx := context.Background()
	s := runtime.NewScheme()
	if err := gantry.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	wasActive := []metav1.Condition{{Type: gantry.QueueActive, Status: metav1.ConditionTrue, Reason: gantry.ReasonReady, Message: "all clusters exist"}}
	gq := hubtest.MakeGlobalQueue("gpus").Cluster("gone").Obj()
	gq.Status = gantry.GlobalQueueStatus{Conditions: wasActive, Usage: []gantry.ClusterUsage{{Name: "gone"}}}
	q := hubtest.MakeQueue("q", "ns").GlobalQueue("deleted").Obj()
	q.Status = gantry.QueueStatus{Conditions: []metav1.Condition{{Type: gantry.QueueActive, Status: metav1.ConditionTrue,
		Reason: gantry.ReasonReady, Message: "GlobalQueue deleted exists"}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(gq, q).WithStatusSubresource(gq, q).Build()
	d := &Dispatcher{Client: c, Clock: clocktesting.NewFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))}
	d.init()
	p := plannedOver(queues.Read{GlobalQueues: []gantry.GlobalQueue{*gq}, Queues: []gantry.Queue{*q}})
	d.writeStatuses(ctx, p)
	waitForSlots(t, d)
	var gotGQ gantry.GlobalQueue
	if err := c.Get(ctx, client.ObjectKeyFromObject(gq), &gotGQ); err != nil {
		t.Fatal(err)
	}
	if cond := apimeta.FindStatusCondition(gotGQ.Status.Conditions, gantry.QueueActive); cond == nil || cond.Reason != gantry.ReasonUnknownCluster {
		t.Errorf("GlobalQueue conditions %+v, want Active=False (%s)", gotGQ.Status.Conditions, gantry.ReasonUnknownCluster)
	}
	var gotQ gantry.Queue
	if err := c.Get(ctx, client.ObjectKeyFromObject(q), &gotQ); err != nil {
		t.Fatal(err)
	}
	if cond := apimeta.FindStatusCondition(gotQ.Status.Conditions, gantry.QueueActive); cond == nil || cond.Reason != gantry.ReasonGlobalQueueNotFound {
		t.Errorf("Queue conditions %+v, want Active=False (%s)", gotQ.Status.Conditions, gantry.ReasonGlobalQueueNotFound)
	}
	if p.read.GlobalQueues[0].Status.Conditions[0].Status != metav1.ConditionTrue {
		t.Errorf("the cache's GlobalQueue was changed: %+v", p.read.GlobalQueues[0].Status.Conditions)
	}
}

// A pass hands the queue statuses it finds changed to a writer slot and does not wait for them: while
// they are being written the statuses are not due, so no second set races the first, and the pass after
// them is free to write again.
func TestAPassDoesNotWaitForQueueStatuses(t *testing.T) {
	ctx := context.Background()
	s := runtime.NewScheme()
	if err := gantry.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	gq := hubtest.MakeGlobalQueue("gpus").Obj()
	release := make(chan struct{})
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(gq).WithStatusSubresource(gq).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			<-release // an API server that does not answer yet
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}).Build()
	clock := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	d := &Dispatcher{Client: c, Clock: clock}
	d.init()
	p := plannedOver(queues.Read{GlobalQueues: []gantry.GlobalQueue{*gq}})

	returned := make(chan time.Duration)
	go func() { returned <- d.writeStatuses(ctx, p) }()
	select {
	case wait := <-returned:
		if wait != 0 {
			t.Errorf("wait %v, want none", wait)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("writeStatuses waited for the API server")
	}
	clock.Step(2 * queueStatusInterval)
	if due := d.statusesDue(); due <= 0 {
		t.Errorf("statuses due while the last ones are being written")
	}
	if wait := d.writeStatuses(ctx, &planned{read: p.read, pass: p.pass}); wait != queueStatusInterval {
		t.Errorf("a pass while they are written: wait %v, want %v", wait, queueStatusInterval)
	}
	close(release)
	waitForSlots(t, d)
	if due := d.statusesDue(); due > 0 {
		t.Errorf("statuses due in %v once written, want now", due)
	}
	var got gantry.GlobalQueue
	if err := c.Get(ctx, client.ObjectKeyFromObject(gq), &got); err != nil {
		t.Fatal(err)
	}
	if !apimeta.IsStatusConditionTrue(got.Status.Conditions, gantry.QueueActive) {
		t.Errorf("GlobalQueue status %+v, want Active", got.Status)
	}
}

// plannedOver is a pass over no workloads that read r, with its usage: the statuses are due.
func plannedOver(r queues.Read) *planned {
	p := &planned{read: r, pass: queues.NewManager(0).Full(r)}
	p.usage = usageOf(p.pass.Snapshot())
	return p
}

func usageOf(snap *dispatch.Snapshot) *dispatch.Usage {
	u := dispatch.UsageOf(snap)
	return &u
}

// statusWrites counts the status writes a fake client took, and how many of the next ones conflict.
type statusWrites struct{ writes, conflicts int }

// conflictingOnce is a fake client holding the objects whose first status write conflicts, as when
// the cache had not seen the last one.
func conflictingOnce(t *testing.T, objs ...client.Object) (client.Client, *statusWrites) {
	t.Helper()
	s := runtime.NewScheme()
	if err := gantry.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	sw := &statusWrites{conflicts: 1}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(objs...).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			sw.writes++
			if sw.conflicts > 0 {
				sw.conflicts--
				return apierrors.NewConflict(schema.GroupResource{Group: "gantry.dev", Resource: "statuses"}, obj.GetName(), nil)
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}).Build()
	return c, sw
}
