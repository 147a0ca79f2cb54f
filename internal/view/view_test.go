package view

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func condition(typ, status, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason}
}

func TestClusters(t *testing.T) {
	clusters := []gantry.WorkerCluster{
		{ObjectMeta: metav1.ObjectMeta{Name: "w2"},
			Spec: gantry.WorkerClusterSpec{Cordoned: true, Fenced: true,
				Failover: gantry.Failover{Policy: gantry.FailoverFence, Timeout: &metav1.Duration{Duration: 2 * time.Minute}}},
			Status: gantry.WorkerClusterStatus{Conditions: []metav1.Condition{
				condition(gantry.ClusterConnected, "False", gantry.ReasonUnauthorized)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "w1"},
			Status: gantry.WorkerClusterStatus{
				Conditions: []metav1.Condition{condition(gantry.ClusterConnected, "True", "Connected"),
					condition(gantry.ClusterAgentReady, "True", "AgentReporting")},
				Capacity: &gantry.CapacitySummary{GPUProducts: []gantry.GPUProductCapacity{
					{Product: "NVIDIA-H100", Free: 4, Allocatable: 16}, {Product: "NVIDIA-A100", Free: 0, Allocatable: 8}}}}},
	}
	workloads := []gantry.Workload{
		{Status: gantry.WorkloadStatus{ClusterName: "w1"}},
		{Status: gantry.WorkloadStatus{ClusterName: "w1", Conditions: []metav1.Condition{condition(gantry.WorkloadFinished, "True", "Succeeded")}}},
		{Status: gantry.WorkloadStatus{ClusterName: "w2"}},
		{Status: gantry.WorkloadStatus{}},
	}
	want := []ClusterRow{
		{Name: "w1", Connected: "True", Agent: "True", State: "Ready", Failover: "Wait/5m0s",
			GPUs: []string{"NVIDIA-A100 0/8", "NVIDIA-H100 4/16"}, Running: 1},
		{Name: "w2", Connected: "False (Unauthorized)", Agent: "Unknown", State: "Cordoned,Fenced", Failover: "Fence/2m0s", Running: 1},
	}
	if diff := cmp.Diff(want, Clusters(clusters, RunningOn(workloads))); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

func TestQueues(t *testing.T) {
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	gqs := []gantry.GlobalQueue{{
		ObjectMeta: metav1.ObjectMeta{Name: "gpus"},
		Spec: gantry.GlobalQueueSpec{Clusters: []gantry.ClusterQuota{
			{Name: "w2", Quota: corev1.ResourceList{gantry.GPUResource: q("16"), corev1.ResourceCPU: q("64")}},
			{Name: "w1", Quota: corev1.ResourceList{gantry.GPUResource: q("8")}},
			{Name: "w3", Quota: corev1.ResourceList{gantry.GPUResource: q("8")}},
		}},
		Status: gantry.GlobalQueueStatus{PendingWorkloads: 3, AdmittedWorkloads: 2, Usage: []gantry.ClusterUsage{
			{Name: "w2", Admitted: corev1.ResourceList{gantry.GPUResource: q("8"), corev1.ResourceCPU: q("4")},
				Reserved: corev1.ResourceList{gantry.GPUResource: q("4")}},
			{Name: "w3", Admitted: corev1.ResourceList{gantry.GPUResource: q("12")}, Borrowed: corev1.ResourceList{gantry.GPUResource: q("4")}},
			{Name: "w1", Lent: corev1.ResourceList{gantry.GPUResource: q("6")}},
		}},
	}}
	gqs = append(gqs,
		gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: "alone"}, Spec: gantry.GlobalQueueSpec{
			FairSharing: gantry.FairSharing{Weight: ptr.To[int32](5)}, // no cohort: no effect
			Clusters:    []gantry.ClusterQuota{{Name: "w1", Quota: corev1.ResourceList{gantry.GPUResource: q("4")}}}}},
		gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: "heavy"}, Spec: gantry.GlobalQueueSpec{Cohort: "research",
			FairSharing: gantry.FairSharing{Weight: ptr.To[int32](3)},
			Clusters:    []gantry.ClusterQuota{{Name: "w1", Quota: corev1.ResourceList{gantry.GPUResource: q("4")}}}}})
	gqs[0].Spec.Cohort = "research" // without a weight: 1
	want := []QueueRow{
		{GlobalQueue: "alone", Cluster: "w1", Cohort: "-", Weight: "-", Usage: []string{"nvidia.com/gpu 0/4"}},
		{GlobalQueue: "gpus", Cluster: "w2", Cohort: "research", Weight: "1", Usage: []string{"cpu 4/64", "nvidia.com/gpu 8/16 +4 reserved"}, Pending: 3, Admitted: 2},
		{GlobalQueue: "gpus", Cluster: "w1", Cohort: "research", Weight: "1", Usage: []string{"nvidia.com/gpu 0/8 (6 lent)"}, Pending: 3, Admitted: 2},
		{GlobalQueue: "gpus", Cluster: "w3", Cohort: "research", Weight: "1", Usage: []string{"nvidia.com/gpu 12/8 (4 borrowed)"}, Pending: 3, Admitted: 2},
		{GlobalQueue: "heavy", Cluster: "w1", Cohort: "research", Weight: "3", Usage: []string{"nvidia.com/gpu 0/4"}},
	}
	if diff := cmp.Diff(want, Queues(gqs)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}
