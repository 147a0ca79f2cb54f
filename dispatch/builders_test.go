package dispatch

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type snapshotBuilder struct{ s *Snapshot }

func makeSnapshot() *snapshotBuilder {
	return &snapshotBuilder{s: &Snapshot{Clusters: map[string]Cluster{}, Queues: map[string]*GlobalQueue{}}}
}

func (b *snapshotBuilder) cluster(names ...string) *snapshotBuilder {
	for _, n := range names {
		b.s.Clusters[n] = Cluster{Name: n, Connected: true, AgentReady: true}
	}
	return b
}

func (b *snapshotBuilder) disconnected(name string) *snapshotBuilder {
	c := b.s.Clusters[name]
	c.Connected = false
	b.s.Clusters[name] = c
	return b
}

// connecting marks a cluster not connected and not yet tried since the hub started.
func (b *snapshotBuilder) connecting(name string) *snapshotBuilder {
	c := b.s.Clusters[name]
	c.Connected, c.Connecting = false, true
	b.s.Clusters[name] = c
	return b
}

func (b *snapshotBuilder) cordoned(name string) *snapshotBuilder {
	c := b.s.Clusters[name]
	c.Cordoned = true
	b.s.Clusters[name] = c
	return b
}

// gpuFree records what the cluster's agent last reported of one GPU product: free GPUs and the most on
// one node, on nodes of 8 GPUs each, 32 in all.
func (b *snapshotBuilder) gpuFree(name, product string, free, largestOnNode int64) *snapshotBuilder {
	c := b.s.Clusters[name]
	c.GPUs = append(c.GPUs, GPUCapacity{Product: product, Allocatable: 32, Free: free, LargestFreeOnNode: largestOnNode, LargestAllocatableOnNode: 8})
	b.s.Clusters[name] = c
	return b
}

func (b *snapshotBuilder) queue(q *GlobalQueue) *snapshotBuilder {
	b.s.Queues[q.Name] = q
	return b
}

func (b *snapshotBuilder) workloads(ws ...*Workload) *snapshotBuilder {
	b.s.Workloads = append(b.s.Workloads, ws...)
	return b
}

func (b *snapshotBuilder) obj() *Snapshot { return b.s }

type queueBuilder struct{ q *GlobalQueue }

func makeQueue(name string) *queueBuilder {
	return &queueBuilder{q: &GlobalQueue{Name: name, MaxCandidates: 2, Quota: map[string]Resources{}}}
}

// quota adds a cluster with the given quota, as pairs of resource name and whole units.
func (b *queueBuilder) quota(cluster string, pairs ...any) *queueBuilder {
	b.q.Clusters = append(b.q.Clusters, cluster)
	r := Resources{}
	for i := 0; i < len(pairs); i += 2 {
		r[corev1.ResourceName(pairs[i].(string))] = int64(pairs[i+1].(int)) * 1000
	}
	b.q.Quota[cluster] = r
	return b
}

// cohort puts the queue in a cohort.
func (b *queueBuilder) cohort(name string) *queueBuilder { b.q.Cohort = name; return b }

// borrowingLimit and lendingLimit cap GPUs (whole units) on a cluster.
func (b *queueBuilder) borrowingLimit(cluster string, gpus int) *queueBuilder {
	if b.q.BorrowingLimit == nil {
		b.q.BorrowingLimit = map[string]Resources{}
	}
	b.q.BorrowingLimit[cluster] = Resources{"nvidia.com/gpu": int64(gpus) * 1000}
	return b
}

func (b *queueBuilder) lendingLimit(cluster string, gpus int) *queueBuilder {
	if b.q.LendingLimit == nil {
		b.q.LendingLimit = map[string]Resources{}
	}
	b.q.LendingLimit[cluster] = Resources{"nvidia.com/gpu": int64(gpus) * 1000}
	return b
}

func (b *queueBuilder) strict() *queueBuilder             { b.q.StrictFIFO = true; return b }
func (b *queueBuilder) maxCandidates(n int) *queueBuilder { b.q.MaxCandidates = n; return b }
func (b *queueBuilder) obj() *GlobalQueue                 { return b.q }

type workloadBuilder struct{ w *Workload }

func makeWorkload(key, queue string) *workloadBuilder {
	return &workloadBuilder{w: &Workload{Key: key, GlobalQueue: queue, Created: t0, Requests: Resources{}}}
}

func (b *workloadBuilder) gpus(n int) *workloadBuilder {
	b.w.Requests["nvidia.com/gpu"] = int64(n) * 1000
	return b
}

// gpuPods sets the GPU demand of pods pods of perPod GPUs each, accepting products (any when none).
func (b *workloadBuilder) gpuPods(pods, perPod int, products ...string) *workloadBuilder {
	b.w.Requests["nvidia.com/gpu"] = int64(pods*perPod) * 1000
	b.w.GPU = GPUDemand{Total: int64(pods * perPod), PerPod: int64(perPod), Products: products}
	return b
}

func (b *workloadBuilder) cpu(n int) *workloadBuilder {
	b.w.Requests["cpu"] = int64(n) * 1000
	return b
}

func (b *workloadBuilder) priority(p int32) *workloadBuilder { b.w.Priority = p; return b }
func (b *workloadBuilder) createdAt(sec int) *workloadBuilder {
	b.w.Created = t0.Add(time.Duration(sec) * time.Second)
	return b
}

func (b *workloadBuilder) nominated(epoch int64, clusters ...string) *workloadBuilder {
	b.w.Epoch, b.w.Nominated = epoch, clusters
	return b
}

// nominatedUnder records the GlobalQueue the nomination was made under.
func (b *workloadBuilder) nominatedUnder(queue string) *workloadBuilder {
	b.w.NominatedQueue = queue
	return b
}

func (b *workloadBuilder) admittedOn(cluster string) *workloadBuilder {
	b.w.Phase, b.w.Winner = Admitted, cluster
	if b.w.Epoch == 0 {
		b.w.Epoch, b.w.Nominated = 1, []string{cluster}
	}
	return b
}

func (b *workloadBuilder) finished() *workloadBuilder { b.w.Phase = Finished; return b }

func (b *workloadBuilder) copyAdmitted(cluster string, atSec int) *workloadBuilder {
	b.w.Copies = append(b.w.Copies, Copy{Cluster: cluster, Admitted: true, AdmittedAt: t0.Add(time.Duration(atSec) * time.Second)})
	return b
}

func (b *workloadBuilder) copyRejected(cluster, reason string) *workloadBuilder {
	b.w.Copies = append(b.w.Copies, Copy{Cluster: cluster, Rejected: true, Reason: reason, Message: "no"})
	return b
}

func (b *workloadBuilder) copyWaiting(cluster, reason, message string) *workloadBuilder {
	b.w.Copies = append(b.w.Copies, Copy{Cluster: cluster, Waiting: true, Reason: reason, Message: message})
	return b
}

func (b *workloadBuilder) pendingMessage(m string) *workloadBuilder { b.w.PendingMessage = m; return b }

// pending records the Pending condition the workload shows.
func (b *workloadBuilder) pending(reason, message string) *workloadBuilder {
	b.w.PendingReason, b.w.PendingMessage = reason, message
	return b
}

// unqueued gives the workload no GlobalQueue: its Queue cannot be resolved, for reason.
func (b *workloadBuilder) unqueued(reason, message string) *workloadBuilder {
	b.w.GlobalQueue, b.w.QueueProblem = "", &QueueProblem{Reason: reason, Message: message}
	return b
}

func (b *workloadBuilder) copyExpired(cluster string) *workloadBuilder {
	b.w.Copies = append(b.w.Copies, Copy{Cluster: cluster, Expired: true, Reason: "ReservationExpired"})
	return b
}

// rejected records, at the zero time a snapshot runs at unless told, the clusters' rejections.
func (b *workloadBuilder) rejected(clusters ...string) *workloadBuilder {
	b.w.Refused = &Refusals{RejectedAt: map[string]time.Time{}}
	for _, c := range clusters {
		b.w.Refused.RejectedAt[c] = time.Time{}
	}
	return b
}

func (b *workloadBuilder) stopped() *workloadBuilder { b.w.Stopped = true; return b }

func (b *workloadBuilder) obj() *Workload { return b.w }

// weight sets the queue's fair-sharing weight.
func (b *queueBuilder) weight(w int32) *queueBuilder { b.q.Weight = &w; return b }

// cohorts adds Cohort objects.
func (b *snapshotBuilder) cohorts(cs ...*Cohort) *snapshotBuilder {
	if b.s.Cohorts == nil {
		b.s.Cohorts = map[string]*Cohort{}
	}
	for _, c := range cs {
		b.s.Cohorts[c.Name] = c
	}
	return b
}

type cohortBuilder struct{ c *Cohort }

func makeCohort(name string) *cohortBuilder { return &cohortBuilder{c: &Cohort{Name: name}} }

func (b *cohortBuilder) parent(p string) *cohortBuilder { b.c.Parent = p; return b }
func (b *cohortBuilder) weight(w int32) *cohortBuilder  { b.c.Weight = &w; return b }
func (b *cohortBuilder) obj() *Cohort                   { return b.c }

// quota gives the cohort GPUs (whole units) of its own on a cluster.
func (b *cohortBuilder) quota(cluster string, gpus int) *cohortBuilder {
	if b.c.Quota == nil {
		b.c.Quota = map[string]Resources{}
	}
	b.c.Quota[cluster] = Resources{"nvidia.com/gpu": int64(gpus) * 1000}
	return b
}

// lendingLimit caps the GPUs (whole units) the cohort lends its parent on a cluster.
func (b *cohortBuilder) lendingLimit(cluster string, gpus int) *cohortBuilder {
	if b.c.LendingLimit == nil {
		b.c.LendingLimit = map[string]Resources{}
	}
	b.c.LendingLimit[cluster] = Resources{"nvidia.com/gpu": int64(gpus) * 1000}
	return b
}

// room records what the cluster's agent last reported of one resource, in whole units.
func (b *snapshotBuilder) room(name, resource string, allocatable, free, largestOnNode int) *snapshotBuilder {
	c := b.s.Clusters[name]
	c.Resources = append(c.Resources, ResourceRoom{Name: corev1.ResourceName(resource), Allocatable: int64(allocatable) * 1000,
		Free: int64(free) * 1000, LargestFreeOnNode: int64(largestOnNode) * 1000, Admitted: AdmittedNotReported})
	b.s.Clusters[name] = c
	return b
}

// admittedReported sets what the cluster's report says its admitted copies ask for of a resource room
// set before.
func (b *snapshotBuilder) admittedReported(name, resource string, admitted int) *snapshotBuilder {
	c := b.s.Clusters[name]
	for i := range c.Resources {
		if c.Resources[i].Name == corev1.ResourceName(resource) {
			c.Resources[i].Admitted = int64(admitted) * 1000
		}
	}
	return b
}
