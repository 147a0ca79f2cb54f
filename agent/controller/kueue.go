package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/kueue"
)

// kueueVerdict is what the worker's Kueue says of an admitted copy's job that waits in one of its
// LocalQueues ("Kueue Workload NAME in LocalQueue Q: REASON: MESSAGE"), for the placement timeout's
// message: the job's pods wait for Kueue to admit it, not for the scheduler. Empty when the job does
// not go through Kueue, or Kueue admitted it.
func kueueVerdict(in Input, job client.Object) string {
	queue := job.GetLabels()[gantryv1beta1.KueueQueueNameLabel]
	if queue == "" {
		return ""
	}
	if in.Kueue == nil {
		return fmt.Sprintf("the job waits in LocalQueue %s, but the cluster serves no Kueue Workloads", queue)
	}
	kw := in.Kueue.Workloads[job.GetUID()]
	if kw == nil {
		return fmt.Sprintf("Kueue made no Workload for it in LocalQueue %s", queue)
	}
	if meta.IsStatusConditionTrue(kw.Status.Conditions, kueue.WorkloadAdmitted) {
		return ""
	}
	for _, t := range []string{kueue.WorkloadQuotaReserved, kueue.WorkloadAdmitted} {
		if c := meta.FindStatusCondition(kw.Status.Conditions, t); c != nil && c.Status == metav1.ConditionFalse && c.Message != "" {
			return fmt.Sprintf("Kueue Workload %s in LocalQueue %s: %s: %s", kw.Name, queue, c.Reason, c.Message)
		}
	}
	return fmt.Sprintf("Kueue Workload %s in LocalQueue %s is not admitted", kw.Name, queue)
}
