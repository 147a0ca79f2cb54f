package dispatch

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkPlan10kWorkloads100Clusters is one full pass over 10,000 pending workloads in 10 queues that
// share 100 clusters, with a quarter of the clusters' quota already in use. Target: under 50 ms per pass.
func BenchmarkPlan10kWorkloads100Clusters(b *testing.B) {
	s := benchSnapshot(10, Resources{"nvidia.com/gpu": 64_000, "cpu": 512_000, "memory": 4 << 40 * 1000}, nil)
	benchPlan(b, s)
}

// A dispatch pass with fair sharing on: 50 queues in 5 cohorts under one root, with weights 1 to 3,
// quota on every one of 100 clusters, 4,000 running workloads and 10,000 pending ones. Target: under
// 50 ms per pass.
func BenchmarkPlanFairSharing50Queues5Cohorts(b *testing.B) {
	s := benchSnapshot(50, Resources{"nvidia.com/gpu": 12_000, "cpu": 96_000, "memory": 768 << 30 * 1000}, func(q *GlobalQueue, qi int) {
		w := int32(1 + qi%3)
		q.Cohort, q.Weight = fmt.Sprintf("org-%d", qi%5), &w
	})
	s.Cohorts = map[string]*Cohort{"fleet": {Name: "fleet"}}
	for ci := 0; ci < 5; ci++ {
		w := int32(1 + ci%3)
		s.Cohorts[fmt.Sprintf("org-%d", ci)] = &Cohort{Name: fmt.Sprintf("org-%d", ci), Parent: "fleet", Weight: &w}
	}
	benchPlan(b, s)
}

// benchSnapshot is 100 clusters (every 17th cordoned), the given number of queues with the same quota on
// each (shaped further by shape, if not nil), 4,000 admitted workloads and 10,000 pending ones spread
// over the queues.
func benchSnapshot(queues int, quota Resources, shape func(q *GlobalQueue, qi int)) *Snapshot {
	s := &Snapshot{Clusters: map[string]Cluster{}, Queues: map[string]*GlobalQueue{}}
	var clusters []string
	for i := 0; i < 100; i++ {
		name := fmt.Sprintf("cluster-%03d", i)
		clusters = append(clusters, name)
		s.Clusters[name] = Cluster{Name: name, Connected: true, AgentReady: true, Cordoned: i%17 == 0}
	}
	queueName := func(i int) string { return fmt.Sprintf("queue-%02d", i%queues) }
	for qi := 0; qi < queues; qi++ {
		q := &GlobalQueue{Name: queueName(qi), MaxCandidates: 2, Clusters: clusters, Quota: map[string]Resources{}}
		for _, c := range clusters {
			q.Quota[c] = quota
		}
		if shape != nil {
			shape(q, qi)
		}
		s.Queues[q.Name] = q
	}
	for i := 0; i < 4000; i++ {
		s.Workloads = append(s.Workloads, &Workload{
			Key: fmt.Sprintf("ns/running-%d", i), GlobalQueue: queueName(i), Phase: Admitted,
			Winner: clusters[i%100], Epoch: 1, Nominated: []string{clusters[i%100]},
			Requests: Resources{"nvidia.com/gpu": 4000, "cpu": 32_000, "memory": 64 << 30 * 1000},
		})
	}
	for i := 0; i < 10_000; i++ {
		s.Workloads = append(s.Workloads, &Workload{
			Key: fmt.Sprintf("ns/pending-%d", i), GlobalQueue: queueName(i), Priority: int32(i % 3),
			Created:  t0.Add(time.Duration(i) * time.Millisecond),
			Requests: Resources{"nvidia.com/gpu": int64(1+i%8) * 1000, "cpu": 8000, "memory": 32 << 30 * 1000},
		})
	}
	return s
}

func benchPlan(b *testing.B, s *Snapshot) {
	b.ReportAllocs()
	b.ResetTimer()
	var nominated int
	for i := 0; i < b.N; i++ {
		nominated = len(Plan(s).Nominations)
	}
	b.ReportMetric(float64(nominated), "nominations/op")
}

// BenchmarkPlan100kWaiting100Clusters is a pass over a deep queue at rest: 10 queues on 100 clusters,
// each queue's quota filled by its 4,000 running workloads, and 100,000 pending ones that already show
// the verdict the pass gives them. Nothing changes, so the pass should find so at little cost.
func BenchmarkPlan100kWaiting100Clusters(b *testing.B) {
	benchPlan(b, waiting100k())
}

// BenchmarkPlan100kWaitingInQueueOrder is the same pass over workloads handed over in queue order, as
// the hub keeps its snapshot: each queue's sort then finds its workloads sorted. Target: under 50 ms,
// half of the hub's whole pass.
func BenchmarkPlan100kWaitingInQueueOrder(b *testing.B) {
	s := waiting100k()
	slices.SortFunc(s.Workloads, CompareInQueue)
	benchPlan(b, s)
}

func waiting100k() *Snapshot {
	s := benchSnapshot(10, Resources{"nvidia.com/gpu": 16_000, "cpu": 512_000, "memory": 4 << 40 * 1000}, nil)
	s.Workloads = nil
	for i := 0; i < 4000; i++ { // 4 running workloads of 4 GPUs on each cluster fill each queue's quota there
		c := fmt.Sprintf("cluster-%03d", i/4%100)
		s.Workloads = append(s.Workloads, &Workload{
			Key: fmt.Sprintf("ns/running-%d", i), GlobalQueue: fmt.Sprintf("queue-%02d", i/400), Phase: Admitted,
			Winner: c, Epoch: 1, Nominated: []string{c},
			Requests: Resources{"nvidia.com/gpu": 4000, "cpu": 32_000, "memory": 64 << 30 * 1000},
		})
	}
	// Workloads of the same requests share one map of them, as the hub hands them over.
	var shapes [8]Resources
	for k := range shapes {
		shapes[k] = Resources{"nvidia.com/gpu": int64(1+k) * 1000, "cpu": 8000, "memory": 32 << 30 * 1000}
	}
	for i := 0; i < 100_000; i++ {
		q := fmt.Sprintf("queue-%02d", i%10)
		s.Workloads = append(s.Workloads, &Workload{
			Key: fmt.Sprintf("ns/pending-%d", i), GlobalQueue: q, Priority: int32(i % 3),
			Created:        t0.Add(time.Duration(i) * time.Millisecond),
			Requests:       shapes[i%8],
			PendingReason:  "WaitingForQuota",
			PendingMessage: "waiting for quota of GlobalQueue " + q,
		})
	}
	return s
}
