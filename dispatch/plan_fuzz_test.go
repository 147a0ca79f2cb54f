package dispatch

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// model is the persisted hub state plus the copies on workers, driven by random events. Each dispatch
// pass rebuilds its snapshot from the model, as the hub does after a restart, so restarts need no event
// of their own. Two GlobalQueues share the clusters; a workload's Queue may be pointed at the other one
// at any time. The two may form a cohort, lending each other what they leave unused within limits, or
// be in two cohorts under a parent, each cohort and the parent holding quota of their own and the first
// cohort lending its parent within a limit.
type model struct {
	clusters    []string
	connected   map[string]bool
	quota       map[string]map[string]int64 // queue -> cluster -> GPUs
	cohort      bool
	tree        bool
	incremental bool
	own         map[string]map[string]int64 // cohort -> cluster -> GPUs it holds itself (tree only)
	leftLends   map[string]int64            // cluster -> GPUs cohort "left" lends "top"; -1: not limited
	weights     map[string]int32
	lend        map[string]map[string]int64 // queue -> cluster -> GPUs it may lend (its quota when not limited)
	borrow      map[string]map[string]int64 // queue -> cluster -> GPUs it may borrow; -1: not limited
	workloads   []*Workload
	queueOf     map[string]string                // key -> the GlobalQueue its Queue names now
	recorded    map[string]string                // key -> the GlobalQueue recorded with its nomination
	copies      map[string]map[string]*modelCopy // key -> cluster -> copy
	clock       int
	winners     map[string]string
	// rules are the queues' preemption rules; preemptedBy the preemptor of each workload preempted.
	rules       map[string]gantry.PreemptionPolicy
	preemptedBy map[string]string
}

var modelQueues = []string{"q", "r"}

// treeCohorts are the cohorts of a tree: q is in left, r in right, both under top.
var treeCohorts = []string{"top", "left", "right"}

type modelCopy struct {
	epoch    int64
	admitted bool
	at       time.Time
	rejected bool
	waiting  bool // its agent cannot admit it now
	// without are the workloads its agent names, whose going would let it fit
	without []string
}

func newModel(data []byte) (*model, []byte) {
	m := &model{
		clusters:  []string{"a", "b", "c"},
		connected: map[string]bool{"a": true, "b": true, "c": true},
		quota:     map[string]map[string]int64{"q": {}, "r": {}},
		queueOf:   map[string]string{},
		recorded:  map[string]string{},
		copies:    map[string]map[string]*modelCopy{},
		winners:   map[string]string{},
		// Drawn from the input's length, so that inputs found before preemption keep their meaning.
		rules:       map[string]gantry.PreemptionPolicy{},
		preemptedBy: map[string]string{},
	}
	drawn := []gantry.PreemptionRule{gantry.PreemptNever, gantry.PreemptLowerPriority, gantry.PreemptLowerOrEqualPriority}
	for i, q := range modelQueues {
		n := len(data) + i
		m.rules[q] = gantry.PreemptionPolicy{WithinQueue: []gantry.PreemptionRule{gantry.PreemptNever, gantry.PreemptLowerPriority,
			gantry.PreemptLowerOrNewerEqualPriority}[n%3], ReclaimWithinCohort: drawn[(n/3)%3], FairSharing: drawn[(n/9)%3]}
	}
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := int(data[0])
		data = data[1:]
		return b
	}
	for i, c := range m.clusters {
		m.quota["q"][c] = int64(next()%17) * 1000
		m.quota["r"][m.clusters[(i+1)%len(m.clusters)]] = m.quota["q"][c]
	}
	sharing := next() % 6
	m.cohort, m.tree, m.incremental = sharing%3 > 0, sharing%3 == 2, sharing >= 3
	m.own, m.leftLends, m.weights = map[string]map[string]int64{}, map[string]int64{}, map[string]int32{}
	for _, q := range modelQueues {
		m.weights[q] = int32(next() % 3)
	}
	for _, name := range treeCohorts {
		m.own[name] = map[string]int64{}
		for _, c := range m.clusters {
			if m.tree {
				m.own[name][c] = int64(next()%3) * 2000 // 0, 2 or 4 GPUs
			}
		}
	}
	for _, c := range m.clusters {
		m.leftLends[c] = -1
		if m.tree && next()%2 == 1 {
			m.leftLends[c] = int64(next()%5) * 1000
		}
	}
	m.lend, m.borrow = map[string]map[string]int64{}, map[string]map[string]int64{}
	for _, q := range modelQueues {
		m.lend[q], m.borrow[q] = map[string]int64{}, map[string]int64{}
		for _, c := range m.clusters {
			m.lend[q][c] = m.quota[q][c] * int64(next()%3) / 2 // none, half or all of it
			m.borrow[q][c] = -1
			if b := next() % 3; b > 0 {
				m.borrow[q][c] = int64(b-1) * 4000 // 0 or 4 GPUs
			}
		}
	}
	n := 1 + next()%8
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("ns/w%d", i)
		m.workloads = append(m.workloads, &Workload{
			Key: key, GlobalQueue: "q", Priority: int32(next() % 3), Created: t0.Add(time.Duration(i) * time.Second),
			Requests: Resources{"nvidia.com/gpu": int64(1+next()%8) * 1000},
		})
		m.copies[key] = map[string]*modelCopy{}
		m.queueOf[key] = "q"
	}
	return m, data
}

// room is what the cluster's agent reports of its 32 GPUs, 8 a node: none, 8, 16 or 24 free, or no
// report; and what its admitted copies ask for: not said, the rest of the 32, or none. Drawn from the
// number of workloads, so that inputs found before reports keep their meaning.
func (m *model) room(i int) []ResourceRoom {
	free := int64((len(m.workloads)+i)%5) * 8000
	if free == 32000 {
		return nil
	}
	admitted := []int64{AdmittedNotReported, 32000 - free, 0}[(len(m.workloads)+i)%3]
	return []ResourceRoom{{Name: "nvidia.com/gpu", Allocatable: 32000, Free: free, LargestFreeOnNode: min(free, 8000), Admitted: admitted}}
}

func (m *model) snapshot(strict bool, maxCandidates int) *Snapshot {
	s := &Snapshot{Clusters: map[string]Cluster{}, Queues: map[string]*GlobalQueue{}}
	for _, name := range modelQueues {
		q := &GlobalQueue{Name: name, StrictFIFO: strict, MaxCandidates: maxCandidates, Clusters: m.clusters, Quota: map[string]Resources{},
			Incremental: m.incremental, Preemption: m.rules[name]}
		for _, c := range m.clusters {
			q.Quota[c] = Resources{"nvidia.com/gpu": m.quota[name][c]}
		}
		if m.cohort {
			q.Cohort, q.BorrowingLimit, q.LendingLimit = "shared", map[string]Resources{}, map[string]Resources{}
			if m.tree {
				q.Cohort = map[string]string{"q": "left", "r": "right"}[name]
			}
			w := m.weights[name]
			q.Weight = &w
			for _, c := range m.clusters {
				q.LendingLimit[c] = Resources{"nvidia.com/gpu": m.lend[name][c]}
				if m.borrow[name][c] >= 0 {
					q.BorrowingLimit[c] = Resources{"nvidia.com/gpu": m.borrow[name][c]}
				}
			}
		}
		s.Queues[name] = q
	}
	for i, c := range m.clusters {
		s.Clusters[c] = Cluster{Name: c, Connected: m.connected[c], AgentReady: true, Resources: m.room(i)}
	}
	if m.tree {
		s.Cohorts = map[string]*Cohort{}
		for _, name := range treeCohorts {
			co := &Cohort{Name: name, Quota: map[string]Resources{}, LendingLimit: map[string]Resources{}}
			if name != "top" {
				co.Parent = "top"
			}
			for _, c := range m.clusters {
				co.Quota[c] = Resources{"nvidia.com/gpu": m.own[name][c]}
				if name == "left" && m.leftLends[c] >= 0 {
					co.LendingLimit[c] = Resources{"nvidia.com/gpu": m.leftLends[c]}
				}
			}
			s.Cohorts[name] = co
		}
	}
	for _, w := range m.workloads {
		cw := *w
		cw.Copies = nil
		// As the snapshot builder does: a pending workload is dispatched under the queue its Queue names
		// now; an admitted one counts where it was nominated.
		cw.GlobalQueue, cw.NominatedQueue = m.queueOf[w.Key], m.recorded[w.Key]
		if w.Phase != Pending {
			cw.GlobalQueue = m.recorded[w.Key]
		}
		for _, c := range m.clusters {
			// The snapshot builder only passes copies of the current epoch on connected clusters.
			if cp := m.copies[w.Key][c]; cp != nil && cp.epoch == w.Epoch && m.connected[c] {
				cp := Copy{Cluster: c, Admitted: cp.admitted, AdmittedAt: cp.at, Rejected: cp.rejected, Waiting: cp.waiting, Reason: gantry.ReasonNeverFits,
					WouldFitWithout: cp.without}
				if cp.Waiting {
					cp.Reason = "InsufficientResources"
				}
				cw.Copies = append(cw.Copies, cp)
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
	checkVerdictsComeAlone(t, r)
	checkStoppedStay(t, m, r)
	for _, win := range r.Winners {
		w := m.byKey(win.Key)
		if w.Winner != "" || m.winners[w.Key] != "" {
			t.Fatalf("second winner %s for %s, already won by %s", win.Cluster, w.Key, m.winners[w.Key])
		}
		cp := m.copies[w.Key][win.Cluster]
		if cp == nil || !cp.admitted || cp.epoch != w.Epoch || !slices.Contains(w.Nominated, win.Cluster) {
			t.Fatalf("winner %s of %s has no admitted copy of epoch %d (nominated %v)", win.Cluster, w.Key, w.Epoch, w.Nominated)
		}
		if q := m.recorded[w.Key]; win.GlobalQueue != q || q != m.queueOf[w.Key] {
			t.Fatalf("winner of %s under %s, nominated under %s, its Queue names %s", w.Key, win.GlobalQueue, q, m.queueOf[w.Key])
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
		if w.Refused == nil {
			w.Refused = &Refusals{RejectedAt: map[string]time.Time{}}
		}
		for _, rj := range rejs {
			w.Refused.RejectedAt[rj.Cluster] = time.Time{}
		}
	}
	m.applyPreemptions(t, r)
	for _, v := range r.Verdicts {
		if w := m.byKey(v.Key); v.Withdraw {
			w.Nominated = nil
		}
	}
	for _, n := range r.Nominations {
		w := m.byKey(n.Key)
		if w.Winner != "" || n.Epoch != w.Epoch+1 || n.GlobalQueue != m.queueOf[w.Key] {
			t.Fatalf("bad nomination %+v of %+v (its Queue names %s)", n, w, m.queueOf[w.Key])
		}
		w.Epoch, w.Nominated = n.Epoch, n.Clusters
		m.recorded[w.Key] = n.GlobalQueue
		for _, c := range n.Clusters {
			if m.connected[c] {
				m.copies[w.Key][c] = &modelCopy{epoch: n.Epoch}
			}
		}
	}
}

// applyPreemptions checks that the pass preempted no more than its bound, only running workloads not
// being preempted already, each once, never one of higher priority, each by a rule of the preemptor's
// queue and never one that preempted the preemptor; then marks them.
func (m *model) applyPreemptions(t *testing.T, r Result) {
	if len(r.Preemptions) > MaxPreemptionsPerPass {
		t.Fatalf("%d preemptions in one pass", len(r.Preemptions))
	}
	for _, p := range r.Preemptions {
		v, by := m.byKey(p.Victim), m.byKey(p.Preemptor)
		if v.Phase != Admitted || v.Winner != p.Cluster || v.PreemptedFor != "" {
			t.Fatalf("preemption %+v of a workload not running there, or already preempted: %+v", p, v)
		}
		if by.Phase != Pending || v.Priority > by.Priority {
			t.Fatalf("preemption %+v: preemptor %+v, victim %+v", p, by, v)
		}
		if m.preemptedBy[p.Preemptor] == p.Victim {
			t.Fatalf("preemption %+v: the victim had preempted its preemptor", p)
		}
		rules, sameQueue := m.rules[m.queueOf[by.Key]], m.recorded[v.Key] == m.queueOf[by.Key]
		switch {
		case p.Reason == gantry.ReasonInQueuePriority && sameQueue && mayPreempt(rules.WithinQueue, by, v):
		case p.Reason == gantry.ReasonInCohortReclamation && !sameQueue && m.cohort && mayPreempt(rules.ReclaimWithinCohort, by, v):
		case p.Reason == gantry.ReasonInCohortFairSharing && !sameQueue && m.cohort && mayPreempt(rules.FairSharing, by, v):
		default:
			t.Fatalf("preemption %+v not allowed by %+v", p, rules)
		}
		v.PreemptedFor = p.Preemptor
		m.preemptedBy[v.Key] = p.Preemptor
	}
}

// admittedOn names the workloads running on the cluster of at most the priority, as an agent's what-if
// would (the hub must not trust it further).
func (m *model) admittedOn(c string, priority int32) []string {
	var keys []string
	for _, w := range m.workloads {
		if w.Phase == Admitted && w.Winner == c && w.Priority <= priority {
			keys = append(keys, w.Key)
		}
	}
	return keys
}

// requeue takes a preempted workload back once its job is gone, as the hub does.
func (m *model) requeue(w *Workload) {
	w.Phase, w.Winner, w.PreemptedFor, w.Nominated = Pending, "", "", nil
	delete(m.winners, w.Key)
	m.copies[w.Key] = map[string]*modelCopy{}
}

// checkQuota checks every (GlobalQueue, cluster): admitted workloads count where they were nominated,
// reservations only while the workload's Queue still names that GlobalQueue (otherwise they can never
// win there). Without a cohort a queue stays within its quota; in one, within its quota plus its
// borrowing limit, and the queues together borrow no more than they lend: what each uses beyond the
// part of its quota it does not lend sums to at most what they may lend.
func (m *model) checkQuota(t *testing.T) {
	for _, c := range m.clusters {
		var pooledAdmitted, pooledUsed, lendable int64
		for _, q := range modelQueues {
			admitted, reserved := m.usage(q, c)
			limit := m.quota[q][c]
			if m.cohort {
				if m.borrow[q][c] >= 0 {
					limit += m.borrow[q][c]
				} else {
					limit = math.MaxInt64
				}
				guarded := m.quota[q][c] - m.lend[q][c]
				pooledAdmitted += max(0, admitted-guarded)
				pooledUsed += max(0, admitted+reserved-guarded)
				lendable += m.lend[q][c]
			}
			if admitted > limit {
				t.Fatalf("confirmed usage %d of %s on %s exceeds its quota %d (and what it may borrow)", admitted, q, c, m.quota[q][c])
			}
			if admitted+reserved > limit {
				t.Fatalf("usage %d plus reservations %d of %s on %s exceed its quota %d (and what it may borrow)", admitted, reserved, q, c, m.quota[q][c])
			}
		}
		if m.tree {
			m.checkTree(t, c)
		} else if pooledAdmitted > lendable || pooledUsed > lendable {
			t.Fatalf("on %s the cohort borrows %d confirmed, %d with reservations, of %d lent", c, pooledAdmitted, pooledUsed, lendable)
		}
	}
}

// checkTree checks, on a cluster, that the tree's queues together use no more than the tree holds (the
// queues' quota and the cohorts' own), and that neither queue uses more than its quota, its cohort's
// own quota, the parent's own and what the other cohort lends the parent (for left: within its limit).
func (m *model) checkTree(t *testing.T, c string) {
	lends := map[string]int64{}
	for _, pair := range [][2]string{{"left", "q"}, {"right", "r"}} {
		lends[pair[0]] = m.own[pair[0]][c] + m.lend[pair[1]][c]
	}
	if l := m.leftLends[c]; l >= 0 {
		lends["left"] = min(lends["left"], l)
	}
	held := m.own["top"][c] + m.own["left"][c] + m.own["right"][c] + m.quota["q"][c] + m.quota["r"][c]
	qa, qr := m.usage("q", c)
	ra, rr := m.usage("r", c)
	if qa+ra > held || qa+qr+ra+rr > held {
		t.Fatalf("on %s the tree's queues use %d confirmed, %d with reservations, of %d it holds", c, qa+ra, qa+qr+ra+rr, held)
	}
	for _, b := range []struct {
		queue, cohort, other string
		use                  int64
	}{{"q", "left", "right", qa + qr}, {"r", "right", "left", ra + rr}} {
		if most := m.quota[b.queue][c] + m.own[b.cohort][c] + m.own["top"][c] + lends[b.other]; b.use > most {
			t.Fatalf("on %s queue %s uses %d with reservations, more than the %d its tree may give it", c, b.queue, b.use, most)
		}
	}
}

// usage is what a queue's admitted workloads use on the cluster and its nominated ones reserve there.
func (m *model) usage(q, c string) (admitted, reserved int64) {
	for _, w := range m.workloads {
		gpus := w.Requests["nvidia.com/gpu"]
		if m.recorded[w.Key] != q {
			continue
		}
		switch {
		case w.Phase == Admitted && w.Winner == c:
			admitted += gpus
		case w.Phase == Pending && w.Epoch > 0 && slices.Contains(w.Nominated, c) && m.queueOf[w.Key] == q:
			reserved += gpus
		}
	}
	return admitted, reserved
}

// checkSameInAnyOrder checks that a pass decides the same over the snapshot's workloads handed over in
// reverse and in queue order (the order the hub keeps, which a pass does not sort again).
func checkSameInAnyOrder(t *testing.T, s *Snapshot, want Result) {
	t.Helper()
	for name, order := range map[string]func([]*Workload){
		"reversed":       slices.Reverse[[]*Workload],
		"in queue order": func(ws []*Workload) { slices.SortStableFunc(ws, CompareInQueue) },
	} {
		again := *s
		again.Workloads = slices.Clone(s.Workloads)
		order(again.Workloads)
		if got := Plan(&again); !cmp.Equal(want, got, cmpopts.EquateEmpty()) {
			t.Fatalf("a pass over the workloads %s decides otherwise (-first +again):\n%s", name, cmp.Diff(want, got, cmpopts.EquateEmpty()))
		}
	}
}

// checkSameTallied checks that a pass decides and counts the same when the snapshot counts its admitted
// workloads in tallies rather than listing them: all of them, and every other one.
func checkSameTallied(t *testing.T, s *Snapshot, want Result, wantUsage Usage) {
	t.Helper()
	for name, tally := range map[string]func(i int) bool{
		"all":         func(int) bool { return true },
		"every other": func(i int) bool { return i%2 == 0 },
	} {
		again := talliedSnapshot(s, tally)
		got, usage := PlanWithUsage(again)
		if !cmp.Equal(want, got, cmpopts.EquateEmpty()) {
			t.Fatalf("a pass over %s admitted workloads tallied decides otherwise (-listed +tallied):\n%s", name, cmp.Diff(want, got, cmpopts.EquateEmpty()))
		}
		if !cmp.Equal(wantUsage, usage, cmpopts.EquateEmpty()) || !cmp.Equal(wantUsage, UsageOf(again), cmpopts.EquateEmpty()) {
			t.Fatalf("a pass over %s admitted workloads tallied counts otherwise (-listed +tallied):\n%s", name, cmp.Diff(wantUsage, usage, cmpopts.EquateEmpty()))
		}
	}
}

// talliedSnapshot is the snapshot with the talliable workloads that tally picks (by their index among
// the talliable) counted in tallies instead of listed.
func talliedSnapshot(s *Snapshot, tally func(i int) bool) *Snapshot {
	again := *s
	again.Workloads, again.Tallies, again.Tallied = nil, nil, nil
	index := map[[3]string]int{}
	n := 0
	for _, w := range s.Workloads {
		if !w.Talliable() {
			again.Workloads = append(again.Workloads, w)
			continue
		}
		if n++; !tally(n - 1) {
			again.Workloads = append(again.Workloads, w)
			continue
		}
		k := [3]string{w.GlobalQueue, w.Winner, strconv.Itoa(int(w.Priority))}
		i, ok := index[k]
		if !ok {
			i = len(again.Tallies)
			index[k] = i
			again.Tallies = append(again.Tallies, Tally{GlobalQueue: w.GlobalQueue, Cluster: w.Winner, Priority: w.Priority})
		}
		again.Tallies[i].Add(w, 1)
		again.Tallied = append(again.Tallied, w)
	}
	return &again
}

// FuzzPlanAtMostOneWinnerWithinQuota drives dispatch passes, agent admissions and rejections, lost and
// regained clusters, finishing jobs, jobs stopped and resumed, Queues pointed at the other GlobalQueue
// and lapsing rejections in random order, and checks after every step that no workload ever gets a
// second winner, that quota is never exceeded, and that a stopped workload is never nominated, never
// wins, never preempts and has its nomination withdrawn.
func FuzzPlanAtMostOneWinnerWithinQuota(f *testing.F) {
	f.Add([]byte{8, 8, 8, 4, 1, 2, 3, 4, 5, 6, 0, 1, 0, 1, 1, 1, 0, 3, 0, 4, 0})
	f.Add([]byte{16, 0, 4, 7, 7, 7, 7, 7, 7, 7, 7, 7, 0, 1, 2, 0, 1, 5, 0, 3, 1, 0, 2, 7, 0})
	f.Add([]byte{2, 2, 2, 2, 0, 0, 0, 0, 1, 3, 0, 3, 0, 1, 1, 0, 2, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, ops := newModel(data)
		strict := len(data) > 0 && data[0]%2 == 1
		maxCandidates := 1 + len(data)%3
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%8, int(ops[i+1])
			w := m.workloads[arg%len(m.workloads)]
			c := m.clusters[(arg/8)%len(m.clusters)]
			switch op {
			case 0, 5:
				s := m.snapshot(strict, maxCandidates)
				res, usage := PlanWithUsage(s)
				if want := UsageOf(s); !cmp.Equal(want, usage, cmpopts.EquateEmpty()) {
					t.Fatalf("PlanWithUsage's usage is not UsageOf's:\n%s", cmp.Diff(want, usage, cmpopts.EquateEmpty()))
				}
				checkSameInAnyOrder(t, s, res)
				checkSameTallied(t, s, res, usage)
				m.apply(t, res)
			case 1:
				if cp := m.copies[w.Key][c]; cp != nil && !cp.admitted && !cp.rejected {
					m.clock++
					cp.admitted, cp.waiting, cp.at = true, false, t0.Add(time.Duration(m.clock)*time.Second)
				}
			case 2:
				if cp := m.copies[w.Key][c]; cp != nil && !cp.admitted {
					cp.rejected, cp.waiting = arg%2 == 0, arg%2 == 1
					cp.without = m.admittedOn(c, w.Priority)
				}
			case 3:
				m.connected[c] = !m.connected[c]
			case 4:
				switch {
				case w.PreemptedFor != "", w.Phase == Admitted && w.Stopped:
					m.requeue(w) // taken back once its job is gone
				case w.Phase == Admitted && arg >= 128:
					w.Stopped = true // its owner stops it
				case w.Phase == Admitted:
					w.Phase = Finished
				case w.Phase == Pending:
					w.Stopped = !w.Stopped // stopped, or resumed
				}
			case 6:
				m.queueOf[w.Key] = modelQueues[(slices.Index(modelQueues, m.queueOf[w.Key])+1)%len(modelQueues)]
			case 7:
				if w.Refused != nil {
					delete(w.Refused.RejectedAt, c) // the rejection lapsed
				}
			}
			m.checkQuota(t)
		}
	})
}

// checkVerdictsComeAlone fails when a workload with a verdict also wins, is nominated or is a victim in
// the same pass: holdVerdicts relies on it.
func checkVerdictsComeAlone(t *testing.T, r Result) {
	others := map[string]string{}
	for _, w := range r.Winners {
		others[w.Key] = "wins"
	}
	for _, n := range r.Nominations {
		others[n.Key] = "is nominated"
	}
	for _, p := range r.Preemptions {
		others[p.Victim] = "is preempted"
	}
	for _, v := range r.Verdicts {
		if what := others[v.Key]; what != "" {
			t.Fatalf("%s has a verdict (%s) and %s in the same pass", v.Key, v.Reason, what)
		}
	}
}

// checkStoppedStay fails when a pending stopped workload is nominated, wins or preempts, or keeps a
// nomination past the pass.
func checkStoppedStay(t *testing.T, m *model, r Result) {
	withdrawn := map[string]bool{}
	for _, v := range r.Verdicts {
		if v.Withdraw {
			withdrawn[v.Key] = true
		}
	}
	stopped := func(key string) bool { w := m.byKey(key); return w.Stopped && w.Phase == Pending }
	for _, w := range r.Winners {
		if stopped(w.Key) {
			t.Fatalf("stopped %s wins on %s", w.Key, w.Cluster)
		}
	}
	for _, n := range r.Nominations {
		if stopped(n.Key) {
			t.Fatalf("stopped %s is nominated: %+v", n.Key, n)
		}
	}
	for _, p := range r.Preemptions {
		if stopped(p.Preemptor) {
			t.Fatalf("stopped %s preempts %s", p.Preemptor, p.Victim)
		}
	}
	for _, w := range m.workloads {
		if w.Stopped && w.Phase == Pending && len(w.Nominated) > 0 && !withdrawn[w.Key] {
			t.Fatalf("stopped %s keeps its nomination %v", w.Key, w.Nominated)
		}
	}
}
