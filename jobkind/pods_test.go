package jobkind

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// A job's sample pods are one per pod set, in the job's namespace, from the pod set's template with its
// labels; a TrainJob's, whose pods its runtime describes, are not sampled.
func TestSamplePods(t *testing.T) {
	kind := func(name gantry.JobKind) Kind { k, _ := Named(name); return k }
	for name, tc := range map[string]struct {
		kind     Kind
		job      client.Object
		wantPods []string
	}{
		"a Job: its template": {kind: kind(gantry.JobKindJob), job: &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "eval", Namespace: "team-b"},
			Spec:       replicatedJob("main", 1, 3, "1").Template.Spec},
			wantPods: []string{"team-b/eval-main- role=main"}},
		"a JobSet: one per replicated job": {kind: kind(gantry.JobKindJobSet), job: trainingJobSet(),
			wantPods: []string{"team-a/train-driver- role=driver", "team-a/train-workers- role=workers"}},
		"a RayJob: head, groups with pods, submitter": {kind: kind(gantry.JobKindRayJob), job: trainingRayJob(),
			wantPods: []string{"team-a/tune-head- ", "team-a/tune-gpu- ", "team-a/tune-cpu- ", "team-a/tune-submitter- "}},
		"a TrainJob without its runtime": {kind: kind(gantry.JobKindTrainJob), job: fineTune()},
	} {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, sample := range SamplePods(tc.kind, tc.job) {
				p := sample.Pod
				if !strings.HasSuffix(p.GenerateName, "-"+sample.PodSet+"-") {
					t.Errorf("pod %s is not of pod set %s", p.GenerateName, sample.PodSet)
				}
				if len(p.Spec.Containers) == 0 {
					t.Errorf("pod %s has no containers", p.GenerateName)
				}
				got = append(got, p.Namespace+"/"+p.GenerateName+" "+labelString(p.Labels))
			}
			if diff := cmp.Diff(tc.wantPods, got); diff != "" {
				t.Errorf("sample pods (-want +got):\n%s", diff)
			}
		})
	}
}

func labelString(l map[string]string) string {
	if r := l["role"]; r != "" {
		return "role=" + r
	}
	return ""
}
