// Package remotetest has in-memory workers for unit tests of the hub's controllers.
package remotetest

import (
	"context"
	"slices"
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/jobkind"
)

// Worker is an in-memory worker cluster: one store (a controller-runtime fake client, which tests may
// build with interceptors to inject errors) seen through a cache that, like the real one, holds only
// copies and Gantry's Jobs.
type Worker struct {
	Store client.Client
}

var _ remote.Worker = &Worker{}

// Cached implements remote.Worker.
func (w *Worker) Cached() client.Reader { return gantryOnly{w.Store} }

// Live implements remote.Worker.
func (w *Worker) Live() client.Reader { return w.Store }

// Writer implements remote.Worker.
func (w *Worker) Writer() client.Writer { return w.Store }

// Serves implements remote.Worker: an in-memory worker serves every kind.
func (w *Worker) Serves(gantry.JobKind) bool { return true }

// Kinds implements remote.Worker: every kind.
func (w *Worker) Kinds() []gantry.JobKind {
	var out []gantry.JobKind
	for _, k := range jobkind.All() {
		out = append(out, k.Name())
	}
	return out
}

// CopyInPlace implements remote.Worker.
func (w *Worker) CopyInPlace(key types.NamespacedName) *gantry.Workload {
	var cp gantry.Workload
	if w.Cached().Get(context.Background(), key, &cp) != nil {
		return nil
	}
	return &cp
}

// HoldsCopy implements remote.Worker.
func (w *Worker) HoldsCopy(key types.NamespacedName) bool {
	return Holds(w.Cached(), &gantry.Workload{}, key)
}

// HoldsJob implements remote.Worker.
func (w *Worker) HoldsJob(kind gantry.JobKind, key types.NamespacedName) bool {
	k, ok := jobkind.Named(kind)
	return !ok || Holds(w.Cached(), k.New(), key)
}

// Holds tells whether the reader has an object of obj's kind under the key, as a cache would: for
// workers whose cache is another reader.
func Holds(r client.Reader, obj client.Object, key types.NamespacedName) bool {
	return !apierrors.IsNotFound(r.Get(context.Background(), key, obj))
}

// gantryOnly hides Jobs that do not carry Gantry's label, as the hub's worker caches do.
type gantryOnly struct{ client.Reader }

func (g gantryOnly) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := g.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if _, isJob := obj.(*batchv1.Job); isJob {
		if _, ok := obj.GetLabels()[gantry.WorkloadUIDLabel]; !ok {
			return apierrors.NewNotFound(batchv1.Resource("jobs"), key.Name)
		}
	}
	return nil
}

// Workers is a set of workers by name; the ones in Down count as not connected.
type Workers struct {
	ByName map[string]*Worker
	Down   []string
}

// Worker implements the hub's view of connected workers.
func (ws *Workers) Worker(name string) (remote.Worker, bool) {
	w, ok := ws.ByName[name]
	if !ok || slices.Contains(ws.Down, name) {
		return nil, false
	}
	return w, true
}

// Connected lists the connected workers' names in order.
func (ws *Workers) Connected() []string {
	var out []string
	for n := range ws.ByName {
		if !slices.Contains(ws.Down, n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
