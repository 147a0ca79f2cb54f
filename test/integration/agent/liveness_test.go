package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/agent/agenttest"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
)

// updateNode changes node name with change, spec and status, as the kubelet and the node lifecycle
// controller would.
func updateNode(t *testing.T, c client.Client, name string, change func(*corev1.Node)) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			return err
		}
		change(&n)
		status := n.Status
		if err := c.Update(ctx, &n); err != nil {
			return err
		}
		n.Status = status
		return c.Status().Update(ctx, &n)
	})
	if err != nil {
		t.Fatalf("updating node %s: %v", name, err)
	}
}

// expectMessage waits until copy name shows Admitted=False with reason and a message containing want.
func expectMessage(t *testing.T, c client.Client, name, reason, want string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("copy %s %s with %q in its message", name, reason, want), func() error {
		cond, err := admitted(c, name)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionFalse || cond.Reason != reason || !strings.Contains(cond.Message, want) {
			return fmt.Errorf("condition is %s/%s: %q", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
}

// TestAgentWaitsForNodesAndEarlierJobs checks that answers which only last while a node is away or while
// an earlier Workload's Job is still there are waits, not rejections, and that the agent decides the
// copy again once the node is back or the Job is gone.
func TestAgentWaitsForNodesAndEarlierJobs(t *testing.T) {
	c := startAgent(t)
	ctx := context.Background()
	gpuNode := func(name string) *agenttest.NodeWrapper {
		return agenttest.MakeNode(name).Allocatable("cpu", "64", "memory", "512Gi").GPUs(8, product)
	}
	createNode(t, c, gpuNode("gpu-1").Obj())
	createNode(t, c, gpuNode("gpu-2").Unreachable().Obj())
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})

	// After a network blip gpu-2 is not Ready: a copy that needs both nodes waits for it; one that
	// would not fit even with both is rejected.
	create(t, c, agenttest.MakeCopy("pair", namespace).PodSet("main", 2, "nvidia.com/gpu", "8").Obj())
	expectMessage(t, c, "pair", gantryv1beta1.ReasonInsufficientResources, "gpu-2 (not Ready)")
	create(t, c, agenttest.MakeCopy("huge", namespace).PodSet("main", 3, "nvidia.com/gpu", "8").Obj())
	expectAdmitted(t, c, "huge", metav1.ConditionFalse, gantryv1beta1.ReasonNeverFits)

	// gpu-2 is Ready again, but a person cordoned it meanwhile: the copy still waits, naming the cordon.
	updateNode(t, c, "gpu-2", func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		n.Spec.Unschedulable = true
		n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
	})
	expectMessage(t, c, "pair", gantryv1beta1.ReasonInsufficientResources, "gpu-2 (cordoned)")

	// Uncordoned: the copy is admitted.
	updateNode(t, c, "gpu-2", func(n *corev1.Node) {
		n.Spec.Unschedulable = false
		n.Spec.Taints = nil
	})
	expectAdmitted(t, c, "pair", metav1.ConditionTrue, gantryv1beta1.ReasonFits)

	// The Job Gantry created for an earlier Workload of the same name is still here: the copy waits.
	earlier := agenttest.MakeJob("rerun", namespace).Workload("hub-rerun-before").Obj()
	create(t, c, earlier)
	create(t, c, agenttest.MakeCopy("rerun", namespace).PodSet("main", 1, "cpu", "1").Obj())
	expectMessage(t, c, "rerun", gantryv1beta1.ReasonPreviousJobPresent, `"hub-rerun-before"`)

	// The hub deletes it: the copy is admitted.
	if err := c.Delete(ctx, earlier, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	expectAdmitted(t, c, "rerun", metav1.ConditionTrue, gantryv1beta1.ReasonFits)

	// The rejection stays; the Job is gone for good.
	if cond, err := admitted(c, "huge"); err != nil || cond.Reason != gantryv1beta1.ReasonNeverFits {
		t.Errorf("copy huge: %+v, %v; want still %s", cond, err, gantryv1beta1.ReasonNeverFits)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(earlier), &batchv1.Job{}); err == nil {
		t.Error("the earlier Job is still there")
	}
}
