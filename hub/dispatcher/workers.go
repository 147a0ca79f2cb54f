package dispatcher

import (
	"strconv"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/hub/remote"
)

// Workers are the connected worker clusters, as the dispatcher reaches them; *remote.Manager is the
// real one.
type Workers interface {
	// Worker returns the connected cluster of that name.
	Worker(name string) (remote.Worker, bool)
	// Tried says whether the hub has tried to connect the cluster since it started.
	Tried(name string) bool
}

// snapshotClusters are the worker clusters as dispatch.Plan sees them: what their objects say
// (clusterOf), and what the hub's connections to them say.
func snapshotClusters(clusters []gantry.WorkerCluster, workers Workers) map[string]dispatch.Cluster {
	out := make(map[string]dispatch.Cluster, len(clusters))
	for i := range clusters {
		c := clusterOf(&clusters[i])
		w, connected := workers.Worker(c.Name)
		c.Connected, c.Connecting = connected, !connected && !workers.Tried(c.Name)
		if connected {
			c.Kinds = kindSet(w.Kinds())
		}
		out[c.Name] = c
	}
	return out
}

// clusterOf is what dispatch.Plan reads of a WorkerCluster object; the connection adds the rest. An
// update of the object that changes it asks for a pass (ChangesAPass).
func clusterOf(wc *gantry.WorkerCluster) dispatch.Cluster {
	return dispatch.Cluster{
		Name:       wc.Name,
		AgentReady: apimeta.IsStatusConditionTrue(wc.Status.Conditions, gantry.ClusterAgentReady),
		Cordoned:   wc.Spec.Cordoned,
		Fenced:     wc.Spec.Fenced,
		GPUs:       dispatch.GPUCapacityOf(wc.Status.Capacity),
		Resources:  dispatch.ResourceRoomOf(wc.Status.Capacity),
		Labels:     wc.Labels,
		Price:      dispatch.PriceOf(wc.Spec.Price),
	}
}

func kindSet(kinds []gantry.JobKind) map[string]bool {
	if kinds == nil {
		return nil
	}
	out := make(map[string]bool, len(kinds))
	for _, k := range kinds {
		out[string(k)] = true
	}
	return out
}

// currentCopy is the workload's copy on the cluster if it belongs to the workload's current epoch.
// Copies of other epochs or of another Workload of the same name are fenced: nil.
func currentCopy(wl *gantry.Workload, cluster string, workers Workers) *gantry.Workload {
	w, ok := workers.Worker(cluster)
	if !ok {
		return nil
	}
	cp := w.CopyInPlace(client.ObjectKeyFromObject(wl))
	if cp == nil || cp.Labels[gantry.WorkloadUIDLabel] != string(wl.UID) ||
		cp.Labels[gantry.DispatchEpochLabel] != strconv.FormatInt(wl.Status.DispatchEpoch, 10) {
		return nil
	}
	return cp
}

// observeCopies reads the copies of the workload's current epoch on its nominated clusters.
func observeCopies(wl *gantry.Workload, workers Workers) []dispatch.Copy {
	var out []dispatch.Copy
	for _, c := range wl.Status.Nominated() {
		cp := currentCopy(wl, c, workers)
		if cp == nil {
			continue
		}
		cond := apimeta.FindStatusCondition(cp.Status.Conditions, gantry.WorkloadAdmitted)
		if cond == nil {
			continue
		}
		switch {
		case cond.Status == metav1.ConditionTrue:
			out = append(out, dispatch.Copy{Cluster: c, Admitted: true, AdmittedAt: cond.LastTransitionTime.Time})
		case gantry.RejectsCluster(cond.Reason):
			out = append(out, dispatch.Copy{Cluster: c, Rejected: true, Reason: cond.Reason, Message: cond.Message})
		case cond.Reason == gantry.ReasonReservationExpired:
			out = append(out, dispatch.Copy{Cluster: c, Expired: true, Reason: cond.Reason, Message: cond.Message})
		case cond.ObservedGeneration == cp.Generation:
			out = append(out, dispatch.Copy{Cluster: c, Waiting: true, Reason: cond.Reason, Message: cond.Message,
				WouldFitWithout: cp.Status.WouldFitWithout})
		}
	}
	return out
}

// jobRef is the hub's job a Workload stands for, of whatever kind, for Events: its controller owner,
// as the owner reference names it. Nil when it has none.
func jobRef(wl *gantry.Workload) client.Object {
	ref := metav1.GetControllerOf(wl)
	if ref == nil {
		return nil
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: ref.APIVersion, Kind: ref.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: ref.Name, UID: ref.UID},
	}
}

// Follow feeds the queue manager from the events of the hub's Workload informer, and asks for a pass on
// each. Passes wait until the informer has delivered what it listed.
func (d *Dispatcher) Follow(inf cache.Informer) error {
	d.init()
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { d.noteEvent(obj, false) },
		UpdateFunc: func(_, obj any) { d.noteEvent(obj, false) },
		DeleteFunc: func(obj any) { d.noteEvent(obj, true) },
	})
	if err != nil {
		return fmt.Errorf("following Workloads: %w", err)
	}
	synced := reg.HasSynced
	d.follows.Store(&synced)
	return nil
}

// following is what says whether the informer the manager follows has delivered what it listed; nil
// when it follows none.
func (d *Dispatcher) following() func() bool {
	if f := d.follows.Load(); f != nil {
		return *f
	}
	return nil
}

// noteEvent tells the queue manager of the Workload of an informer event, and asks for a pass.
func (d *Dispatcher) noteEvent(obj any, deleted bool) {
	switch o := obj.(type) {
	case *gantry.Workload:
		key := keyOf(o)
		if deleted {
			o = nil
		}
		d.queues.WorkloadChanged(key, o)
	case toolscache.DeletedFinalStateUnknown:
		d.queues.WorkloadChanged(o.Key, nil)
	}
	d.Trigger()
}

// observeCopies reads the copies of the workload's current epoch on its nominated clusters.
func (d *Dispatcher) observeCopies(wl *gantry.Workload) []dispatch.Copy {
	return observeCopies(wl, d.Workers)
}

// keyOf is the Workload's key in the queue manager and in the dispatcher's writes: namespace/name.
func keyOf(wl *gantry.Workload) string { return wl.Namespace + "/" + wl.Name }
