package jobkind

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func TestNewWorkload(t *testing.T) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: "u1", Labels: map[string]string{gantry.QueueLabel: "gpu"}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](4), Completions: ptr.To[int32](8),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				NodeSelector: map[string]string{gantry.GPUProductLabel: "NVIDIA-H100-80GB-HBM3"},
				Tolerations:  []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}},
				InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}},
				Containers: []corev1.Container{
					{Name: "a", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("1"), gantry.GPUResource: resource.MustParse("8")}}},
					{Name: "b", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("500m")}}},
				},
			}},
		},
	}
	wl, err := NewWorkload(Job{}, job, 100)
	if err != nil {
		t.Fatal(err)
	}
	if wl.Name != "job-train" || wl.Namespace != "team-a" || wl.Spec.QueueName != "gpu" || wl.Spec.Priority != 100 {
		t.Fatalf("identity: %s/%s queue %s priority %d", wl.Namespace, wl.Name, wl.Spec.QueueName, wl.Spec.Priority)
	}
	if ref := metav1.GetControllerOf(wl); ref == nil || ref.Kind != "Job" || ref.Name != "train" || ref.UID != "u1" {
		t.Fatalf("owner %+v", ref)
	}
	if !slices.Equal(wl.Finalizers, []string{gantry.WorkloadFinalizer, gantry.UsageFinalizer}) {
		t.Fatalf("finalizers %v", wl.Finalizers)
	}
	want := []gantry.PodSet{{
		Name: "main", Count: 4,
		// The init container's 4 CPUs exceed the containers' 1.5 CPUs together.
		Requests:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), gantry.GPUResource: resource.MustParse("8")},
		NodeSelector: job.Spec.Template.Spec.NodeSelector,
		Tolerations:  job.Spec.Template.Spec.Tolerations,
	}}
	if diff := cmp.Diff(want, wl.Spec.PodSets, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("pod sets (-want +got):\n%s", diff)
	}
	if wl.Spec.TopologyKey != "" {
		t.Errorf("topology key %q without the annotation", wl.Spec.TopologyKey)
	}
}

func TestNewWorkloadPlacement(t *testing.T) {
	affinity := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"r1", "r2"}},
	}}}}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", Annotations: map[string]string{
			gantry.GPUProductsAnnotation:  "NVIDIA-H100-80GB-HBM3, NVIDIA-A100-SXM4-80GB",
			gantry.TopologyKeyAnnotation:  "topology.kubernetes.io/zone",
			gantry.DataLocationAnnotation: "topology.kubernetes.io/region=eu-west",
		}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: affinity}},
		}}},
	}
	wl, err := NewWorkload(Job{}, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	ps := wl.Spec.PodSets[0]
	if diff := cmp.Diff([]string{"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"}, ps.GPUProducts); diff != "" {
		t.Errorf("gpu products, in order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(affinity, ps.RequiredNodeAffinity); diff != "" {
		t.Errorf("required node affinity (-want +got):\n%s", diff)
	}
	if wl.Spec.TopologyKey != "topology.kubernetes.io/zone" {
		t.Errorf("topology key %q", wl.Spec.TopologyKey)
	}
	if want := []gantry.LabelTerm{{Key: "topology.kubernetes.io/region", Value: "eu-west"}}; !slices.Equal(wl.Spec.DataLocation, want) {
		t.Errorf("data location %v, want %v", wl.Spec.DataLocation, want)
	}
}

func TestPlacementOfRejectsBadAnnotations(t *testing.T) {
	cases := map[string]struct {
		annotations map[string]string
		wantErr     string
	}{
		"empty product":      {map[string]string{gantry.GPUProductsAnnotation: "A100,,H100"}, "empty product"},
		"repeated product":   {map[string]string{gantry.GPUProductsAnnotation: "A100,H100,A100"}, `names "A100" twice`},
		"not a label value":  {map[string]string{gantry.GPUProductsAnnotation: "NVIDIA H100"}, "not a node label value"},
		"too many products":  {map[string]string{gantry.GPUProductsAnnotation: "a,b,c,d,e,f,g,h,i"}, "at most 8"},
		"bad topology key":   {map[string]string{gantry.TopologyKeyAnnotation: "zone/"}, "not a node label key"},
		"empty topology key": {map[string]string{gantry.TopologyKeyAnnotation: ""}, "not a node label key"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := PlacementOf(tc.annotations)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("PlacementOf = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	products, key, err := PlacementOf(nil)
	if err != nil || products != nil || key != "" {
		t.Fatalf("PlacementOf(no annotations) = %v, %q, %v", products, key, err)
	}
}

// A job's own admission deadline is a positive duration; anything else says what is wrong.
func TestAdmissionDeadlineOf(t *testing.T) {
	cases := map[string]struct {
		value string
		want  time.Duration
		err   bool
	}{
		"minutes":        {value: "30m", want: 30 * time.Minute},
		"hours, spaced":  {value: " 2h ", want: 2 * time.Hour},
		"zero":           {value: "0s", err: true},
		"negative":       {value: "-5m", err: true},
		"no unit":        {value: "30", err: true},
		"not a duration": {value: "tomorrow", err: true},
	}
	for name, tc := range cases {
		got, err := AdmissionDeadlineOf(map[string]string{gantry.AdmissionDeadlineAnnotation: tc.value})
		switch {
		case tc.err && (err == nil || !strings.Contains(err.Error(), "not a positive duration")):
			t.Errorf("%s: %v, %v; want an error saying it is not a positive duration", name, got, err)
		case !tc.err && (err != nil || got == nil || got.Duration != tc.want):
			t.Errorf("%s: %v, %v; want %v", name, got, err, tc.want)
		}
	}
	if got, err := AdmissionDeadlineOf(nil); got != nil || err != nil {
		t.Errorf("no annotation: %v, %v", got, err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns",
		Annotations: map[string]string{gantry.AdmissionDeadlineAnnotation: "45m"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}}}
	wl, err := NewWorkload(Job{}, job, 0)
	if err != nil || wl.Spec.AdmissionDeadline == nil || wl.Spec.AdmissionDeadline.Duration != 45*time.Minute {
		t.Errorf("NewWorkload: %v, deadline %v", err, wl.Spec.AdmissionDeadline)
	}
	job.Annotations[gantry.AdmissionDeadlineAnnotation] = "soon"
	if _, err := NewWorkload(Job{}, job, 0); err == nil {
		t.Error("a job with a bad deadline got a Workload")
	}
}

func TestJobPods(t *testing.T) {
	cases := []struct {
		parallelism, completions *int32
		want                     int32
	}{
		{nil, nil, 1},
		{ptr.To[int32](4), nil, 4},
		{ptr.To[int32](4), ptr.To[int32](2), 2},
		{ptr.To[int32](2), ptr.To[int32](10), 2},
	}
	for _, tc := range cases {
		job := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: tc.parallelism, Completions: tc.completions}}
		if got := JobPods(&job.Spec); got != tc.want {
			t.Errorf("JobPods(parallelism %v, completions %v) = %d, want %d", tc.parallelism, tc.completions, got, tc.want)
		}
	}
}

// A pod template that gives only limits requests them, as its pods will once the API server creates
// them: a custom resource's templates are not defaulted, and the quota must count the GPUs all the same.
func TestLimitsAloneAreRequested(t *testing.T) {
	js := trainingJobSet()
	c := &js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0]
	c.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{gantry.GPUResource: resource.MustParse("4"), corev1.ResourceCPU: resource.MustParse("2")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	wl, err := NewWorkload(JobSet{}, js, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := wl.Spec.PodSets[1].Requests
	if gpu, cpu := got[gantry.GPUResource], got[corev1.ResourceCPU]; gpu.Cmp(resource.MustParse("4")) != 0 || cpu.Cmp(resource.MustParse("1")) != 0 {
		t.Fatalf("requests %v, want 4 GPUs (the limit) and 1 CPU (the request)", got)
	}
	if _, ok := js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0].Resources.Requests[gantry.GPUResource]; ok {
		t.Error("the JobSet's template was changed")
	}
}

// Changes names each field of the demand that differs, and nothing for equal demands built at other
// generations of the job or with quantities written otherwise.
func TestChanges(t *testing.T) {
	base := func() *gantry.WorkloadSpec {
		return &gantry.WorkloadSpec{QueueName: "gpu", JobGeneration: 1, PodSets: []gantry.PodSet{{Name: "main", Count: 1,
			Requests: corev1.ResourceList{gantry.GPUResource: resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("1")}}}}
	}
	cases := map[string]struct {
		edit func(*gantry.WorkloadSpec)
		want []string
	}{
		"another generation, quantities written otherwise": {edit: func(s *gantry.WorkloadSpec) {
			s.JobGeneration = 7
			s.PodSets[0].Requests[corev1.ResourceCPU] = resource.MustParse("1000m")
		}},
		"parallelism": {edit: func(s *gantry.WorkloadSpec) { s.PodSets[0].Count = 3 }, want: []string{"pod set main pods 1 -> 3"}},
		"GPUs": {edit: func(s *gantry.WorkloadSpec) { s.PodSets[0].Requests[gantry.GPUResource] = resource.MustParse("8") },
			want: []string{"pod set main requests {cpu=1,nvidia.com/gpu=1} -> {cpu=1,nvidia.com/gpu=8}"}},
		"queue and deadline": {edit: func(s *gantry.WorkloadSpec) {
			s.QueueName, s.AdmissionDeadline = "cpu", &metav1.Duration{Duration: time.Hour}
		}, want: []string{`queue "gpu" -> "cpu"`, "admission deadline none -> 1h0m0s"}},
		"node selector": {edit: func(s *gantry.WorkloadSpec) { s.PodSets[0].NodeSelector = map[string]string{"zone": "a"} },
			want: []string{"pod set main node selector map[] -> map[zone:a]"}},
		"another pod set": {edit: func(s *gantry.WorkloadSpec) { s.PodSets = append(s.PodSets, gantry.PodSet{Name: "x", Count: 1}) },
			want: []string{"1 pod sets -> 2"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := base()
			tc.edit(want)
			if diff := cmp.Diff(tc.want, Changes(base(), want)); diff != "" {
				t.Errorf("Changes (-want +got):\n%s", diff)
			}
		})
	}
}

// A job's data location is key=value labels of WorkerClusters, each key once; anything else says what
// is wrong, as the hub's admission policy does.
func TestDataLocationOf(t *testing.T) {
	cases := map[string]struct {
		value   string
		want    []gantry.LabelTerm
		wantErr string
	}{
		"a region": {value: "topology.kubernetes.io/region=eu-west",
			want: []gantry.LabelTerm{{Key: "topology.kubernetes.io/region", Value: "eu-west"}}},
		"two terms, spaced": {value: " region=eu , example.com/dataset=imagenet",
			want: []gantry.LabelTerm{{Key: "region", Value: "eu"}, {Key: "example.com/dataset", Value: "imagenet"}}},
		"an empty value": {value: "cache=", want: []gantry.LabelTerm{{Key: "cache"}}},
		"a bare key":     {value: "region", wantErr: "is not key=value"},
		"spaces at =":    {value: "region = eu", wantErr: "is not a label key"},
		"a bad value":    {value: "region=eu/west", wantErr: "is not a label value"},
		"a key twice":    {value: "region=eu,region=us", wantErr: `names "region" twice`},
		"nine terms":     {value: "a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1", wantErr: "at most 8"},
	}
	for name, tc := range cases {
		got, err := DataLocationOf(map[string]string{gantry.DataLocationAnnotation: tc.value})
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %v, %v; want an error containing %q", name, got, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("%s: %v, %v; want %v", name, got, err, tc.want)
		}
	}
	if got, err := DataLocationOf(nil); got != nil || err != nil {
		t.Errorf("no annotation: %v, %v", got, err)
	}
}
