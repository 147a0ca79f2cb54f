package dispatcher

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/ptr"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

type fakeCopies struct {
	connected map[string]bool
	copies    map[string]*gantry.Workload // by cluster
	byName    map[string]*gantry.Workload // by cluster/workload name, before copies
	kinds     map[string][]gantry.JobKind // by cluster; a connected cluster not listed runs batch Jobs only
	untried   map[string]bool             // clusters the hub has not tried to connect yet
}

// Worker implements Workers: the connected clusters, whose caches hold the copies.
func (f fakeCopies) Worker(c string) (remote.Worker, bool) {
	if !f.connected[c] {
		return nil, false
	}
	return fakeWorker{f: f, name: c}, true
}

func (f fakeCopies) Tried(c string) bool { return !f.untried[c] }

// fakeWorker is a connected cluster of fakeCopies; a pass reads only its copies and kinds.
type fakeWorker struct {
	remote.Worker // nil: a pass calls nothing else
	f             fakeCopies
	name          string
}

func (w fakeWorker) Kinds() []gantry.JobKind {
	if k, ok := w.f.kinds[w.name]; ok {
		return k
	}
	return []gantry.JobKind{gantry.JobKindJob}
}

func (w fakeWorker) CopyInPlace(key types.NamespacedName) *gantry.Workload {
	if cp, ok := w.f.byName[w.name+"/"+key.Name]; ok {
		return cp
	}
	return w.f.copies[w.name]
}

// at is when the tests' objects were made, and when the builders record what happened to them.
var at = metav1.NewTime(hubtest.T0)

// hubWorkload starts a Workload of 8 GPUs (two pods of 4) in namespace ns, created at at and submitted to
// queue.
func hubWorkload(ns, name, queue string) *hubtest.WorkloadWrapper {
	return hubtest.MakeWorkload(name, ns).UID("uid-"+name).Created(at.Time).Queue(queue).PodSet("main", 2, gantry.GPUResource, "4")
}

// The snapshot's clusters are the WorkerClusters with what the hub's connections to them say.
func TestSnapshotClustersTakeInTheConnections(t *testing.T) {
	got := snapshotClusters([]gantry.WorkerCluster{*hubtest.MakeWorkerCluster("w1").AgentReady().Obj(), *hubtest.MakeWorkerCluster("w2").Obj(),
		*hubtest.MakeWorkerCluster("w3").Obj()}, fakeCopies{connected: map[string]bool{"w1": true}, untried: map[string]bool{"w3": true}})
	want := map[string]dispatch.Cluster{"w1": {Name: "w1", Connected: true, AgentReady: true, Kinds: map[string]bool{"Job": true}},
		"w2": {Name: "w2"}, "w3": {Name: "w3", Connecting: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
}

func TestObserveCopiesFencesStaleCopies(t *testing.T) {
	wl := hubWorkload("ns", "w", "q").Nominated("", 2, "current", "stale", "stranger", "rejecting", "waiting", "lost").Obj()
	copies := fakeCopies{
		connected: map[string]bool{"current": true, "stale": true, "stranger": true, "rejecting": true, "waiting": true},
		copies: map[string]*gantry.Workload{
			"current":   hubtest.MakeCopyOf(wl, 2).Admitted().Since(at.Time).Obj(),
			"stale":     hubtest.MakeCopyOf(wl, 1).Admitted().Since(at.Time).Obj(),
			"stranger":  hubtest.MakeCopy(wl.Name, wl.Namespace, "an-older-workload", 2).Admitted().Since(at.Time).Obj(),
			"rejecting": hubtest.MakeCopyOf(wl, 2).Condition(metav1.ConditionFalse, gantry.ReasonNeverFits, "too big").Obj(),
			"waiting":   hubtest.MakeCopyOf(wl, 2).Condition(metav1.ConditionFalse, gantry.ReasonInsufficientResources, "later").Obj(),
		},
	}
	got := observeCopies(wl, copies)
	want := []dispatch.Copy{
		{Cluster: "current", Admitted: true, AdmittedAt: at.Time},
		{Cluster: "rejecting", Rejected: true, Reason: gantry.ReasonNeverFits, Message: "too big"},
		{Cluster: "waiting", Waiting: true, Reason: gantry.ReasonInsufficientResources, Message: "later"},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("observed copies (-want +got):\n%s", diff)
	}
}

// The dispatcher's Events go to the hub's job of any kind: the Workload's controller, as its owner
// reference names it, is what the event recorder refers to.
func TestJobRefIsTheWorkloadsControllerOfAnyKind(t *testing.T) {
	owned := func(refs ...metav1.OwnerReference) *gantry.Workload {
		return &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "jobset-train", OwnerReferences: refs}}
	}
	controller := func(apiVersion, kind, name string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}
	}
	for _, want := range []corev1.ObjectReference{
		{APIVersion: "batch/v1", Kind: "Job", Namespace: "team-a", Name: "train", UID: "uid-train"},
		{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Namespace: "team-a", Name: "train", UID: "uid-train"},
		{APIVersion: "ray.io/v1", Kind: "RayJob", Namespace: "team-a", Name: "train", UID: "uid-train"},
		{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Namespace: "team-a", Name: "train", UID: "uid-train"},
	} {
		notController := controller("v1", "ConfigMap", "other")
		notController.Controller = nil
		job := jobRef(owned(notController, controller(want.APIVersion, want.Kind, want.Name)))
		if job == nil {
			t.Fatalf("no job for a Workload owned by %s", want.Kind)
		}
		// The recorder's own way to an object's reference, with a scheme that knows none of the kinds.
		got, err := reference.GetReference(runtime.NewScheme(), job)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Errorf("reference (-want +got):\n%s", diff)
		}
	}
	if job := jobRef(owned()); job != nil {
		t.Errorf("a Workload without controller: %v, want none", job)
	}
}
