package jobkind

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func replicatedJob(name string, replicas, parallelism int32, gpus string) jobset.ReplicatedJob {
	return jobset.ReplicatedJob{Name: name, Replicas: replicas, Template: batchv1.JobTemplateSpec{
		Spec: batchv1.JobSpec{Parallelism: ptr.To(parallelism), Completions: ptr.To(parallelism),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"role": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{gantry.GPUResource: resource.MustParse(gpus)}}}}},
			}}}}
}

func trainingJobSet() *jobset.JobSet {
	js := &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: "js-uid",
			Labels:      map[string]string{gantry.QueueLabel: "gpu"},
			Annotations: map[string]string{gantry.GPUProductsAnnotation: "NVIDIA-H100-80GB-HBM3", gantry.TopologyKeyAnnotation: "rack"}},
		Spec: jobset.JobSetSpec{ManagedBy: ptr.To(gantry.JobManagedBy), Suspend: ptr.To(true), TTLSecondsAfterFinished: ptr.To[int32](60),
			ReplicatedJobs: []jobset.ReplicatedJob{replicatedJob("driver", 1, 1, "0"), replicatedJob("workers", 2, 4, "8")}},
	}
	// The driver runs on any GPU product: its Job template says so for its pod set alone.
	js.Spec.ReplicatedJobs[0].Template.Annotations = map[string]string{gantry.GPUProductsAnnotation: "NVIDIA-A100-SXM4-80GB,NVIDIA-L4"}
	return js
}

// A JobSet is one workload: a pod set per replicated job of replicas times parallelism pods, each with
// its own GPU products where its Job template names them, the JobSet's otherwise; one topology key. A
// replicated job that dependsOn another is deferred: JobSet creates it once that one is ready.
func TestJobSetWorkload(t *testing.T) {
	js := trainingJobSet()
	js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Name: "driver", Status: jobset.DependencyReady}}
	wl, err := NewWorkload(JobSet{}, js, 10)
	if err != nil {
		t.Fatal(err)
	}
	if wl.Name != "jobset-train" || wl.Spec.JobKind != gantry.JobKindJobSet || wl.Spec.TopologyKey != "rack" || wl.Labels[gantry.JobNameLabel] != "train" {
		t.Fatalf("workload %s kind %s topology %q labels %v", wl.Name, wl.Spec.JobKind, wl.Spec.TopologyKey, wl.Labels)
	}
	if ref := metav1.GetControllerOf(wl); ref == nil || ref.Kind != "JobSet" || ref.APIVersion != "jobset.x-k8s.io/v1alpha2" || ref.UID != "js-uid" {
		t.Fatalf("owner %+v", ref)
	}
	type set struct {
		Name     string
		Count    int32
		Products []string
		Deferred bool
	}
	var got []set
	for _, ps := range wl.Spec.PodSets {
		got = append(got, set{ps.Name, ps.Count, ps.GPUProducts, ps.Deferred})
	}
	want := []set{{"driver", 1, []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-L4"}, false}, {"workers", 8, []string{"NVIDIA-H100-80GB-HBM3"}, true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod sets (-want +got):\n%s", diff)
	}
	if k, name, ok := ParseWorkloadName(wl.Name); !ok || k.Name() != gantry.JobKindJobSet || name != "train" {
		t.Errorf("ParseWorkloadName(%s) = %v %s %v", wl.Name, k, name, ok)
	}
	if JobName(wl) != "train" || Of(wl).Name() != gantry.JobKindJobSet {
		t.Errorf("JobName %s, kind %s", JobName(wl), Of(wl).Name())
	}
}

func TestJobSetsGantryCannotDispatch(t *testing.T) {
	cases := map[string]func(*jobset.JobSet){
		"no replicated jobs": func(js *jobset.JobSet) { js.Spec.ReplicatedJobs = nil },
		"too many pod sets": func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, make([]jobset.ReplicatedJob, 8)...)
		},
		"a bad product": func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[1].Template.Annotations = map[string]string{gantry.GPUProductsAnnotation: "a,,b"}
		},
		"no pods in a set":   func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](0) },
		"a bad topology key": func(js *jobset.JobSet) { js.Annotations[gantry.TopologyKeyAnnotation] = "rack/" },
	}
	for name, spoil := range cases {
		js := trainingJobSet()
		spoil(js)
		if _, err := NewWorkload(JobSet{}, js, 0); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// On the worker the JobSet controller runs it: not managed by Gantry, not suspended, no TTL; labelled
// as Gantry's on the JobSet, its Job templates and pod templates, each pod naming its pod set and held
// to that set's admission.
func TestJobSetRemote(t *testing.T) {
	hub := trainingJobSet()
	labels := map[string]string{gantry.WorkloadUIDLabel: "wl-uid", gantry.DispatchEpochLabel: "2"}
	pinned := map[string]string{}
	remote := JobSet{}.Remote(hub, nil, labels, func(podSet string, tpl *corev1.PodTemplateSpec) {
		pinned[podSet] = tpl.Labels[gantry.PodSetLabel]
		tpl.Spec.NodeSelector = map[string]string{"pool": podSet}
	}).(*jobset.JobSet)
	if remote.Spec.ManagedBy != nil || ptr.Deref(remote.Spec.Suspend, true) || remote.Spec.TTLSecondsAfterFinished != nil {
		t.Errorf("not runnable on the worker: managedBy %v suspend %v ttl %v", remote.Spec.ManagedBy, remote.Spec.Suspend, remote.Spec.TTLSecondsAfterFinished)
	}
	if remote.Labels[gantry.WorkloadUIDLabel] != "wl-uid" || remote.Labels[gantry.QueueLabel] != "gpu" || remote.Name != "train" || remote.Namespace != "team-a" {
		t.Errorf("object %s/%s labels %v", remote.Namespace, remote.Name, remote.Labels)
	}
	for _, rj := range remote.Spec.ReplicatedJobs {
		pod := rj.Template.Spec.Template
		if rj.Template.Labels[gantry.WorkloadUIDLabel] != "" || pod.Labels[gantry.WorkloadUIDLabel] != "wl-uid" ||
			pod.Labels[gantry.PodSetLabel] != rj.Name || pod.Labels["role"] != rj.Name || pod.Spec.NodeSelector["pool"] != rj.Name {
			t.Errorf("%s: job labels %v, pod labels %v, node selector %v", rj.Name, rj.Template.Labels, pod.Labels, pod.Spec.NodeSelector)
		}
	}
	if diff := cmp.Diff(map[string]string{"driver": "driver", "workers": "workers"}, pinned); diff != "" {
		t.Errorf("edited pod sets (-want +got):\n%s", diff)
	}
	if !ptr.Deref(hub.Spec.Suspend, false) || hub.Spec.ReplicatedJobs[1].Template.Spec.Template.Labels[gantry.PodSetLabel] != "" {
		t.Error("the hub's JobSet was modified")
	}
}

func TestJobSetState(t *testing.T) {
	cond := func(t jobset.JobSetConditionType) []metav1.Condition {
		return []metav1.Condition{{Type: string(t), Status: metav1.ConditionTrue}}
	}
	cases := map[string]struct {
		status jobset.JobSetStatus
		want   State
	}{
		"new":       {want: State{}},
		"running":   {status: jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "workers", Active: 2}}}, want: State{Started: true}},
		"completed": {status: jobset.JobSetStatus{Conditions: cond(jobset.JobSetCompleted)}, want: State{Started: true, Finished: true, Succeeded: true}},
		"failed":    {status: jobset.JobSetStatus{Conditions: cond(jobset.JobSetFailed)}, want: State{Started: true, Finished: true}},
		"suspended": {status: jobset.JobSetStatus{Conditions: cond(jobset.JobSetSuspended)}, want: State{}},
	}
	for name, tc := range cases {
		js := &jobset.JobSet{Status: tc.status}
		if got := (JobSet{}).State(js); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
	if !(JobSet{}).State(&jobset.JobSet{Spec: jobset.JobSetSpec{Suspend: ptr.To(true)}}).Suspended {
		t.Error("spec.suspend not read")
	}
}

// Gantry ends a JobSet as the JobSet controller would: Failed, with its reason, terminal state Failed;
// one that finished keeps its status. Mirroring and clearing change only what differs.
func TestJobSetStatusWrites(t *testing.T) {
	now := metav1.Now()
	js := trainingJobSet()
	if !(JobSet{}).Fail(js, gantry.ReasonRemoteJobLost, "gone", now) {
		t.Fatal("not failed")
	}
	c := apimeta.FindStatusCondition(js.Status.Conditions, string(jobset.JobSetFailed))
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != gantry.ReasonRemoteJobLost || js.Status.TerminalState != string(jobset.JobSetFailed) {
		t.Fatalf("status %+v", js.Status)
	}
	if (JobSet{}).Fail(js, gantry.ReasonRemoteJobLost, "again", now) {
		t.Error("a finished JobSet failed again")
	}
	worker := &jobset.JobSet{Status: jobset.JobSetStatus{Restarts: 1, ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "workers", Ready: 2}}}}
	hub := trainingJobSet()
	if !(JobSet{}).CopyStatus(hub, worker) || hub.Status.Restarts != 1 || (JobSet{}).CopyStatus(hub, worker) {
		t.Errorf("mirror: %+v", hub.Status)
	}
	if !(JobSet{}).ClearStatus(hub) || (JobSet{}).ClearStatus(hub) {
		t.Error("clear")
	}
}

func TestKinds(t *testing.T) {
	var names []gantry.JobKind
	for _, k := range All() {
		names = append(names, k.Name())
		if got, ok := ForObject(k.New()); !ok || got.Name() != k.Name() {
			t.Errorf("ForObject(%T) = %v, %v", k.New(), got, ok)
		}
		// Every kind's resource is its kind's regular plural, in its group and version.
		if plural, _ := apimeta.UnsafeGuessKindToResource(k.GroupVersionKind()); k.Resource() != plural {
			t.Errorf("%s: resource %v, want %v", k.Name(), k.Resource(), plural)
		}
	}
	if diff := cmp.Diff([]gantry.JobKind{gantry.JobKindJob, gantry.JobKindJobSet, gantry.JobKindRayJob, gantry.JobKindTrainJob}, names); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	if k, ok := Named(""); !ok || k.Name() != gantry.JobKindJob {
		t.Error(`"" is not a batch Job`)
	}
	if _, ok := ForObject(&gantry.Workload{}); ok {
		t.Error("a Workload is a kind of job")
	}
	if _, _, ok := ParseWorkloadName("train"); ok {
		t.Error("a name without a kind's prefix parsed")
	}
}
