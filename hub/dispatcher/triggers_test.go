package dispatcher

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

func TestChangesAPass(t *testing.T) {
	gq := hubtest.MakeGlobalQueue("gpus").Generation(1).Obj()
	counted := gq.DeepCopy()
	counted.Status.PendingWorkloads = 7
	respec := gq.DeepCopy()
	respec.Generation = 2
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{"team": "a"}}}
	relabelled := ns.DeepCopy()
	relabelled.Labels["team"] = "b"
	annotated := ns.DeepCopy()
	annotated.Annotations = map[string]string{"note": "x"}
	ready := hubtest.MakeWorkerCluster("w1").Generation(1).AgentReady().Obj()
	notReady := ready.DeepCopy()
	notReady.Status.Conditions[0].Status = metav1.ConditionFalse
	otherCondition := ready.DeepCopy()
	otherCondition.Status.Conditions = append(otherCondition.Status.Conditions, metav1.Condition{Type: "Other", Status: metav1.ConditionTrue})
	grown := ready.DeepCopy()
	grown.Status.Capacity = &gantry.CapacitySummary{GPUProducts: []gantry.GPUProductCapacity{{Product: "A100", Free: 8}}}
	moreCPU := ready.DeepCopy()
	moreCPU.Status.Capacity = &gantry.CapacitySummary{Nodes: 3, Resources: []gantry.ResourceCapacity{{Name: corev1.ResourceCPU}}}
	for name, tc := range map[string]struct {
		old, new client.Object
		want     bool
	}{
		"a queue's counts":               {gq, counted, false},
		"a queue's spec":                 {gq, respec, true},
		"a namespace's labels":           {ns, relabelled, true},
		"a namespace's annotations":      {ns, annotated, false},
		"a cluster's agent readiness":    {ready, notReady, true},
		"a cluster's capacity":           {ready, grown, true},
		"another condition of a cluster": {ready, otherCondition, false},
	} {
		if got := ChangesAPass(tc.old, tc.new); got != tc.want {
			t.Errorf("%s: ChangesAPass = %v, want %v", name, got, tc.want)
		}
	}
}
