package hubtest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func gpus(n string) corev1.ResourceList {
	return corev1.ResourceList{gantry.GPUResource: resource.MustParse(n)}
}

func TestMakeWorkload(t *testing.T) {
	t1 := T0.Add(time.Hour)
	controller := true
	got := MakeWorkload("train", "team-a").UID("u1").Generation(2).Queue("q").OwnedByJob("train", "job-u1").
		PodSet("main", 2, gantry.GPUResource, "4").GPUProducts("H100", "A100").
		Nominated("gpus", 3, "w1", "w2").Now(t1).AdmittedOn("w1").JobCreated().Deleting().Obj()
	want := &gantry.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: "u1", Generation: 2,
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job-u1", Controller: &controller}},
			DeletionTimestamp: &metav1.Time{Time: t1}, Finalizers: []string{gantry.WorkloadFinalizer}},
		Spec: gantry.WorkloadSpec{QueueName: "q",
			PodSets: []gantry.PodSet{{Name: "main", Count: 2, Requests: gpus("4"), GPUProducts: []string{"H100", "A100"}}}},
		Status: gantry.WorkloadStatus{GlobalQueue: "gpus", DispatchEpoch: 3, NominatedClusters: []string{"w1", "w2"}, ClusterName: "w1",
			Conditions: []metav1.Condition{
				{Type: gantry.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: gantry.ReasonAdmittedByCluster, ObservedGeneration: 2,
					LastTransitionTime: metav1.NewTime(t1)},
				{Type: gantry.WorkloadJobCreated, Status: metav1.ConditionTrue, Reason: gantry.ReasonJobCreated, ObservedGeneration: 2,
					LastTransitionTime: metav1.NewTime(t1)},
			}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Workload (-want +got):\n%s", diff)
	}
}

// A Workload's records of what happened to it carry the times they are given, or Now's.
func TestWorkloadRecords(t *testing.T) {
	since := T0.Add(-time.Minute)
	wl := MakeWorkload("train", "team-a").Finalizer(gantry.WorkloadFinalizer).
		RejectedBy("w2", gantry.ReasonNeverFits, "too big", since).
		Evicted("w1", 1, gantry.ReasonPlacementTimeout, since).
		Preempted("w1", 2, "team-a/urgent", gantry.ReasonInQueuePriority).
		Refusing("quota exceeded", since).Deleting().Obj()
	if want := []string{gantry.WorkloadFinalizer}; !cmp.Equal(want, wl.Finalizers) {
		t.Errorf("finalizers %v, want %v: Deleting adds none it holds", wl.Finalizers, want)
	}
	if r := wl.Status.RejectedClusters; len(r) != 1 || r[0].Name != "w2" || !r[0].Time.Equal(&metav1.Time{Time: since}) {
		t.Errorf("rejections %+v", r)
	}
	if e := wl.Status.Evictions; len(e) != 1 || e[0].Epoch != 1 || e[0].Reason != gantry.ReasonPlacementTimeout {
		t.Errorf("evictions %+v", e)
	}
	if p := wl.Status.Preemption; p == nil || p.Cluster != "w1" || p.Epoch != 2 || p.Message != "preempted on w1 to make room for team-a/urgent" ||
		!p.Time.Time.Equal(T0) {
		t.Errorf("preemption %+v", p)
	}
	if c := wl.Status.Conditions; len(c) != 1 || c[0].Status != metav1.ConditionFalse || c[0].Reason != gantry.ReasonWorkerRefusing ||
		!c[0].LastTransitionTime.Time.Equal(since) {
		t.Errorf("conditions %+v, want JobCreated=False (WorkerRefusing) since %v", c, since)
	}
}

func TestMakeCopyOf(t *testing.T) {
	wl := MakeWorkload("train", "team-a").UID("u1").Obj()
	got := MakeCopyOf(wl, 12).Generation(3).Admitted().Since(T0).Obj()
	want := &gantry.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", Generation: 3,
			Labels: map[string]string{gantry.WorkloadUIDLabel: "u1", gantry.DispatchEpochLabel: "12"}},
		Status: gantry.WorkloadStatus{Conditions: []metav1.Condition{{Type: gantry.WorkloadAdmitted, Status: metav1.ConditionTrue,
			Reason: gantry.ReasonFits, ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(T0)}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("copy (-want +got):\n%s", diff)
	}
}

func TestMakeGlobalQueue(t *testing.T) {
	weight := int32(3)
	got := MakeGlobalQueue("research").Select("team", "a").Cluster("w1", gantry.GPUResource, "8").BorrowingLimit(gantry.GPUResource, "4").
		Cluster("w2").Cohort("lab").Weight(3).Strategy(gantry.StrictFIFO).PreemptWithinQueue(gantry.PreemptLowerPriority).
		Score(gantry.ScorePreference, 2).PreferredClusters("w2").Obj()
	want := &gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: gantry.GlobalQueueSpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
		Clusters:          []gantry.ClusterQuota{{Name: "w1", Quota: gpus("8"), BorrowingLimit: gpus("4")}, {Name: "w2"}},
		Cohort:            "lab", FairSharing: gantry.FairSharing{Weight: &weight}, QueueingStrategy: gantry.StrictFIFO,
		Preemption: gantry.PreemptionPolicy{WithinQueue: gantry.PreemptLowerPriority},
		Dispatch:   gantry.DispatchPolicy{Scores: []gantry.DispatchScore{{Name: gantry.ScorePreference, Weight: 2}}, PreferredClusters: []string{"w2"}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GlobalQueue (-want +got):\n%s", diff)
	}
	if all := MakeGlobalQueue("all").SelectAll().Obj(); all.Spec.NamespaceSelector == nil || len(all.Spec.NamespaceSelector.MatchLabels) > 0 {
		t.Errorf("SelectAll: selector %v, want an empty one", all.Spec.NamespaceSelector)
	}
}

func TestMakeQueueAndCohort(t *testing.T) {
	if diff := cmp.Diff(&gantry.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "team-a"}, Spec: gantry.QueueSpec{GlobalQueue: "gpus"}},
		MakeQueue("q", "team-a").GlobalQueue("gpus").Obj()); diff != "" {
		t.Errorf("Queue (-want +got):\n%s", diff)
	}
	weight := int32(2)
	want := &gantry.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: gantry.CohortSpec{Parent: "org",
		Clusters:    []gantry.CohortClusterQuota{{Name: "w1", Quota: gpus("4"), LendingLimit: gpus("2")}},
		FairSharing: gantry.FairSharing{Weight: &weight}}}
	if diff := cmp.Diff(want, MakeCohort("team-a").Parent("org").Cluster("w1", gantry.GPUResource, "4").LendingLimit(gantry.GPUResource, "2").Weight(2).Obj()); diff != "" {
		t.Errorf("Cohort (-want +got):\n%s", diff)
	}
}

func TestMakeWorkerCluster(t *testing.T) {
	got := MakeWorkerCluster("w1").KubeconfigSecret("w1-kubeconfig").Connected().AgentReady().GPUs("A100", 2, 8, 5).Cordoned().Obj()
	want := &gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w1"},
		Spec: gantry.WorkerClusterSpec{KubeconfigSecretRef: &gantry.SecretReference{Name: "w1-kubeconfig"}, Cordoned: true},
		Status: gantry.WorkerClusterStatus{
			Conditions: []metav1.Condition{
				{Type: gantry.ClusterConnected, Status: metav1.ConditionTrue, Reason: gantry.ReasonConnected, LastTransitionTime: metav1.NewTime(T0)},
				{Type: gantry.ClusterAgentReady, Status: metav1.ConditionTrue, Reason: gantry.ReasonAgentReporting, LastTransitionTime: metav1.NewTime(T0)},
			},
			Capacity: &gantry.CapacitySummary{GPUProducts: []gantry.GPUProductCapacity{{Product: "A100", Nodes: 2, Allocatable: 16, Free: 5,
				LargestFreeOnNode: 5, LargestAllocatableOnNode: 8}}},
		}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WorkerCluster (-want +got):\n%s", diff)
	}
}

// A copy's chain goes on through the setters it shares with the hub's Workload, to those of its own.
func TestCopySharesTheWorkloadSetters(t *testing.T) {
	got := MakeCopy("train", "team-a", "u1", 2).UID("c1").Queue("q").PodSet("main", 2, gantry.GPUResource, "4").Deferred().
		NodeSelector("zone", "a").Admitted().Obj()
	want := &gantry.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: "c1",
			Labels: map[string]string{gantry.WorkloadUIDLabel: "u1", gantry.DispatchEpochLabel: "2"}},
		Spec: gantry.WorkloadSpec{QueueName: "q", PodSets: []gantry.PodSet{{Name: "main", Count: 2, Requests: gpus("4"), Deferred: true,
			NodeSelector: map[string]string{"zone": "a"}}}},
		Status: gantry.WorkloadStatus{Conditions: []metav1.Condition{{Type: gantry.WorkloadAdmitted, Status: metav1.ConditionTrue,
			Reason: gantry.ReasonFits}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("copy (-want +got):\n%s", diff)
	}
}

func TestSelectNamespaces(t *testing.T) {
	got := MakeGlobalQueue("tenant-a").SelectNamespaces("team-a", "team-b").Obj().Spec.NamespaceSelector
	want := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: corev1.LabelMetadataName,
		Operator: metav1.LabelSelectorOpIn, Values: []string{"team-a", "team-b"}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("selector (-want +got):\n%s", diff)
	}
}

// Objects the API server names, and a WorkerCluster registered through a ClusterProfile.
func TestGenerateNameAndClusterProfile(t *testing.T) {
	want := metav1.ObjectMeta{GenerateName: "invalid-"}
	for kind, got := range map[string]metav1.ObjectMeta{
		"GlobalQueue":   MakeGlobalQueue("").GenerateName("invalid-").Obj().ObjectMeta,
		"Cohort":        MakeCohort("").GenerateName("invalid-").Obj().ObjectMeta,
		"WorkerCluster": MakeWorkerCluster("").GenerateName("invalid-").Obj().ObjectMeta,
	} {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s metadata (-want +got):\n%s", kind, diff)
		}
	}
	if ref := MakeWorkerCluster("w1").ClusterProfile("p").Obj().Spec.ClusterProfileRef; ref == nil || ref.Name != "p" {
		t.Errorf("ClusterProfileRef %+v, want p", ref)
	}
}
