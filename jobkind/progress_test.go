package jobkind

import (
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	ray "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// Progress changes with what a person reads of how far a job got, and not with pods that come and go.
func TestProgress(t *testing.T) {
	cases := map[string]struct {
		kind                 Kind
		before, pods, onward client.Object // a status; the same with pods come and gone; one further on
	}{
		"Job": {
			kind:   Job{},
			before: &batchv1.Job{Status: batchv1.JobStatus{Active: 2}},
			pods: &batchv1.Job{Status: batchv1.JobStatus{Active: 1, Ready: ptr.To[int32](1), Terminating: ptr.To[int32](1),
				UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"p"}}}},
			onward: &batchv1.Job{Status: batchv1.JobStatus{Active: 1, Succeeded: 1}},
		},
		"Job condition": {
			kind:   Job{},
			before: &batchv1.Job{Status: batchv1.JobStatus{Succeeded: 1}},
			pods:   &batchv1.Job{Status: batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionFalse}}}},
			onward: &batchv1.Job{Status: batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}},
		},
		"JobSet": {
			kind:   JobSet{},
			before: &jobset.JobSet{Status: jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "w", Active: 2}}}},
			pods:   &jobset.JobSet{Status: jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "w", Active: 1, Ready: 1}}}},
			onward: &jobset.JobSet{Status: jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "w", Active: 1, Succeeded: 1}}}},
		},
		"RayJob": {
			kind:   RayJob{},
			before: &ray.RayJob{Status: ray.RayJobStatus{JobDeploymentStatus: ray.JobDeploymentStatusInitializing}},
			pods:   &ray.RayJob{Status: ray.RayJobStatus{JobDeploymentStatus: ray.JobDeploymentStatusInitializing, Message: "waiting for the cluster"}},
			onward: &ray.RayJob{Status: ray.RayJobStatus{JobDeploymentStatus: ray.JobDeploymentStatusRunning, JobStatus: ray.JobStatusRunning}},
		},
		"TrainJob": {
			kind:   TrainJob{},
			before: &trainer.TrainJob{Status: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{{Name: "node", Active: ptr.To[int32](2)}}}},
			pods:   &trainer.TrainJob{Status: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{{Name: "node", Active: ptr.To[int32](1), Ready: ptr.To[int32](1)}}}},
			onward: &trainer.TrainJob{Status: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{{Name: "node", Active: ptr.To[int32](2)}},
				Conditions: []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue}}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if a, b := tc.kind.Progress(tc.before), tc.kind.Progress(tc.pods); a != b {
				t.Errorf("pods that came and went changed the progress: %q -> %q", a, b)
			}
			if a, b := tc.kind.Progress(tc.pods), tc.kind.Progress(tc.onward); a == b {
				t.Errorf("a job further on shows the same progress %q", a)
			}
		})
	}
}
