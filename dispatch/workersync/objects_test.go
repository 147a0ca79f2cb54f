package workersync

import (
	"maps"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func TestNewRemoteJob(t *testing.T) {
	hubJob := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: "hub-job-uid",
			Labels: map[string]string{gantry.QueueLabel: "q", "team": "a"}},
		Spec: batchv1.JobSpec{
			ManagedBy: ptr.To(gantry.JobManagedBy), Suspend: ptr.To(true), TTLSecondsAfterFinished: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "hub-job-uid"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
					"batch.kubernetes.io/controller-uid": "hub-job-uid", "controller-uid": "hub-job-uid",
					"batch.kubernetes.io/job-name": "train", "job-name": "train", "app": "trainer"}},
			},
		},
	}
	wl := &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-train", Namespace: "ns", UID: "wl-uid"},
		Status: gantry.WorkloadStatus{DispatchEpoch: 3}}
	job := NewRemoteJob(hubJob, wl, "").(*batchv1.Job)

	if job.Spec.ManagedBy != nil || ptr.Deref(job.Spec.Suspend, true) || job.Spec.TTLSecondsAfterFinished != nil || job.Spec.Selector != nil {
		t.Errorf("spec not made runnable on the worker: managedBy %v suspend %v ttl %v selector %v",
			job.Spec.ManagedBy, job.Spec.Suspend, job.Spec.TTLSecondsAfterFinished, job.Spec.Selector)
	}
	for _, l := range []string{"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"} {
		if _, ok := job.Spec.Template.Labels[l]; ok {
			t.Errorf("template keeps the hub's %s label", l)
		}
	}
	for _, labels := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
		if labels[gantry.WorkloadUIDLabel] != "wl-uid" || labels[gantry.DispatchEpochLabel] != "3" {
			t.Errorf("labels %v lack the workload uid and epoch", labels)
		}
	}
	if job.Labels["team"] != "a" || job.Spec.Template.Labels["app"] != "trainer" {
		t.Errorf("user labels lost: %v / %v", job.Labels, job.Spec.Template.Labels)
	}
	if !ptr.Deref(hubJob.Spec.Suspend, false) || hubJob.Spec.Template.Labels["job-name"] != "train" {
		t.Errorf("the hub Job was modified")
	}
}

func TestNewRemoteJobPinnedToAdmission(t *testing.T) {
	hubJob := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"pool": "gpu"},
		}}},
	}
	wl := &gantry.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "job-train", Namespace: "ns", UID: "wl-uid"},
		Spec:       gantry.WorkloadSpec{TopologyKey: "topology.kubernetes.io/zone"},
		Status: gantry.WorkloadStatus{DispatchEpoch: 1, ClusterName: "w", Admission: &gantry.Admission{
			PodSets:        []gantry.PodSetAdmission{{Name: "main", GPUProduct: "NVIDIA-A100-SXM4-80GB"}},
			TopologyDomain: "zone-b",
		}},
	}
	job := NewRemoteJob(hubJob, wl, "").(*batchv1.Job)
	want := map[string]string{"pool": "gpu", gantry.GPUProductLabel: "NVIDIA-A100-SXM4-80GB", "topology.kubernetes.io/zone": "zone-b"}
	if got := job.Spec.Template.Spec.NodeSelector; !maps.Equal(got, want) {
		t.Errorf("nodeSelector %v, want %v", got, want)
	}
	if len(hubJob.Spec.Template.Spec.NodeSelector) != 1 {
		t.Errorf("the hub Job's nodeSelector was modified: %v", hubJob.Spec.Template.Spec.NodeSelector)
	}

	wl.Status.Admission = nil
	if got := NewRemoteJob(hubJob, wl, "").(*batchv1.Job).Spec.Template.Spec.NodeSelector; !maps.Equal(got, map[string]string{"pool": "gpu"}) {
		t.Errorf("without choices the nodeSelector is %v, want the Job's own", got)
	}
}

// The pods of the pod sets that are not deferred join the PodGroup the winner made, by field and by
// label; a deferred pod set's do not; a group the hub job named itself never reaches the worker.
func TestNewRemoteJobJoinsTheGang(t *testing.T) {
	tpl := func() jobsetapi.ReplicatedJob {
		return jobsetapi.ReplicatedJob{Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{gantry.PodGroupLabel: "users-own"}},
			Spec:       corev1.PodSpec{SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To("users-own")}},
		}}}}
	}
	workers, eval := tpl(), tpl()
	workers.Name, eval.Name = "workers", "eval"
	hubJob := &jobsetapi.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns"},
		Spec: jobsetapi.JobSetSpec{ReplicatedJobs: []jobsetapi.ReplicatedJob{workers, eval}}}
	wl := &gantry.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "jobset-train", Namespace: "ns", UID: "wl-uid"},
		Spec: gantry.WorkloadSpec{JobKind: gantry.JobKindJobSet, PodSets: []gantry.PodSet{
			{Name: "workers", Count: 4}, {Name: "eval", Count: 1, Deferred: true}}},
		Status: gantry.WorkloadStatus{DispatchEpoch: 1, ClusterName: "w", Admission: &gantry.Admission{PodGroup: "train-1a2b3c4d"}},
	}
	group := func(js *jobsetapi.JobSet, i int) (string, string) {
		t := js.Spec.ReplicatedJobs[i].Template.Spec.Template
		return t.Labels[gantry.PodGroupLabel], ptr.Deref(ptr.Deref(t.Spec.SchedulingGroup, corev1.PodSchedulingGroup{}).PodGroupName, "")
	}
	js := NewRemoteJob(hubJob, wl, "").(*jobsetapi.JobSet)
	if label, field := group(js, 0); label != "train-1a2b3c4d" || field != "train-1a2b3c4d" {
		t.Errorf("workers join label %q, field %q; want both train-1a2b3c4d", label, field)
	}
	if label, field := group(js, 1); label != "" || field != "" {
		t.Errorf("the deferred eval joins label %q, field %q; want none", label, field)
	}
	wl.Status.Admission = nil
	if label, field := group(NewRemoteJob(hubJob, wl, "").(*jobsetapi.JobSet), 0); label != "" || field != "" {
		t.Errorf("without a PodGroup the workers join label %q, field %q; want none", label, field)
	}
	if label, field := group(hubJob, 0); label != "users-own" || field != "users-own" {
		t.Errorf("the hub JobSet was modified")
	}
}

func TestNewCopy(t *testing.T) {
	wl := &gantry.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "job-train", Namespace: "ns", UID: "wl-uid", Labels: map[string]string{gantry.JobNameLabel: "train"}},
		Spec:       gantry.WorkloadSpec{QueueName: "q", PodSets: []gantry.PodSet{{Name: "main", Count: 2}}},
		Status:     gantry.WorkloadStatus{DispatchEpoch: 7, ClusterName: "x"},
	}
	cp := NewCopy(wl, "")
	if cp.Name != wl.Name || cp.Namespace != wl.Namespace || cp.Spec.PodSets[0].Count != 2 {
		t.Fatalf("copy %+v", cp)
	}
	want := map[string]string{gantry.WorkloadUIDLabel: "wl-uid", gantry.DispatchEpochLabel: "7", gantry.JobNameLabel: "train"}
	for k, v := range want {
		if cp.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cp.Labels[k], v)
		}
	}
	if cp.Status.ClusterName != "" || len(cp.Finalizers) != 0 {
		t.Errorf("copy carries hub state: %+v %v", cp.Status, cp.Finalizers)
	}
}

// TestAJobForAKueueWorkerGoesIntoItsLocalQueue: the winner's job, not its pods, carries Kueue's queue
// label, and the copy names the LocalQueue its agent admits it by; without Kueue neither does.
func TestAJobForAKueueWorkerGoesIntoItsLocalQueue(t *testing.T) {
	hubJob := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: "hub-job-uid"}}
	wl := &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-train", Namespace: "ns", UID: "wl-uid"},
		Spec: gantry.WorkloadSpec{PodSets: []gantry.PodSet{{Name: "main", Count: 1}}}, Status: gantry.WorkloadStatus{DispatchEpoch: 1}}
	job := NewRemoteJob(hubJob, wl, "team-a").(*batchv1.Job)
	if job.Labels[gantry.KueueQueueNameLabel] != "team-a" || job.Labels[gantry.WorkloadUIDLabel] != "wl-uid" {
		t.Errorf("job labels %v, want Kueue's queue team-a beside Gantry's marks", job.Labels)
	}
	if _, ok := job.Spec.Template.Labels[gantry.KueueQueueNameLabel]; ok {
		t.Errorf("the pods carry Kueue's queue label: %v", job.Spec.Template.Labels)
	}
	if cp := NewCopy(wl, "team-a"); cp.Annotations[gantry.KueueLocalQueueAnnotation] != "team-a" {
		t.Errorf("copy annotations %v, want the LocalQueue", cp.Annotations)
	}
	if job := NewRemoteJob(hubJob, wl, "").(*batchv1.Job); job.Labels[gantry.KueueQueueNameLabel] != "" {
		t.Errorf("a job for a worker without Kueue carries %v", job.Labels)
	}
	if cp := NewCopy(wl, ""); cp.Annotations != nil {
		t.Errorf("a copy for a worker without Kueue carries %v", cp.Annotations)
	}
}
