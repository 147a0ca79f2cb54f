package metrics

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// States of workloads.
const (
	StatePending  = "pending"
	StateAdmitted = "admitted"
	StateFinished = "finished"
)

// ReasonNew is the pending reason of a Workload the dispatcher has not decided on yet.
const ReasonNew = "New"

// MaxGPUProducts bounds the GPU products exported per cluster: the products come from the labels of a
// worker's nodes.
const MaxGPUProducts = 64

// The known values of the collector's bounded labels.
var (
	States         = []string{StatePending, StateAdmitted, StateFinished}
	PendingReasons = []string{ReasonNew, gantry.ReasonWaitingForQuota, gantry.ReasonWaitingForCapacity, gantry.ReasonNoClusterAvailable,
		gantry.ReasonNoClusterCanHold, gantry.ReasonWaitingForAdmission, gantry.ReasonQueueNotFound, gantry.ReasonGlobalQueueNotFound,
		gantry.ReasonNamespaceNotSelected, gantry.ReasonQueueHeld, gantry.ReasonQueueDrained, gantry.ReasonEvicted, gantry.ReasonPreempting, gantry.ReasonStopped}
	ConnectionReasons = []string{gantry.ReasonConnected, gantry.ReasonSecretNotFound, gantry.ReasonInvalidKubeconfig,
		gantry.ReasonInsecureKubeconfig, gantry.ReasonUnreachable, gantry.ReasonMissingAPI, gantry.ReasonUnauthorized,
		gantry.ReasonDuplicateCluster, ReasonUnknown}
	AgentReasons     = []string{gantry.ReasonAgentReporting, gantry.ReasonNoCapacityReport, gantry.ReasonReportStale, gantry.ReasonUnreachable, ReasonUnknown}
	FailoverPolicies = []string{string(gantry.FailoverWait), string(gantry.FailoverFence)}
)

// ReasonUnknown: the hub has not said yet.
const ReasonUnknown = "Unknown"

// Source is what the Collector reads at scrape time, all of it in memory: the hub's caches and what the
// connections remember. It makes no API request and writes nothing.
type Source struct {
	// Reader lists WorkerClusters, GlobalQueues, Queues and Workloads from the hub's cache.
	Reader client.Reader
	// Leading tells whether this replica leads. Only the leader exports state: the replicas' caches
	// hold the same objects, and a sum over replicas would count them twice.
	Leading func() bool
	// Connected tells whether the hub holds a live connection to the cluster.
	Connected func(cluster string) bool
	// LastContact is when the hub last reached the cluster (a connection made or a health check
	// passed); zero when never.
	LastContact func(cluster string) time.Time
	// LeaseRenewed is the start of the last renewal of the hub's lease on the cluster that succeeded;
	// false when this replica renewed none.
	LeaseRenewed func(cluster string) (time.Time, bool)
	Clock        clock.PassiveClock
	// PerQueue also exports each namespace's Queues (gantry_hub_queue_workloads), for tenants' own
	// dashboards: a series per Queue, as many as the tenants make, so the operator opts in.
	PerQueue bool
}

// Collector exports the fleet's state: workloads per GlobalQueue, quota and usage, and each
// WorkerCluster's connection, agent, lease and GPUs.
type Collector struct {
	src Source
}

// NewCollector returns a Collector over src.
func NewCollector(src Source) *Collector {
	if src.Clock == nil {
		src.Clock = clock.RealClock{}
	}
	return &Collector{src: src}
}

// helps holds the help of each family the Collector exports, by name.
var helps = map[string]string{}

func desc(name, help string, labels ...string) *prometheus.Desc {
	helps[name] = help
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	workloadsDesc = desc("gantry_hub_workloads", "Workloads on the hub, by the GlobalQueue they count against and state (pending, admitted, finished).",
		"global_queue", "state")
	pendingDesc = desc("gantry_hub_pending_workloads", "Pending workloads, by GlobalQueue and the reason of their Pending condition (New before the dispatcher decided).",
		"global_queue", "reason")
	oldestPendingDesc = desc("gantry_hub_oldest_pending_workload_age_seconds", "Age of the oldest pending workload of each GlobalQueue, from its creation, stopped ones aside; 0 when none is pending.",
		"global_queue")
	quotaDesc = desc("gantry_hub_global_queue_quota", "Quota of a GlobalQueue on a cluster, per resource of the quota, in the resource's unit (cores, bytes, devices).",
		"global_queue", "cluster", "resource")
	usedDesc = desc("gantry_hub_global_queue_used", "Confirmed usage of a GlobalQueue on a cluster (admitted workloads), per resource of its quota, as the dispatcher last published it.",
		"global_queue", "cluster", "resource")
	reservedDesc = desc("gantry_hub_global_queue_reserved", "Quota of a GlobalQueue reserved on a cluster by nominated workloads no cluster admitted yet, per resource of its quota.",
		"global_queue", "cluster", "resource")
	connectedDesc = desc("gantry_hub_worker_cluster_connected", "1 while the hub holds a live connection to the cluster, else 0; reason is the Connected condition's.",
		"cluster", "reason")
	agentReadyDesc = desc("gantry_hub_worker_cluster_agent_ready", "1 while the cluster's agent publishes fresh capacity reports, else 0; reason is the AgentReady condition's.",
		"cluster", "reason")
	lastContactDesc = desc("gantry_hub_worker_cluster_last_contact_timestamp_seconds", "When the hub last reached the cluster: a connection made or a health check passed (Unix time).",
		"cluster")
	leaseAgeDesc = desc("gantry_hub_worker_cluster_lease_age_seconds", "Time since the start of the last renewal of the hub's lease on the cluster that succeeded.",
		"cluster")
	failoverTimeoutDesc = desc("gantry_hub_worker_cluster_failover_timeout_seconds", "The cluster's failover timeout, with its failover policy (Wait or Fence).",
		"cluster", "policy")
	gpusAllocatableDesc = desc("gantry_hub_worker_cluster_gpus_allocatable", "GPUs of each product on the cluster's Ready nodes, as its agent last reported.",
		"cluster", "product")
	gpusFreeDesc = desc("gantry_hub_worker_cluster_gpus_free", "GPUs of each product free on the cluster (allocatable minus bound pods and reservations), as its agent last reported.",
		"cluster", "product")
	clusterAdmittedDesc = desc("gantry_hub_worker_cluster_admitted_workloads", "Workloads whose winner is the cluster and that have not finished.",
		"cluster")
	clusterRefusingDesc = desc("gantry_hub_worker_cluster_refusing_workloads", "Workloads the cluster won whose Job its API server does not take yet (JobCreated=False, WorkerRefusing: a quota, a policy, RBAC); each is taken back if it goes on.",
		"cluster")
	gpuSecondsDesc = desc("gantry_hub_gpu_seconds_total", "GPU time of the runs of jobs (their GPUs times how long each ran, from its Job's creation on the cluster), ended or running; by namespace and Queue only with --metrics-per-queue.",
		"namespace", "queue", "global_queue", "cluster", "product")
	borrowedGPUSecondsDesc = desc("gantry_hub_borrowed_gpu_seconds_total", "The part of gantry_hub_gpu_seconds_total that ran on quota the GlobalQueue's cohort lent.",
		"namespace", "queue", "global_queue", "cluster", "product")
	lostGPUSecondsDesc = desc("gantry_hub_lost_gpu_seconds_total", "The part of gantry_hub_gpu_seconds_total of runs taken back before they ended (preempted, failed over, stopped, given up): work lost.",
		"namespace", "queue", "global_queue", "cluster", "product")
	gpuCostDesc = desc("gantry_hub_gpu_cost_total", "What gantry_hub_gpu_seconds_total cost at the clusters' prices (WorkerCluster spec.price), where one is set.",
		"namespace", "queue", "global_queue", "cluster", "product")
	lostGPUCostDesc = desc("gantry_hub_lost_gpu_cost_total", "What gantry_hub_lost_gpu_seconds_total cost at the clusters' prices, where one is set.",
		"namespace", "queue", "global_queue", "cluster", "product")
	queueWorkloadsDesc = desc("gantry_hub_queue_workloads", "Workloads of a namespace's Queue, by state (pending, admitted), as the dispatcher last published them in the Queue's status; exported only with --metrics-per-queue.",
		"namespace", "queue", "state")
	allDescs = []*prometheus.Desc{queueWorkloadsDesc, workloadsDesc, pendingDesc, oldestPendingDesc, quotaDesc, usedDesc, reservedDesc, connectedDesc,
		agentReadyDesc, lastContactDesc, leaseAgeDesc, failoverTimeoutDesc, gpusAllocatableDesc, gpusFreeDesc, clusterAdmittedDesc, clusterRefusingDesc,
		gpuSecondsDesc, borrowedGPUSecondsDesc, lostGPUSecondsDesc, gpuCostDesc, lostGPUCostDesc}
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.src.Leading != nil && !c.src.Leading() {
		return
	}
	objs, err := c.list(context.Background())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(workloadsDesc, err)
		return
	}
	emit := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	now := c.src.Clock.Now()
	collectWorkloads(objs, now, emit)
	collectQuota(objs.globals, emit)
	c.collectClusters(objs, now, emit)
	c.collectUsage(objs, now, func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	})
	if c.src.PerQueue {
		collectQueues(objs.queues, emit)
	}
}

// collectQueues exports each Queue's pending and admitted Workloads, from its status.
func collectQueues(queues []gantry.Queue, emit emitFunc) {
	for i := range queues {
		q := &queues[i]
		emit(queueWorkloadsDesc, float64(q.Status.PendingWorkloads), q.Namespace, q.Name, StatePending)
		emit(queueWorkloadsDesc, float64(q.Status.AdmittedWorkloads), q.Namespace, q.Name, StateAdmitted)
	}
}

type emitFunc func(d *prometheus.Desc, v float64, labels ...string)

// objects are the hub's objects as the cache holds them; they are not copied and must not be modified.
type objects struct {
	clusters  []gantry.WorkerCluster
	globals   []gantry.GlobalQueue
	queues    []gantry.Queue
	workloads []gantry.Workload
	usages    []gantry.Usage
}

func (c *Collector) list(ctx context.Context) (*objects, error) {
	var wcs gantry.WorkerClusterList
	var gqs gantry.GlobalQueueList
	var qs gantry.QueueList
	var wls gantry.WorkloadList
	var us gantry.UsageList
	for _, l := range []client.ObjectList{&wcs, &gqs, &qs, &wls, &us} {
		// The cache's own objects: a scrape reads them and copies none.
		if err := c.src.Reader.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing %T: %w", l, err)
		}
	}
	return &objects{clusters: wcs.Items, globals: gqs.Items, queues: qs.Items, workloads: wls.Items, usages: us.Items}, nil
}

// stateOf is the state a Workload counts in; false for one being deleted before it had a winner, which
// nothing counts any more.
func stateOf(wl *gantry.Workload) (string, bool) {
	switch {
	case apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadFinished):
		return StateFinished, true
	case wl.Status.Winner() != "":
		return StateAdmitted, true
	case wl.DeletionTimestamp != nil:
		return "", false
	}
	return StatePending, true
}

// pendingReason is the reason of a pending Workload's Pending condition, within PendingReasons.
func pendingReason(wl *gantry.Workload) string {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending)
	if c == nil || c.Status != metav1.ConditionTrue {
		return ReasonNew
	}
	return Bounded(PendingReasons, c.Reason)
}

// collectWorkloads counts workloads per GlobalQueue: a pending one under the GlobalQueue its Queue names
// now (it is dispatched under it), the others under the one recorded with their nomination. Every
// GlobalQueue gets a row per state, so that rules see 0 rather than nothing.
func collectWorkloads(objs *objects, now time.Time, emit emitFunc) {
	queueOf := make(map[string]string, len(objs.queues))
	for _, q := range objs.queues {
		queueOf[q.Namespace+"/"+q.Name] = q.Spec.GlobalQueue
	}
	type key struct{ queue, label string }
	counts, pending := map[key]int{}, map[key]int{}
	oldest := map[string]time.Time{}
	for _, gq := range objs.globals {
		for _, s := range States {
			counts[key{gq.Name, s}] = 0
		}
		oldest[gq.Name] = time.Time{}
	}
	for i := range objs.workloads {
		wl := &objs.workloads[i]
		state, ok := stateOf(wl)
		if !ok {
			continue
		}
		gq := wl.Status.GlobalQueue
		if state == StatePending {
			if current, found := queueOf[wl.Namespace+"/"+wl.Spec.QueueName]; found {
				gq = current
			}
			pending[key{gq, pendingReason(wl)}]++
			if o := oldest[gq]; !wl.Spec.Stopped && (o.IsZero() || wl.CreationTimestamp.Time.Before(o)) {
				oldest[gq] = wl.CreationTimestamp.Time
			}
		}
		counts[key{gq, state}]++
	}
	for k, n := range counts {
		emit(workloadsDesc, float64(n), k.queue, k.label)
	}
	for k, n := range pending {
		emit(pendingDesc, float64(n), k.queue, k.label)
	}
	for gq, o := range oldest {
		age := 0.0
		if !o.IsZero() {
			age = max(0, now.Sub(o).Seconds())
		}
		emit(oldestPendingDesc, age, gq)
	}
}

// collectQuota exports, per GlobalQueue, cluster of its spec and resource of that cluster's quota, the
// quota and the usage the dispatcher last published in the GlobalQueue's status. Resources outside the
// quota are left out: they do not limit anything, and workloads may name any.
func collectQuota(globals []gantry.GlobalQueue, emit emitFunc) {
	for i := range globals {
		gq := &globals[i]
		usage := make(map[string]*gantry.ClusterUsage, len(gq.Status.Usage))
		for j := range gq.Status.Usage {
			usage[gq.Status.Usage[j].Name] = &gq.Status.Usage[j]
		}
		for _, c := range gq.Spec.Clusters {
			u := usage[c.Name]
			for name, q := range c.Quota {
				emit(quotaDesc, q.AsApproximateFloat64(), gq.Name, c.Name, string(name))
				var used, reserved float64
				if u != nil {
					used, reserved = amount(u.Admitted, name), amount(u.Reserved, name)
				}
				emit(usedDesc, used, gq.Name, c.Name, string(name))
				emit(reservedDesc, reserved, gq.Name, c.Name, string(name))
			}
		}
	}
}

func amount(l corev1.ResourceList, name corev1.ResourceName) float64 {
	q, ok := l[name]
	if !ok {
		return 0
	}
	return q.AsApproximateFloat64()
}

// collectClusters exports each WorkerCluster's connection, agent, contact, lease, failover and GPUs.
func (c *Collector) collectClusters(objs *objects, now time.Time, emit emitFunc) {
	admitted, refusing := map[string]int{}, map[string]int{}
	for i := range objs.workloads {
		wl := &objs.workloads[i]
		if state, _ := stateOf(wl); state != StateAdmitted {
			continue
		}
		admitted[wl.Status.Winner()]++
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadJobCreated); c != nil && c.Status == metav1.ConditionFalse && c.Reason == gantry.ReasonWorkerRefusing {
			refusing[wl.Status.Winner()]++
		}
	}
	for i := range objs.clusters {
		wc := &objs.clusters[i]
		connected := c.src.Connected != nil && c.src.Connected(wc.Name)
		value, reason := connection(wc, connected)
		emit(connectedDesc, value, wc.Name, reason)
		value, reason = agentReady(wc)
		emit(agentReadyDesc, value, wc.Name, reason)
		if c.src.LastContact != nil {
			if t := c.src.LastContact(wc.Name); !t.IsZero() {
				emit(lastContactDesc, float64(t.UnixNano())/1e9, wc.Name)
			}
		}
		if c.src.LeaseRenewed != nil {
			if t, ok := c.src.LeaseRenewed(wc.Name); ok {
				emit(leaseAgeDesc, max(0, now.Sub(t).Seconds()), wc.Name)
			}
		}
		policy := wc.Spec.Failover.Policy
		if policy == "" {
			policy = gantry.FailoverWait
		}
		emit(failoverTimeoutDesc, wc.Spec.Failover.TimeoutOrDefault().Seconds(), wc.Name, Bounded(FailoverPolicies, string(policy)))
		emit(clusterAdmittedDesc, float64(admitted[wc.Name]), wc.Name)
		emit(clusterRefusingDesc, float64(refusing[wc.Name]), wc.Name)
		collectGPUs(wc, emit)
	}
}

// connection is 1 with reason Connected while the hub holds a live connection; else 0 with the reason
// the Connected condition gives, or Unknown while the condition does not say why (the hub has not
// checked the cluster since it lost it).
func connection(wc *gantry.WorkerCluster, connected bool) (float64, string) {
	if connected {
		return 1, gantry.ReasonConnected
	}
	c := apimeta.FindStatusCondition(wc.Status.Conditions, gantry.ClusterConnected)
	if c == nil || c.Status == metav1.ConditionTrue {
		return 0, ReasonUnknown
	}
	return 0, Bounded(ConnectionReasons, c.Reason)
}

func agentReady(wc *gantry.WorkerCluster) (float64, string) {
	c := apimeta.FindStatusCondition(wc.Status.Conditions, gantry.ClusterAgentReady)
	switch {
	case c == nil:
		return 0, ReasonUnknown
	case c.Status == metav1.ConditionTrue:
		return 1, Bounded(AgentReasons, c.Reason)
	}
	return 0, Bounded(AgentReasons, c.Reason)
}

func collectGPUs(wc *gantry.WorkerCluster, emit emitFunc) {
	if wc.Status.Capacity == nil {
		return
	}
	products := wc.Status.Capacity.GPUProducts
	if len(products) > MaxGPUProducts {
		products = append([]gantry.GPUProductCapacity(nil), products...)
		sort.Slice(products, func(a, b int) bool { return products[a].Product < products[b].Product })
		products = products[:MaxGPUProducts]
	}
	for _, p := range products {
		emit(gpusAllocatableDesc, float64(p.Allocatable), wc.Name, p.Product)
		emit(gpusFreeDesc, float64(p.Free), wc.Name, p.Product)
	}
}
