package view

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	ray "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/gantry-dev/gantry/jobkind"
)

// What the hub mirrored back of a job, of each kind: how far it got as its kind reads it, the kind's
// counts, the conditions that hold.
func TestJobStatusLines(t *testing.T) {
	ended := metav1.NewTime(t0.Add(50 * time.Minute))
	for name, tc := range map[string]struct {
		job  client.Object
		want []string
	}{
		"a Job held on the hub, not started": {
			job:  &batchv1.Job{Spec: batchv1.JobSpec{Suspend: ptr.To(true)}},
			want: []string{"  Job: not started; 0 active (0 ready), 0 succeeded, 0 failed"},
		},
		"a Job that failed": {
			job: &batchv1.Job{Status: batchv1.JobStatus{StartTime: &ended, Failed: 2, Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: ended},
				{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: ended},
				{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse, LastTransitionTime: ended}}}},
			want: []string{"  Job: failed; 0 active (0 ready), 0 succeeded, 2 failed",
				"  Job FailureTarget 10m ago: BackoffLimitExceeded",
				"  Job Failed 10m ago: BackoffLimitExceeded Job has reached the specified backoff limit"},
		},
		"a JobSet running": {
			job: &jobset.JobSet{Status: jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{
				{Name: "driver", Active: 1, Ready: 1}, {Name: "workers", Active: 2}}}},
			want: []string{"  JobSet: running; Jobs ready/succeeded/failed per replicated job: driver 1/0/0, workers 0/0/0"},
		},
		"a JobSet completed": {
			job: &jobset.JobSet{Status: jobset.JobSetStatus{TerminalState: string(jobset.JobSetCompleted),
				ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "driver", Succeeded: 1}},
				Conditions: []metav1.Condition{{Type: string(jobset.JobSetCompleted), Status: metav1.ConditionTrue, Reason: "AllJobsCompleted",
					Message: "jobset completed successfully", LastTransitionTime: ended}}}},
			want: []string{"  JobSet: succeeded; Jobs ready/succeeded/failed per replicated job: driver 0/1/0",
				"  JobSet Completed 10m ago: AllJobsCompleted jobset completed successfully"},
		},
		"a JobSet not started": {
			job:  &jobset.JobSet{},
			want: []string{"  JobSet: not started"},
		},
		"a RayJob running": {
			job: &ray.RayJob{Status: ray.RayJobStatus{StartTime: &ended, JobDeploymentStatus: ray.JobDeploymentStatusRunning,
				JobStatus: ray.JobStatusRunning}},
			want: []string{"  RayJob: running; deployment Running, Ray job RUNNING"},
		},
		"a RayJob Gantry failed": {
			job: &ray.RayJob{Status: ray.RayJobStatus{JobDeploymentStatus: ray.JobDeploymentStatusFailed,
				Reason: "RemoteJobLost", Message: "the RayJob on worker-1 was deleted"}},
			want: []string{"  RayJob: failed; deployment Failed, Ray job - (RemoteJobLost the RayJob on worker-1 was deleted)"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			k, _ := jobkind.ForObject(tc.job)
			e := Explanation{Job: JobIdentity{Kind: string(k.Name())}, JobStatus: jobProgress(tc.job)}
			got := e.jobStatusLines(t0.Add(time.Hour))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
