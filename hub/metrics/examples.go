package metrics

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// staticReader lists fixed objects, as the hub's cache would hold them.
type staticReader struct{ objs objects }

func (r staticReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return fmt.Errorf("the collector only lists")
}

func (r staticReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	switch l := list.(type) {
	case *gantry.WorkerClusterList:
		l.Items = r.objs.clusters
	case *gantry.GlobalQueueList:
		l.Items = r.objs.globals
	case *gantry.QueueList:
		l.Items = r.objs.queues
	case *gantry.WorkloadList:
		l.Items = r.objs.workloads
	case *gantry.UsageList:
		l.Items = r.objs.usages
	default:
		return fmt.Errorf("unexpected list %T", list)
	}
	return nil
}

// ExampleSource is a Source with one GlobalQueue on one connected WorkerCluster, one pending and one
// admitted Workload: enough for the Collector to export a series of every family.
func ExampleSource() Source {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason}
	}
	wc := gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "example"}}
	wc.Status.Conditions = []metav1.Condition{cond(gantry.ClusterConnected, metav1.ConditionTrue, gantry.ReasonConnected),
		cond(gantry.ClusterAgentReady, metav1.ConditionTrue, gantry.ReasonAgentReporting)}
	wc.Status.Capacity = &gantry.CapacitySummary{GPUProducts: []gantry.GPUProductCapacity{{Product: "example", Allocatable: 8, Free: 4}}}
	gpus := corev1.ResourceList{gantry.GPUResource: resource.MustParse("8")}
	gq := gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: "example"},
		Spec: gantry.GlobalQueueSpec{Clusters: []gantry.ClusterQuota{{Name: "example", Quota: gpus}}}}
	gq.Status.Usage = []gantry.ClusterUsage{{Name: "example", Admitted: corev1.ResourceList{gantry.GPUResource: resource.MustParse("4")}}}
	q := gantry.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: "example", Name: "example"}, Spec: gantry.QueueSpec{GlobalQueue: "example"}}
	pending := gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "example", Name: "pending", CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))},
		Spec: gantry.WorkloadSpec{QueueName: "example"}}
	pending.Status.Conditions = []metav1.Condition{cond(gantry.WorkloadPending, metav1.ConditionTrue, gantry.ReasonWaitingForQuota)}
	admitted := gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "example", Name: "admitted"}, Spec: gantry.WorkloadSpec{QueueName: "example"},
		Status: gantry.WorkloadStatus{GlobalQueue: "example", ClusterName: "example",
			Runs: []gantry.Run{{Cluster: "example", Epoch: 1, GlobalQueue: "example", GPUs: 4, Started: metav1.NewTime(now.Add(-time.Hour))}}}}
	wc.Spec.Price = &gantry.ClusterPrice{GPU: []gantry.GPUPrice{{PerHour: "2"}}}
	usage := gantry.Usage{ObjectMeta: metav1.ObjectMeta{Namespace: "example", Name: gantry.UsageName}, Status: gantry.UsageStatus{
		Totals: []gantry.UsageEntry{{Queue: "example", GlobalQueue: "example", Cluster: "example", GPUProduct: "example",
			GPUSeconds: 7200, BorrowedGPUSeconds: 3600, LostGPUSeconds: 1800, Cost: "4", LostCost: "1"}}}}
	return Source{
		Reader: staticReader{objects{clusters: []gantry.WorkerCluster{wc}, globals: []gantry.GlobalQueue{gq},
			queues: []gantry.Queue{q}, workloads: []gantry.Workload{pending, admitted}, usages: []gantry.Usage{usage}}},
		Leading:      func() bool { return true },
		Connected:    func(string) bool { return true },
		LastContact:  func(string) time.Time { return now.Add(-10 * time.Second) },
		LeaseRenewed: func(string) (time.Time, bool) { return now.Add(-5 * time.Second), true },
		PerQueue:     true,
		Clock:        fixedClock(now),
	}
}

// fixedClock is a clock that stands still.
type fixedClock time.Time

func (c fixedClock) Now() time.Time                  { return time.Time(c) }
func (c fixedClock) Since(t time.Time) time.Duration { return time.Time(c).Sub(t) }
