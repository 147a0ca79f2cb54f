package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/remote/remotetest"
)

// gatedWorker is a worker whose single deletions wait for the gate (the first deletion of a lane stays
// in flight while others come), and which counts the requests and may refuse deletecollection.
type gatedWorker struct {
	*remotetest.Worker
	gate                 chan struct{}
	singles, collections atomic.Int32
}

func newGatedWorker(t *testing.T, refuseCollections bool, objs ...client.Object) *gatedWorker {
	t.Helper()
	g := &gatedWorker{gate: make(chan struct{})}
	store := fake.NewClientBuilder().WithScheme(testScheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			g.singles.Add(1)
			select {
			case <-g.gate:
			case <-ctx.Done():
				return ctx.Err()
			}
			return c.Delete(ctx, obj, opts...)
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			g.collections.Add(1)
			if refuseCollections {
				return apierrors.NewForbidden(batchv1.Resource("jobs"), "", errors.New("no deletecollection here"))
			}
			return c.DeleteAllOf(ctx, obj, opts...)
		},
	}).Build()
	g.Worker = &remotetest.Worker{Store: store}
	return g
}

// dispatchedJob is a Job Gantry created for the workload's epoch on a worker.
func dispatchedJob(name string, uid types.UID, epoch int64) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("job-" + name),
		Labels: map[string]string{gantry.WorkloadUIDLabel: string(uid), gantry.DispatchLabel: gantry.Dispatch(uid, epoch)}}}
}

// waitForWaiting waits until n deletions wait in the lane of the worker's batch Jobs in "ns".
func waitForWaiting(t *testing.T, d *deletions, n int) {
	t.Helper()
	l := lane{cluster: "w", namespace: "ns", foreground: true}
	for range 500 {
		d.mu.Lock()
		st := d.lanes[l]
		waiting := 0
		if st != nil {
			waiting = len(st.waiting)
		}
		d.mu.Unlock()
		if waiting == n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%d deletions never waited in the lane", n)
}

type outcome struct {
	deleted bool
	err     error
}

// deleteAll deletes the jobs concurrently, the first alone until the others have come (ready returns
// once they wait behind it), and returns each one's outcome once the gate opens.
func deleteAll(d *deletions, g *gatedWorker, ctxs []context.Context, jobs []*batchv1.Job, ready func()) []outcome {
	out := make([]outcome, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			deleted, err := d.delete(ctxs[i], g, "w", j, true)
			out[i] = outcome{deleted, err}
		})
		if i == 0 {
			for g.singles.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}
	ready()
	close(g.gate)
	wg.Wait()
	return out
}

func remaining(t *testing.T, g *gatedWorker) map[string]bool {
	t.Helper()
	var jobs batchv1.JobList
	if err := g.Store.List(context.Background(), &jobs); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, j := range jobs.Items {
		out[j.Name] = true
	}
	return out
}

func TestDeletionsThatComeTogetherGoInOneRequest(t *testing.T) {
	jobs := []*batchv1.Job{dispatchedJob("a", "wl-a", 1), dispatchedJob("b", "wl-b", 1), dispatchedJob("c", "wl-c", 2), dispatchedJob("d", "wl-d", 1)}
	// Another dispatch of a workload being deleted, and a Job of another workload: neither is selected.
	later := dispatchedJob("b-again", "wl-b", 2)
	other := dispatchedJob("e", "wl-e", 1)
	g := newGatedWorker(t, false, jobs[0], jobs[1], jobs[2], jobs[3], later, other)
	ctxs := []context.Context{context.Background(), context.Background(), context.Background(), context.Background()}
	var d deletions
	for i, o := range deleteAll(&d, g, ctxs, jobs, func() { waitForWaiting(t, &d, 3) }) {
		if !o.deleted || o.err != nil {
			t.Errorf("job %s: deleted %v, %v; want deleted", jobs[i].Name, o.deleted, o.err)
		}
	}
	if s, c := g.singles.Load(), g.collections.Load(); s != 1 || c != 1 {
		t.Errorf("%d single deletions and %d deletecollections; want the first alone and the three that waited in one", s, c)
	}
	if got, want := remaining(t, g), map[string]bool{"b-again": true, "e": true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("left on the worker: %v, want %v", got, want)
	}
	if len(d.lanes) != 0 {
		t.Errorf("lanes left after the deletions: %v", d.lanes)
	}
}

func TestADeletionWhoseContextEndsLeavesItsLane(t *testing.T) {
	jobs := []*batchv1.Job{dispatchedJob("a", "wl-a", 1), dispatchedJob("b", "wl-b", 1), dispatchedJob("c", "wl-c", 1)}
	g := newGatedWorker(t, false, jobs[0], jobs[1], jobs[2])
	gone, cancel := context.WithCancel(context.Background())
	ctxs := []context.Context{context.Background(), gone, context.Background()}
	var d deletions
	// b waits behind a, then gives up before the gate opens; c alone goes after a.
	out := deleteAll(&d, g, ctxs, jobs, func() {
		waitForWaiting(t, &d, 2)
		cancel()
		waitForWaiting(t, &d, 1)
	})
	if out[1].deleted || !errors.Is(out[1].err, context.Canceled) {
		t.Errorf("the deletion that gave up: deleted %v, %v; want context.Canceled", out[1].deleted, out[1].err)
	}
	if !out[0].deleted || !out[2].deleted {
		t.Errorf("the others: %+v; want both deleted", out)
	}
	if got := remaining(t, g); !got["b"] || len(got) != 1 {
		t.Errorf("left on the worker: %v, want b alone", got)
	}
	if c := g.collections.Load(); c != 0 {
		t.Errorf("%d deletecollections for a batch of one; want a single deletion", c)
	}
}

func TestRefusedDeleteCollectionDeletesOneByOne(t *testing.T) {
	jobs := []*batchv1.Job{dispatchedJob("a", "wl-a", 1), dispatchedJob("b", "wl-b", 1), dispatchedJob("c", "wl-c", 1)}
	g := newGatedWorker(t, true, jobs[0], jobs[1], jobs[2], dispatchedJob("d", "wl-d", 1))
	ctxs := []context.Context{context.Background(), context.Background(), context.Background()}
	var d deletions
	for i, o := range deleteAll(&d, g, ctxs, jobs, func() { waitForWaiting(t, &d, 2) }) {
		if !o.deleted || o.err != nil {
			t.Errorf("job %s: deleted %v, %v; want deleted", jobs[i].Name, o.deleted, o.err)
		}
	}
	if s, c := g.singles.Load(), g.collections.Load(); s != 3 || c != 1 {
		t.Errorf("%d single deletions and %d deletecollections; want one refused collection and three singles", s, c)
	}
	// From then on the worker's deletions go one by one, without asking again.
	if deleted, err := d.delete(context.Background(), g, "w", dispatchedJob("d", "wl-d", 1), true); !deleted || err != nil {
		t.Errorf("the next deletion: %v, %v", deleted, err)
	}
	if c := g.collections.Load(); c != 1 {
		t.Errorf("%d deletecollections; the worker that refused one was asked again", c)
	}
}

func TestObjectsWithoutTheirDispatchAreDeletedAlone(t *testing.T) {
	old := dispatchedJob("old", "wl-old", 1)
	delete(old.Labels, gantry.DispatchLabel) // made before the label
	g := newGatedWorker(t, false, old)
	close(g.gate)
	var d deletions
	if deleted, err := d.delete(context.Background(), g, "w", old, true); !deleted || err != nil {
		t.Errorf("deleted %v, %v", deleted, err)
	}
	if len(d.lanes) != 0 || g.collections.Load() != 0 {
		t.Errorf("a deletion without a dispatch went through a lane")
	}
}
