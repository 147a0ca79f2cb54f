package dispatch

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkPlan10kWorkloads100Clusters is one full pass over 10,000 pending workloads in 10 queues that
// share 100 clusters, with a quarter of the clusters' quota already in use. Target: under 50 ms per pass.
func BenchmarkPlan10kWorkloads100Clusters(b *testing.B) {
	s := &Snapshot{Clusters: map[string]Cluster{}, Queues: map[string]*GlobalQueue{}}
	var clusters []string
	for i := 0; i < 100; i++ {
		name := fmt.Sprintf("cluster-%03d", i)
		clusters = append(clusters, name)
		s.Clusters[name] = Cluster{Name: name, Connected: true, AgentReady: true, Cordoned: i%17 == 0}
	}
	for qi := 0; qi < 10; qi++ {
		q := &GlobalQueue{Name: fmt.Sprintf("queue-%d", qi), MaxCandidates: 2, Clusters: clusters, Quota: map[string]Resources{}}
		for _, c := range clusters {
			q.Quota[c] = Resources{"nvidia.com/gpu": 64_000, "cpu": 512_000, "memory": 4 << 40 * 1000}
		}
		s.Queues[q.Name] = q
	}
	for i := 0; i < 4000; i++ { // running: a quarter of all quota
		s.Workloads = append(s.Workloads, &Workload{
			Key: fmt.Sprintf("ns/running-%d", i), GlobalQueue: fmt.Sprintf("queue-%d", i%10), Phase: Admitted,
			Winner: clusters[i%100], Epoch: 1, Nominated: []string{clusters[i%100]},
			Requests: Resources{"nvidia.com/gpu": 4000, "cpu": 32_000, "memory": 64 << 30 * 1000},
		})
	}
	for i := 0; i < 10_000; i++ {
		s.Workloads = append(s.Workloads, &Workload{
			Key: fmt.Sprintf("ns/pending-%d", i), GlobalQueue: fmt.Sprintf("queue-%d", i%10), Priority: int32(i % 3),
			Created:  t0.Add(time.Duration(i) * time.Millisecond),
			Requests: Resources{"nvidia.com/gpu": int64(1+i%8) * 1000, "cpu": 8000, "memory": 32 << 30 * 1000},
		})
	}
	b.ReportAllocs()
	b.ResetTimer()
	var nominated int
	for i := 0; i < b.N; i++ {
		nominated = len(Plan(s).Nominations)
	}
	b.ReportMetric(float64(nominated), "nominations/op")
}
