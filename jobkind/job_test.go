package jobkind

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A Job whose end was decided is ending from the condition's transition until Complete or Failed.
func TestJobState(t *testing.T) {
	decided := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cond := func(types ...batchv1.JobConditionType) []batchv1.JobCondition {
		var cs []batchv1.JobCondition
		for _, c := range types {
			cs = append(cs, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(decided)})
		}
		return cs
	}
	started := ptr.To(metav1.NewTime(decided.Add(-time.Minute)))
	cases := map[string]struct {
		status batchv1.JobStatus
		want   State
	}{
		"new":     {want: State{}},
		"running": {status: batchv1.JobStatus{StartTime: started, Active: 1}, want: State{Started: true}},
		"succeeding": {status: batchv1.JobStatus{StartTime: started, Conditions: cond(batchv1.JobSuccessCriteriaMet)},
			want: State{Started: true, EndingSince: decided}},
		"failing": {status: batchv1.JobStatus{StartTime: started, Conditions: cond(batchv1.JobFailureTarget)},
			want: State{Started: true, EndingSince: decided}},
		"complete": {status: batchv1.JobStatus{StartTime: started, Conditions: cond(batchv1.JobSuccessCriteriaMet, batchv1.JobComplete)},
			want: State{Started: true, Finished: true, Succeeded: true}},
		"failed": {status: batchv1.JobStatus{StartTime: started, Conditions: cond(batchv1.JobFailureTarget, batchv1.JobFailed)},
			want: State{Started: true, Finished: true}},
		"a condition that is false": {status: batchv1.JobStatus{StartTime: started, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(decided)}}},
			want: State{Started: true}},
	}
	for name, tc := range cases {
		if got := (Job{}).State(&batchv1.Job{Status: tc.status}); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}
