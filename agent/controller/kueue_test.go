package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/agent/admission"
	"github.com/gantry-dev/gantry/agent/agenttest"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/kueue"
)

// A job that Kueue keeps waiting past the placement timeout is given up with Kueue's own words, which a
// person reads on the hub (the Workload's Pending message, kubectl gantry explain).
func TestPlacementTimeoutSaysWhatKueueSaidOfTheJob(t *testing.T) {
	const timeout = 5 * time.Minute
	pending := []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending",
		Message: "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu, 8 more needed"}}
	cases := map[string]struct {
		queue     string
		workloads map[types.UID]*kueue.Workload
		want      string
	}{
		"Kueue keeps it pending": {queue: "team", workloads: map[types.UID]*kueue.Workload{"job-a-uid": kueueWorkload("job-a-1f2e3", pending)},
			want: "; Kueue Workload job-a-1f2e3 in LocalQueue team: Pending: couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu"},
		"Kueue made no Workload yet": {queue: "team", workloads: map[types.UID]*kueue.Workload{},
			want: "; Kueue made no Workload for it in LocalQueue team"},
		"the cluster runs no Kueue": {queue: "team",
			want: "; the job waits in LocalQueue team, but the cluster serves no Kueue Workloads"},
		"not in a LocalQueue": {workloads: map[types.UID]*kueue.Workload{"job-a-uid": kueueWorkload("job-a-1f2e3", pending)},
			want: "2 of 2 pods not placed on a node 5m1s after their placement began"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := copyOf("a", 0, 2, "8").Admitted().Obj()
			job := agenttest.MakeJob("a", "ns").Workload("hub-a").Created(now.Add(-timeout - time.Second)).Obj()
			job.UID = "job-a-uid"
			if tc.queue != "" {
				// Kueue's webhook suspends a job of its LocalQueue until Kueue admits it.
				job.Labels[gantryv1beta1.KueueQueueNameLabel] = tc.queue
				job.Spec.Suspend = ptr.To(true)
			}
			in := Input{Nodes: []*corev1.Node{gpuNode("n1"), gpuNode("n2")}, Copies: []*gantryv1beta1.Workload{c}, Jobs: jobs(job),
				Placements: map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 1, "n2", 1)},
				Kueue:      kueueWith(tc.workloads), Now: now, PlacementTimeout: timeout}
			plan := Decide(in)
			if len(plan.Updates) != 1 || plan.Updates[0].Condition.Reason != gantryv1beta1.ReasonPlacementTimeout {
				t.Fatalf("updates %+v, want the copy given up", plan.Updates)
			}
			if msg := plan.Updates[0].Condition.Message; !strings.Contains(msg, tc.want) || !strings.HasPrefix(msg, "2 of 2 pods not placed") {
				t.Errorf("message %q, want the count and %q", msg, tc.want)
			}
		})
	}
}

// Once Kueue admitted the job, the scheduler's word is what counts.
func TestKueueSaysNothingOfAJobItAdmitted(t *testing.T) {
	job := agenttest.MakeJob("a", "ns").Workload("hub-a").Obj()
	job.UID = "job-a-uid"
	job.Labels[gantryv1beta1.KueueQueueNameLabel] = "team"
	admitted := kueueWorkload("job-a-1f2e3", []metav1.Condition{{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted"}})
	if v := kueueVerdict(Input{Kueue: kueueWith(map[types.UID]*kueue.Workload{"job-a-uid": admitted})}, job); v != "" {
		t.Errorf("verdict %q for an admitted job, want none", v)
	}
}

func kueueWorkload(name string, conds []metav1.Condition) *kueue.Workload {
	return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: kueue.WorkloadStatus{Conditions: conds}}
}

// kueueWith is a Kueue of those Workloads, nil for none: a cluster without Kueue.
func kueueWith(workloads map[types.UID]*kueue.Workload) *Kueue {
	if workloads == nil {
		return nil
	}
	return &Kueue{Workloads: workloads}
}
