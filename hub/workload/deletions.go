package workload

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/remote"
)

// deletions sends the controller's deletions of copies and Jobs on workers, as a group commit: a
// deletion goes at once when no other of its lane (worker, namespace, resource, propagation) is in
// flight, as one request guarded by the object's UID; those that come while one is in flight wait for
// it, then go together as one deletecollection that selects their dispatches (gantry.dev/dispatch),
// which match those objects and nothing else. A burst's deletions cost a request per round trip and
// lane, not one per object; a lone one waits for nothing.
type deletions struct {
	mu    sync.Mutex
	lanes map[lane]*laneState
	// unbatched are the workers where the hub may not deletecollection: it deletes one by one there.
	unbatched sync.Map
}

// maxBatch bounds the dispatches one deletecollection selects, and so the length of its URL.
const maxBatch = 50

// batchTimeout bounds a batch's request: it is sent for several reconciles, whatever becomes of the
// one that sends it.
const batchTimeout = 30 * time.Second

type lane struct {
	cluster, namespace string
	copies             bool // copies, else batch Jobs
	foreground         bool
}

type laneState struct {
	busy    bool
	waiting []*deletion
}

// deletion is one object's deletion waiting in its lane; done is closed when it was sent, and err and
// deleted are then its outcome. batch, set before done is closed, makes it the one that sends its batch.
type deletion struct {
	obj     client.Object
	done    chan struct{}
	batch   []*deletion
	deleted bool
	err     error
}

// laneOf is the deletion's lane, and false for an object that is deleted alone: a kind other than a
// copy or a batch Job, one created before DispatchLabel, or a worker where batches are refused.
func (d *deletions) laneOf(cluster string, obj client.Object, foreground bool) (lane, bool) {
	if obj.GetLabels()[gantry.DispatchLabel] == "" {
		return lane{}, false
	}
	if _, refused := d.unbatched.Load(cluster); refused {
		return lane{}, false
	}
	l := lane{cluster: cluster, namespace: obj.GetNamespace(), foreground: foreground}
	switch obj.(type) {
	case *gantry.Workload:
		l.copies = true
	case *batchv1.Job:
	default:
		return lane{}, false
	}
	return l, true
}

// delete deletes exactly the object that was read and says whether it was deleted, as deleteExact,
// going with others of its lane when one is in flight (then deleted means the batch went through).
func (d *deletions) delete(ctx context.Context, w remote.Worker, cluster string, obj client.Object, foreground bool) (bool, error) {
	l, ok := d.laneOf(cluster, obj, foreground)
	if !ok {
		return deleteExact(ctx, w, cluster, obj, foreground)
	}
	d.mu.Lock()
	if d.lanes == nil {
		d.lanes = map[lane]*laneState{}
	}
	st := d.lanes[l]
	if st == nil {
		st = &laneState{}
		d.lanes[l] = st
	}
	if !st.busy {
		st.busy = true
		d.mu.Unlock()
		deleted, err := deleteExact(ctx, w, cluster, obj, foreground)
		d.next(l)
		return deleted, err
	}
	del := &deletion{obj: obj, done: make(chan struct{})}
	st.waiting = append(st.waiting, del)
	d.mu.Unlock()
	return d.await(ctx, w, l, del)
}

// await waits for the deletion's turn, and sends its batch when it is the one to. A deletion whose
// context ends before its batch is taken leaves the lane.
func (d *deletions) await(ctx context.Context, w remote.Worker, l lane, del *deletion) (bool, error) {
	select {
	case <-del.done:
	case <-ctx.Done():
		d.mu.Lock()
		if st := d.lanes[l]; st != nil {
			if i := slices.Index(st.waiting, del); i >= 0 {
				st.waiting = slices.Delete(st.waiting, i, i+1)
				d.mu.Unlock()
				return false, ctx.Err()
			}
		}
		d.mu.Unlock()
		<-del.done // taken into a batch: it goes, and this one learns how
	}
	if del.batch != nil {
		d.send(ctx, w, l, del.batch)
		d.next(l)
	}
	return del.deleted, del.err
}

// next hands the lane to the deletions that waited while it was busy: the first of them sends them
// all; none waiting, the lane is free.
func (d *deletions) next(l lane) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.lanes[l]
	if len(st.waiting) == 0 {
		delete(d.lanes, l)
		return
	}
	n := min(len(st.waiting), maxBatch)
	batch := slices.Clone(st.waiting[:n])
	st.waiting = slices.Delete(st.waiting, 0, n)
	batch[0].batch = batch
	close(batch[0].done)
}

// send deletes the batch's objects, one request for all where there are several, and closes the
// others' done with the outcome. Refused the right to deletecollection, it deletes them one by one,
// and from then on deletes one by one on that worker.
func (d *deletions) send(ctx context.Context, w remote.Worker, l lane, batch []*deletion) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	defer cancel()
	alone := len(batch) == 1
	var err error
	if !alone {
		err = deleteDispatches(ctx, w, l, batch)
		if apierrors.IsForbidden(err) {
			d.unbatched.Store(l.cluster, true)
		}
	}
	for _, del := range batch {
		switch {
		case alone || apierrors.IsForbidden(err):
			del.deleted, del.err = deleteExact(ctx, w, l.cluster, del.obj, l.foreground)
		case err != nil:
			del.err = fmt.Errorf("deleting %T %s on %s with %d others: %w", del.obj, client.ObjectKeyFromObject(del.obj), l.cluster, len(batch)-1, err)
		default:
			del.deleted = true
		}
		if del != batch[0] {
			close(del.done)
		}
	}
}

// deleteDispatches deletes, in one request, the objects of the lane whose dispatches the batch names.
func deleteDispatches(ctx context.Context, w remote.Worker, l lane, batch []*deletion) error {
	values := make([]string, len(batch))
	for i, del := range batch {
		values[i] = del.obj.GetLabels()[gantry.DispatchLabel]
	}
	req, err := labels.NewRequirement(gantry.DispatchLabel, selection.In, values)
	if err != nil {
		return err
	}
	var obj client.Object = &batchv1.Job{}
	if l.copies {
		obj = &gantry.Workload{}
	}
	policy := metav1.DeletePropagationBackground
	if l.foreground {
		policy = metav1.DeletePropagationForeground
	}
	return w.Writer().DeleteAllOf(ctx, obj, client.InNamespace(l.namespace),
		client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)}, client.PropagationPolicy(policy))
}
