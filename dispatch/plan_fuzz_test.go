package dispatch

import (
	"fmt"
	"slices"
	"testing"
	"time"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
)

// model is the persisted hub state plus the copies on workers, driven by random events. Each dispatch
// pass rebuilds its snapshot from the model, as the hub does after a restart, so restarts need no event
// of their own.
type model struct {
	clusters  []string
	connected map[string]bool
	quota     map[string]int64
	workloads []*Workload
	copies    map[string]map[string]*modelCopy // key -> cluster -> copy
	clock     int
	winners   map[string]string
}

type modelCopy struct {
	epoch    int64
	admitted bool
	at       time.Time
	rejected bool
}

func newModel(data []byte) (*model, []byte) {
	m := &model{
		clusters:  []string{"a", "b", "c"},
		connected: map[string]bool{"a": true, "b": true, "c": true},
		quota:     map[string]int64{},
		copies:    map[string]map[string]*modelCopy{},
		winners:   map[string]string{},
	}
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := int(data[0])
		data = data[1:]
		return b
	}
	for _, c := range m.clusters {
		m.quota[c] = int64(next()%17) * 1000
	}
	n := 1 + next()%8
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("ns/w%d", i)
		m.workloads = append(m.workloads, &Workload{
			Key: key, GlobalQueue: "q", Priority: int32(next() % 3), Created: t0.Add(time.Duration(i) * time.Second),
			Requests: Resources{"nvidia.com/gpu": int64(1+next()%8) * 1000},
		})
		m.copies[key] = map[string]*modelCopy{}
	}
	return m, data
}

func (m *model) snapshot(strict bool, maxCandidates int) *Snapshot {
	q := &GlobalQueue{Name: "q", StrictFIFO: strict, MaxCandidates: maxCandidates, Clusters: m.clusters, Quota: map[string]Resources{}}
	s := &Snapshot{Clusters: map[string]Cluster{}, Queues: map[string]*GlobalQueue{"q": q}}
	for _, c := range m.clusters {
		s.Clusters[c] = Cluster{Name: c, Connected: m.connected[c], AgentReady: true}
		q.Quota[c] = Resources{"nvidia.com/gpu": m.quota[c]}
	}
	for _, w := range m.workloads {
		cw := *w
		cw.Copies = nil
		for _, c := range m.clusters {
			// The snapshot builder only passes copies of the current epoch on connected clusters.
			if cp := m.copies[w.Key][c]; cp != nil && cp.epoch == w.Epoch && m.connected[c] {
				cw.Copies = append(cw.Copies, Copy{Cluster: c, Admitted: cp.admitted, AdmittedAt: cp.at, Rejected: cp.rejected, Reason: gantry.ReasonNeverFits})
			}
		}
		s.Workloads = append(s.Workloads, &cw)
	}
	return s
}

func (m *model) byKey(key string) *Workload {
	for _, w := range m.workloads {
		if w.Key == key {
			return w
		}
	}
	return nil
}

func (m *model) apply(t *testing.T, r Result) {
	for _, win := range r.Winners {
		w := m.byKey(win.Key)
		if w.Winner != "" || m.winners[w.Key] != "" {
			t.Fatalf("second winner %s for %s, already won by %s", win.Cluster, w.Key, m.winners[w.Key])
		}
		cp := m.copies[w.Key][win.Cluster]
		if cp == nil || !cp.admitted || cp.epoch != w.Epoch || !slices.Contains(w.Nominated, win.Cluster) {
			t.Fatalf("winner %s of %s has no admitted copy of epoch %d (nominated %v)", win.Cluster, w.Key, w.Epoch, w.Nominated)
		}
		w.Winner, w.Phase = win.Cluster, Admitted
		m.winners[w.Key] = win.Cluster
		for c := range m.copies[w.Key] {
			if c != win.Cluster {
				delete(m.copies[w.Key], c) // withdrawn
			}
		}
	}
	for key, rejs := range r.Rejections {
		w := m.byKey(key)
		if w.Rejected == nil {
			w.Rejected = map[string]bool{}
		}
		for _, rj := range rejs {
			w.Rejected[rj.Cluster] = true
		}
	}
	for _, v := range r.Verdicts {
		if w := m.byKey(v.Key); v.Withdraw {
			w.Nominated = nil
		}
	}
	for _, n := range r.Nominations {
		w := m.byKey(n.Key)
		if w.Winner != "" || n.Epoch != w.Epoch+1 {
			t.Fatalf("bad nomination %+v of %+v", n, w)
		}
		w.Epoch, w.Nominated = n.Epoch, n.Clusters
		for _, c := range n.Clusters {
			if m.connected[c] {
				m.copies[w.Key][c] = &modelCopy{epoch: n.Epoch}
			}
		}
	}
}

func (m *model) checkQuota(t *testing.T) {
	for _, c := range m.clusters {
		var admitted, reserved int64
		for _, w := range m.workloads {
			gpus := w.Requests["nvidia.com/gpu"]
			switch {
			case w.Phase == Admitted && w.Winner == c:
				admitted += gpus
			case w.Phase == Pending && w.Epoch > 0 && slices.Contains(w.Nominated, c):
				reserved += gpus
			}
		}
		if admitted > m.quota[c] {
			t.Fatalf("confirmed usage %d on %s exceeds quota %d", admitted, c, m.quota[c])
		}
		if admitted+reserved > m.quota[c] {
			t.Fatalf("usage %d plus reservations %d on %s exceed quota %d", admitted, reserved, c, m.quota[c])
		}
	}
}

// FuzzPlanAtMostOneWinnerWithinQuota drives dispatch passes, agent admissions and rejections, lost and
// regained clusters and finishing jobs in random order, and checks after every step that no workload
// ever gets a second winner and that quota is never exceeded.
func FuzzPlanAtMostOneWinnerWithinQuota(f *testing.F) {
	f.Add([]byte{8, 8, 8, 4, 1, 2, 3, 4, 5, 6, 0, 1, 0, 1, 1, 1, 0, 3, 0, 4, 0})
	f.Add([]byte{16, 0, 4, 7, 7, 7, 7, 7, 7, 7, 7, 7, 0, 1, 2, 0, 1, 5, 0, 3, 1, 0, 2, 7, 0})
	f.Add([]byte{2, 2, 2, 2, 0, 0, 0, 0, 1, 3, 0, 3, 0, 1, 1, 0, 2, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, ops := newModel(data)
		strict := len(data) > 0 && data[0]%2 == 1
		maxCandidates := 1 + len(data)%3
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%6, int(ops[i+1])
			w := m.workloads[arg%len(m.workloads)]
			c := m.clusters[(arg/8)%len(m.clusters)]
			switch op {
			case 0, 5:
				m.apply(t, Plan(m.snapshot(strict, maxCandidates)))
			case 1:
				if cp := m.copies[w.Key][c]; cp != nil && !cp.admitted && !cp.rejected {
					m.clock++
					cp.admitted, cp.at = true, t0.Add(time.Duration(m.clock)*time.Second)
				}
			case 2:
				if cp := m.copies[w.Key][c]; cp != nil && !cp.admitted {
					cp.rejected = true
				}
			case 3:
				m.connected[c] = !m.connected[c]
			case 4:
				if w.Phase == Admitted {
					w.Phase = Finished
				}
			}
			m.checkQuota(t)
		}
	})
}
