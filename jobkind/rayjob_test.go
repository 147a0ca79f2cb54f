package jobkind

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	ray "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func rayPod(gpus string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray", Image: "rayproject/ray:2.9.0",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gantry.GPUResource: resource.MustParse(gpus)}}}}}}
}

func trainingRayJob() *ray.RayJob {
	return &ray.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: "tune", Namespace: "team-a", Labels: map[string]string{gantry.QueueLabel: "gpu"}},
		Spec: ray.RayJobSpec{Suspend: true, Entrypoint: "python tune.py",
			DeletionStrategy: &ray.DeletionStrategy{},
			RayClusterSpec: &ray.RayClusterSpec{
				HeadGroupSpec: ray.HeadGroupSpec{Template: rayPod("0")},
				WorkerGroupSpecs: []ray.WorkerGroupSpec{
					{GroupName: "gpu", Replicas: ptr.To[int32](2), NumOfHosts: 2, Template: rayPod("8")},
					{GroupName: "idle", Replicas: ptr.To[int32](0), MinReplicas: ptr.To[int32](0), Template: rayPod("1")},
					{GroupName: "cpu", MinReplicas: ptr.To[int32](1), Template: rayPod("0")},
				}}}}
}

// A RayJob is one gang: its head, each worker group with pods (replicas times hosts), and the pod
// KubeRay submits the job from, with KubeRay's default template when the RayJob gives none.
func TestRayJobWorkload(t *testing.T) {
	wl, err := NewWorkload(RayJob{}, trainingRayJob(), 0)
	if err != nil {
		t.Fatal(err)
	}
	type set struct {
		Name     string
		Count    int32
		CPU      string
		Deferred bool
	}
	var got []set
	for _, ps := range wl.Spec.PodSets {
		cpu := ps.Requests[corev1.ResourceCPU]
		got = append(got, set{ps.Name, ps.Count, cpu.String(), ps.Deferred})
	}
	// KubeRay makes the submitter once the Ray cluster is ready.
	want := []set{{"head", 1, "0", false}, {"gpu", 4, "0", false}, {"cpu", 1, "0", false}, {"submitter", 1, "500m", true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod sets (-want +got):\n%s", diff)
	}
	if wl.Name != "rayjob-tune" || wl.Spec.JobKind != gantry.JobKindRayJob {
		t.Errorf("workload %s kind %s", wl.Name, wl.Spec.JobKind)
	}
	httpMode := trainingRayJob()
	httpMode.Spec.SubmissionMode = ray.HTTPMode
	if sets, _ := (RayJob{}).PodSets(httpMode); len(sets) != 3 {
		t.Errorf("HTTP mode: %d pod sets, want no submitter", len(sets))
	}
	selector := trainingRayJob()
	selector.Spec.RayClusterSpec, selector.Spec.ClusterSelector = nil, map[string]string{"ray.io/cluster": "shared"}
	if _, err := NewWorkload(RayJob{}, selector, 0); err == nil {
		t.Error("a RayJob on an existing Ray cluster was accepted")
	}
}

// On the worker KubeRay runs it: not managed by Gantry, not suspended, no deletion rules; every pod
// template (the submitter's written out) labelled and pinned.
func TestRayJobRemote(t *testing.T) {
	hub := trainingRayJob()
	labels := map[string]string{gantry.WorkloadUIDLabel: "wl-uid"}
	var edited []string
	rj := RayJob{}.Remote(hub, nil, labels, func(podSet string, tpl *corev1.PodTemplateSpec) {
		edited = append(edited, podSet)
		if tpl.Labels[gantry.PodSetLabel] != podSet || tpl.Labels[gantry.WorkloadUIDLabel] != "wl-uid" {
			t.Errorf("%s: labels %v", podSet, tpl.Labels)
		}
	}).(*ray.RayJob)
	if rj.Spec.Suspend || rj.Spec.DeletionStrategy != nil || rj.Labels[gantry.WorkloadUIDLabel] != "wl-uid" {
		t.Errorf("spec %+v labels %v", rj.Spec, rj.Labels)
	}
	if rj.Spec.SubmitterPodTemplate == nil || rj.Spec.SubmitterPodTemplate.Labels[gantry.PodSetLabel] != submitterPodSet ||
		rj.Spec.SubmitterPodTemplate.Spec.Containers[0].Image != "rayproject/ray:2.9.0" {
		t.Errorf("submitter template %+v", rj.Spec.SubmitterPodTemplate)
	}
	if diff := cmp.Diff([]string{"head", "gpu", "cpu", "submitter"}, edited); diff != "" {
		t.Errorf("edited (-want +got):\n%s", diff)
	}
	if !hub.Spec.Suspend || hub.Spec.SubmitterPodTemplate != nil {
		t.Error("the hub's RayJob was modified")
	}
}

func TestRayJobState(t *testing.T) {
	now := metav1.Now()
	cases := map[string]struct {
		status ray.RayJobStatus
		want   State
	}{
		"new":        {want: State{}},
		"running":    {status: ray.RayJobStatus{JobDeploymentStatus: ray.JobDeploymentStatusRunning, StartTime: &now}, want: State{Started: true}},
		"succeeded":  {status: ray.RayJobStatus{JobDeploymentStatus: ray.JobDeploymentStatusComplete, JobStatus: ray.JobStatusSucceeded}, want: State{Started: true, Finished: true, Succeeded: true}},
		"job failed": {status: ray.RayJobStatus{JobDeploymentStatus: ray.JobDeploymentStatusComplete, JobStatus: ray.JobStatusFailed}, want: State{Started: true, Finished: true}},
		"failed":     {status: ray.RayJobStatus{JobDeploymentStatus: ray.JobDeploymentStatusFailed}, want: State{Started: true, Finished: true}},
	}
	for name, tc := range cases {
		if got := (RayJob{}).State(&ray.RayJob{Status: tc.status}); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
	rj := trainingRayJob()
	if !(RayJob{}).State(rj).Suspended || !(RayJob{}).Fail(rj, gantry.ReasonRemoteJobLost, "gone", now) ||
		rj.Status.JobDeploymentStatus != ray.JobDeploymentStatusFailed || rj.Status.Reason != gantry.ReasonRemoteJobLost || (RayJob{}).Fail(rj, "x", "y", now) {
		t.Errorf("fail: %+v", rj.Status)
	}
	if !(RayJob{}).ClearStatus(rj) || (RayJob{}).ClearStatus(rj) {
		t.Error("clear")
	}
}

// What keeps each kind to Gantry on the hub: managedBy for Jobs and JobSets, suspend for RayJobs.
func TestHeld(t *testing.T) {
	cases := map[string]struct {
		kind Kind
		obj  client.Object
		want bool
	}{
		"Job handed over":      {Job{}, &batchv1.Job{Spec: batchv1.JobSpec{ManagedBy: ptr.To(gantry.JobManagedBy)}}, true},
		"Job of the hub":       {Job{}, &batchv1.Job{}, false},
		"JobSet handed over":   {JobSet{}, &jobset.JobSet{Spec: jobset.JobSetSpec{ManagedBy: ptr.To(gantry.JobManagedBy)}}, true},
		"JobSet of another":    {JobSet{}, &jobset.JobSet{Spec: jobset.JobSetSpec{ManagedBy: ptr.To("example.com/other")}}, false},
		"RayJob suspended":     {RayJob{}, &ray.RayJob{Spec: ray.RayJobSpec{Suspend: true}}, true},
		"RayJob not suspended": {RayJob{}, &ray.RayJob{}, false},
	}
	for name, tc := range cases {
		if held, why := tc.kind.Held(tc.obj); held != tc.want || (!held && why == "") {
			t.Errorf("%s: held %v (%q), want %v", name, held, why, tc.want)
		}
	}
}
