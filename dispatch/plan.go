package dispatch

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Winner records that Cluster runs the workload Key, using quota of GlobalQueue; Borrowed says it runs
// beyond that queue's quota there, on quota its cohort lends.
type Winner struct {
	Key         string
	Cluster     string
	GlobalQueue string
	Borrowed    bool
}

// Rejection is a cluster that said it cannot run a workload as the cluster is.
type Rejection struct {
	Cluster string
	Reason  string
	Message string
}

// Nomination sends copies of the workload Key to Clusters in a new Epoch, reserving quota of
// GlobalQueue; the executor records GlobalQueue with it, so that the admission keeps using that quota.
type Nomination struct {
	Key         string
	Epoch       int64
	GlobalQueue string
	Clusters    []string
	// Reach says why it went to as many clusters as it did.
	Reach string
}

// How far a nomination reaches.
const (
	// ReachCandidates: to the queue's candidates, up to maxCandidates (one for an incremental queue).
	ReachCandidates = "Candidates"
	// ReachAlone: to one cluster, whose report left room for it alone (alone.go).
	ReachAlone = "Alone"
	// ReachWidened: to more clusters, as every copy it had waited.
	ReachWidened = "Widened"
)

// Verdict explains why a workload stays pending.
type Verdict struct {
	Key     string
	Reason  string
	Message string
	// Withdraw says the workload's nomination is no longer valid and its reservations were given up:
	// the executor clears the nominated clusters and withdraws their copies.
	Withdraw bool
}

// Result is what one dispatch pass decided. The executor persists each workload's part in one status
// write: its new rejections together with its winner, nomination or verdict; a victim's preemption.
type Result struct {
	Winners     []Winner
	Rejections  map[string][]Rejection
	Nominations []Nomination
	Verdicts    []Verdict
	Preemptions []Preemption
	// ReadCapacity are the GlobalQueues with a workload left waiting though it passed every quota filter
	// on some cluster: it waits for room the clusters' capacity reports show. A queue whose workloads
	// all got clusters, or waited for quota or for clusters to become usable, would decide the same
	// after a new capacity report alone.
	ReadCapacity map[string]bool
	// Uncut are the GlobalQueues whose Cut the pass could not take: what it decided may differ from a
	// pass over their whole tails, and must be planned again with less of them cut.
	Uncut []string

	// Held are the workloads whose verdict the pass decided and does not write now: the workload shows
	// it already, it is not steady yet, or it refreshes the agents' news too soon. HeldFor is how long
	// until the first verdict held for steadiness is due (0: none).
	Held    []string
	HeldFor time.Duration
	// Proposed are the verdicts held for steadiness, since when they are proposed: the next pass's
	// Snapshot.Proposed. AgentNews are the workloads whose Pending message this pass refreshes with
	// their agents' explanations, at Snapshot.Now: the next passes' Snapshot.AgentNews adds them.
	Proposed  map[string]Proposal
	AgentNews map[string]time.Time
}

// Plan runs one dispatch pass. In order: it confirms winners among admitted copies (each within the
// quota left on its cluster), records rejections, and nominates clusters for workloads that have no
// usable nomination, highest priority first, reserving the queue's quota on every nominated cluster so
// that confirmed usage can never exceed the quota. A nomination recorded under another GlobalQueue than
// the workload's Queue names now is not usable: it is replaced under the current one.
func Plan(s *Snapshot) Result {
	res, _ := plan(s, false)
	return res
}

// PlanWithUsage is Plan and UsageOf the same snapshot, read from the ledger Plan counts before it
// decides: one count of the snapshot's workloads for both.
func PlanWithUsage(s *Snapshot) (Result, Usage) {
	return plan(s, true)
}

func plan(s *Snapshot, withUsage bool) (Result, Usage) {
	res := Result{Rejections: map[string][]Rejection{}}
	l := emptyLedger(s)
	groups := l.countAndGroup(s)
	l.sayQueueProblems(&res)
	l.sayStopped(&res)
	l.noteLowestRunning(s)
	l.takeCuts(s, &res)
	var usage Usage
	if withUsage {
		usage = Usage{Queues: l.shares(), Cohorts: l.cohortUse()}
	}
	for _, g := range groups {
		var need []nominee
		for _, w := range g.workloads {
			if n, ok := g.ql.review(w, &res); ok {
				if need == nil {
					need = make([]nominee, 0, len(g.workloads))
				}
				need = append(need, n)
			}
		}
		if need != nil {
			g.ql.startNominating(need)
		}
	}
	l.nominate(&res)
	l.preempt(s, &res)
	holdVerdicts(s, &res, l.verdicts.of)
	for name, ql := range l.queues {
		if ql.readCapacity {
			if res.ReadCapacity == nil {
				res.ReadCapacity = map[string]bool{}
			}
			res.ReadCapacity[name] = true
		}
	}
	return res, usage
}

// review decides what it can for one of the queue's pending workloads on its own: a winner among its
// admitted copies, the rejections its copies report, and whether its nomination stands. It returns the
// workload as a nominee when it needs clusters, or more of them.
func (q *queueLedger) review(w *Workload, res *Result) (nominee, bool) {
	// A nomination made under another GlobalQueue reserved nothing here and may not win here.
	valid := w.Epoch > 0 && !w.nominationVoid()
	if valid {
		if c, borrowed, ok := q.chooseWinner(w, q.vector(w.Requests)); ok {
			res.Winners = append(res.Winners, Winner{Key: w.Key, Cluster: c, GlobalQueue: w.GlobalQueue, Borrowed: borrowed})
			return nominee{}, false
		}
	}
	rejected := w.rejectedClusters(q.now, q.rejectionTTL)
	for _, cp := range w.Copies {
		if _, done := rejected[cp.Cluster]; cp.Rejected && !done {
			res.Rejections[w.Key] = append(res.Rejections[w.Key], Rejection{Cluster: cp.Cluster, Reason: cp.Reason, Message: cp.Message})
			if rejected == nil {
				rejected = map[string]string{}
			}
			rejected[cp.Cluster] = RejectedByAgent
		}
	}
	keep := valid && !slices.ContainsFunc(w.Copies, func(c Copy) bool { return c.Expired }) &&
		q.hasValidNomination(w, rejected)
	widen := keep && q.widens(w, rejected)
	if keep && !widen {
		q.keepWaiting(w, rejected, res)
		return nominee{}, false
	}
	if !widen {
		q.release(w) // a widening workload keeps its reservations until it has somewhere more to go
	}
	if rejected != nil {
		cp := *w // never mutate the snapshot
		cp.rejected = rejected
		w = &cp
	}
	return nominee{Workload: w, width: q.width(w, widen), widening: widen}, true
}

// keepWaiting keeps the workload on the clusters it was sent to, saying what their agents wait for.
func (q *queueLedger) keepWaiting(w *Workload, rejected map[string]string, res *Result) {
	verdict := -1
	if msg := waitingMessage(w, rejected); msg != "" && msg != w.PendingMessage {
		q.verdicts.add(res, w, Verdict{Key: w.Key, Reason: gantry.ReasonWaitingForAdmission, Message: msg})
		verdict = len(res.Verdicts) - 1
	}
	q.noteWaitingOnNodes(w, rejected, verdict)
}

// maxAgentMessage bounds how much of one agent's explanation the hub repeats.
const maxAgentMessage = 512

// waitingMessage repeats, for a nominated workload, why the agents of its copies cannot admit it now,
// so that a person reading the hub sees what to change; empty when no agent has said.
func waitingMessage(w *Workload, rejected map[string]string) string {
	var parts []string
	for _, c := range w.Nominated {
		if rejected[c] != "" {
			continue
		}
		for _, cp := range w.Copies {
			if cp.Cluster == c && cp.Waiting {
				msg := cp.Message
				if len(msg) > maxAgentMessage {
					msg = msg[:maxAgentMessage-3] + "..."
				}
				parts = append(parts, fmt.Sprintf("%s: %s: %s", c, cp.Reason, msg))
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "waiting for " + strings.Join(w.Nominated, ", ") + " to admit; " + strings.Join(parts, "; ")
}

// SortByQueueOrder orders workloads as the dispatcher takes them: by GlobalQueue, then priority (higher
// first), creation time and key. Within a queue, the index is the workload's position.
func SortByQueueOrder(ws []*Workload) {
	slices.SortFunc(ws, func(a, b *Workload) int {
		return cmp.Or(strings.Compare(a.GlobalQueue, b.GlobalQueue), CompareInQueue(a, b))
	})
}

// CompareInQueue orders the workloads of one queue: priority (higher first), creation time and key. A
// snapshot handed over in this order spares a pass most of its sorting.
func CompareInQueue(a, b *Workload) int {
	return CompareQueueOrder(a.Priority, a.Created, a.Key, b.Priority, b.Created, b.Key)
}

// CompareQueueOrder is CompareInQueue over the three things it compares, for those who order
// workloads without a Workload of the dispatcher's (the hub's visibility API).
func CompareQueueOrder(priorityA int32, createdA time.Time, keyA string, priorityB int32, createdB time.Time, keyB string) int {
	if priorityA != priorityB {
		return cmp.Compare(priorityB, priorityA)
	}
	if c := createdA.Compare(createdB); c != 0 {
		return c
	}
	return strings.Compare(keyA, keyB)
}

// queuePending is one queue's pending workloads.
type queuePending struct {
	ql        *queueLedger
	workloads []*Workload
}

// countAndGroup counts what the workloads use (countUsage) and returns the pending workloads of each
// queue the ledger knows, the queues by name, each queue's in CompareInQueue's order (SortByQueueOrder's
// order, all together): one walk over the workloads does both. Each queue's are laid out apart, in
// their part of one array: a deep queue's sort then never compares queue names, and nothing grows as
// it fills. A queue whose workloads come in its order, as the hub hands them over, is not sorted again:
// the count that sizes its part notices.
func (l *ledger) countAndGroup(s *Snapshot) []queuePending {
	l.countTallies(s)
	queueOf := make([]*queueLedger, len(s.Workloads))
	for i, w := range s.Workloads {
		l.countFlying(w)
		ql := l.queues[w.GlobalQueue]
		if ql == nil {
			switch {
			case w.Phase == Pending && w.Stopped:
				l.stopped = append(l.stopped, w)
			case w.Phase == Pending && w.QueueProblem != nil:
				l.unqueued = append(l.unqueued, w)
			}
			continue
		}
		if w.Phase == Pending && w.Stopped {
			l.stopped = append(l.stopped, w) // it reserves nothing, and is not walked
			continue
		}
		ql.countUsage(w)
		if w.Phase == Pending {
			queueOf[i] = ql
			if ql.lastPending != nil && !ql.unsorted && CompareInQueue(ql.lastPending, w) > 0 {
				ql.unsorted = true
			}
			ql.pending, ql.lastPending = ql.pending+1, w
		}
	}
	l.flying.addUnreported(s.Clusters, l.won)
	names := slices.Sorted(maps.Keys(l.queues))
	groups, start, n := make([]queuePending, len(names)), make(map[*queueLedger]int, len(names)), 0
	for _, name := range names {
		ql := l.queues[name]
		start[ql], n = n, n+ql.pending
	}
	all := make([]*Workload, n)
	for i, ql := range queueOf {
		if ql != nil {
			all[start[ql]] = s.Workloads[i]
			start[ql]++
		}
	}
	for k, name := range names {
		ql := l.queues[name]
		groups[k] = queuePending{ql: ql, workloads: all[start[ql]-ql.pending : start[ql]]}
		if ql.unsorted {
			slices.SortFunc(groups[k].workloads, CompareInQueue)
		}
	}
	return groups
}

// chooseWinner picks the earliest admitted copy on a nominated cluster whose confirmed usage stays within
// quota, and moves the workload's reservations to confirmed usage on the winner; borrowed says its use
// there goes beyond the queue's own quota. Of copies admitted at the same time, the one first in the
// nomination (the queue's ranking, best first) wins.
func (ql *queueLedger) chooseWinner(w *Workload, vec []int64) (winner string, borrowed, ok bool) {
	copies := make([]Copy, 0, len(w.Copies))
	for _, cp := range w.Copies {
		if cp.Admitted && slices.Contains(w.Nominated, cp.Cluster) {
			copies = append(copies, cp)
		}
	}
	slices.SortStableFunc(copies, func(a, b Copy) int {
		if c := a.AdmittedAt.Compare(b.AdmittedAt); c != 0 {
			return c
		}
		return cmp.Compare(slices.Index(w.Nominated, a.Cluster), slices.Index(w.Nominated, b.Cluster))
	})
	for _, cp := range copies {
		i, ok := ql.byName[cp.Cluster]
		if !ok {
			continue
		}
		c := &ql.clusters[i]
		if !c.fits(vec, false) {
			continue
		}
		ql.release(w)
		borrowed = c.confirmedBeyondQuota(vec)
		c.add(true, vec, 1)
		return cp.Cluster, borrowed, true
	}
	return "", false, false
}

// confirmedBeyondQuota says whether the queue's admitted use on the cluster with vec goes beyond its
// own quota of some resource.
func (c *clusterLedger) confirmedBeyondQuota(vec []int64) bool {
	for k, v := range vec {
		if v > 0 && c.quota[k] != math.MaxInt64 && c.admitted[k]+v > c.quota[k] {
			return true
		}
	}
	return false
}

// hasValidNomination says whether a nominated cluster can still admit the workload.
func (ql *queueLedger) hasValidNomination(w *Workload, rejected map[string]string) bool {
	for _, c := range w.Nominated {
		i, ok := ql.byName[c]
		if ok && ql.clusters[i].known && ql.clusters[i].cluster.Usable() && rejected[c] == "" {
			return true
		}
	}
	return false
}

// widens says whether the workload goes to more clusters: fewer than maxCandidates hold a copy of it
// (an incremental queue's, or one sent alone), and every one said it cannot admit it now.
func (ql *queueLedger) widens(w *Workload, rejected map[string]string) bool {
	if len(w.Nominated) >= ql.maxCandidates {
		return false
	}
	for _, c := range w.Nominated {
		if rejected[c] != "" {
			continue
		}
		if !slices.ContainsFunc(w.Copies, func(cp Copy) bool { return cp.Cluster == c && cp.Waiting }) {
			return false
		}
	}
	return true
}

// width is how many clusters the workload's next nomination goes to at most: maxCandidates (fewer
// where one has room for it alone); for an incremental queue one, or one more than now when it widens.
func (ql *queueLedger) width(w *Workload, widen bool) int {
	switch {
	case !ql.q.Incremental:
		return ql.maxCandidates
	case widen:
		return min(len(w.Nominated)+1, ql.maxCandidates)
	}
	return 1
}

// reach narrows the nominee's candidates to the best one where that one's report leaves room for it
// with a margin (alone.go), and says why the nomination goes as far as it does. A widening workload
// goes wide: its copy there could not be admitted.
func (ql *queueLedger) reach(w nominee, best []scored) ([]scored, string) {
	switch {
	case w.widening:
		return best, ReachWidened
	case len(best) < 2:
		return best, ReachCandidates
	}
	if c := &ql.clusters[best[0].idx]; fitsAlone(w.Workload, &c.cluster, ql.flying[c.name]) {
		return best[:1], ReachAlone
	}
	return best, ReachCandidates
}

// nominee is a workload that needs clusters in this pass: width is how many clusters it goes to;
// widening says it is nominated again only to go to more clusters than it has.
type nominee struct {
	*Workload
	width    int
	widening bool
}

// nominator walks one queue's workloads that need clusters in this pass, in queue order.
type nominator struct {
	ql      *queueLedger
	pending []nominee
	next    int
	// vec is the head's vector once haveVec; its buffer is reused for the next head, so what keeps it
	// past the head's step keeps a copy.
	vec     []int64
	haveVec bool
	// best, passed, total and raw are the candidate pipeline's buffers, reused from one workload to the next.
	best   []scored
	passed []int
	total  []float64
	raw    []float64
	// A request shape that found no cluster fails again, for the same reason, while the pass gives no
	// quota back, and while it takes none if it was capacity that the shape lacked (with less quota it
	// may wait for quota instead): remember a few such shapes (bursts of identical jobs are common) and
	// skip their scan.
	failures  []failure
	blockedBy string
}

type failure struct {
	vec    []int64
	perPod int64
	// room is the pass's room changes when the shape failed; forCapacity: it passed the quota filters
	// on some cluster.
	room        roomChanges
	forCapacity bool
	verdict     Verdict
}

// roomChanges counts what changed the quota left during a pass.
type roomChanges struct{ taken, freed int }

// stands says whether the failure holds for a workload of the same shape now.
func (f *failure) stands(vec []int64, perPod int64, now roomChanges) bool {
	return f.perPod == perPod && f.room.freed == now.freed && (!f.forCapacity || f.room.taken == now.taken) &&
		slices.Equal(f.vec, vec)
}

func (ql *queueLedger) startNominating(pending []nominee) {
	ql.nom = &nominator{ql: ql, pending: pending, best: make([]scored, 0, ql.maxCandidates)}
}

// head is the next workload to nominate; nil when none is left.
func (n *nominator) head() *Workload {
	if n == nil || n.next == len(n.pending) {
		return nil
	}
	return n.pending[n.next].Workload
}

// headVector is the head workload's requests the queue limits, laid out by its index.
func (n *nominator) headVector() []int64 {
	if !n.haveVec {
		n.vec, n.haveVec = n.ql.vectorInto(n.vec, n.pending[n.next].Requests), true
	}
	return n.vec
}

// step nominates clusters for the head workload, or says why it waits, and moves on to the next.
func (n *nominator) step(res *Result) {
	ql, w, vec := n.ql, n.pending[n.next], n.headVector()
	n.next, n.haveVec = n.next+1, false
	if n.blockedBy != "" {
		if w.widening {
			return // it keeps the clusters it has
		}
		ql.addVerdict(res, w.Workload, Verdict{Key: w.Key, Reason: gantry.ReasonWaitingForQuota,
			Message: "queued behind " + n.blockedBy + " (StrictFIFO)", Withdraw: len(w.Nominated) > 0})
		return
	}
	// The memo keys on the quota vector, which does not tell GPU products or kinds apart.
	memo := !w.widening && len(w.rejected) == 0 && len(w.GPU.Products) == 0 && (w.Kind == "" || w.Kind == string(gantry.JobKindJob))
	if memo {
		if i := slices.IndexFunc(n.failures, func(f failure) bool { return f.stands(vec, w.GPU.PerPod, *ql.room) }); i >= 0 {
			v := n.failures[i].verdict
			v.Key, v.Withdraw = w.Key, len(w.Nominated) > 0
			if ql.addVerdict(res, w.Workload, v) {
				ql.noteQuotaBlocked(w.Workload, vec, res)
			}
			return
		}
	}
	var sc scan
	if w.widening {
		ql.release(w.Workload)
		ql.room.freed++
	}
	n.best, sc = n.candidates(w.Workload, vec, max(w.width, 1))
	if w.widening && len(n.best) <= len(w.Nominated) {
		ql.reserve(w.Workload, vec) // nowhere more to go: it keeps the clusters it has
		ql.keepWaiting(w.Workload, w.rejected, res)
		return
	}
	var reach string
	n.best, reach = ql.reach(w, n.best)
	if len(n.best) == 0 {
		ql.readCapacity = ql.readCapacity || sc[stageQuota] > 0 // it waits for room on a cluster
		v := ql.noCandidateVerdict(w.Workload, vec, sc)
		if ql.addVerdict(res, w.Workload, v) && !w.widening {
			ql.noteQuotaBlocked(w.Workload, vec, res)
		}
		if memo {
			n.remember(failure{vec: slices.Clone(vec), perPod: w.GPU.PerPod, room: *ql.room, forCapacity: sc[stageQuota] > 0, verdict: v})
		}
		if ql.q.StrictFIFO && sc[stageNever] > 0 {
			n.blockedBy = w.Key
		}
		return
	}
	nom := Nomination{Key: w.Key, Epoch: w.Epoch + 1, GlobalQueue: w.GlobalQueue, Clusters: make([]string, len(n.best)), Reach: reach}
	for k, b := range n.best {
		ql.clusters[b.idx].add(false, vec, 1)
		nom.Clusters[k] = ql.clusters[b.idx].name
	}
	ql.flying.add(nom.Clusters, w.Requests)
	ql.room.taken++
	res.Nominations = append(res.Nominations, nom)
}

// remember keeps a shape that found no cluster, in place of one that no longer stands.
func (n *nominator) remember(f failure) {
	if i := slices.IndexFunc(n.failures, func(old failure) bool { return !old.stands(old.vec, old.perPod, f.room) }); i >= 0 {
		n.failures[i] = f
	} else if len(n.failures) < 16 {
		n.failures = append(n.failures, f)
	}
}

// scored is a candidate cluster, by index in the queue's clusters, and its score.
type scored struct {
	idx   int
	score float64
}

// noCandidateVerdict says why no cluster took the workload, from the first test that none passed.
func (ql *queueLedger) noCandidateVerdict(w *Workload, vec []int64, sc scan) Verdict {
	v := Verdict{Key: w.Key, Withdraw: len(w.Nominated) > 0}
	switch {
	case sc[stageNever] == 0:
		v.Reason, v.Message = gantry.ReasonNoClusterCanHold, ql.cannotHoldMessage(w, vec)
	case sc[stageUnavailable] == 0 && ql.anyConnecting(w, vec):
		return Verdict{Key: w.Key} // no reason: it keeps its last one
	case sc[stageUnavailable] == 0:
		v.Reason, v.Message = gantry.ReasonNoClusterAvailable, ql.unavailableMessage(w, vec)
	case sc[stageQuota] > 0:
		v.Reason, v.Message = gantry.ReasonWaitingForCapacity, ql.noCapacityMessage(w, vec)
	default:
		// No count of the clusters: it changes whenever one connects or goes, and each change would
		// rewrite every waiting Workload of the queue.
		v.Reason = gantry.ReasonWaitingForQuota
		v.Message = "waiting for quota of GlobalQueue " + ql.q.Name
	}
	return v
}

// noCapacityMessage says what a workload that has quota but no room waits for. It names no free amounts:
// they change with every capacity report, and each change would rewrite every waiting Workload.
func (ql *queueLedger) noCapacityMessage(w *Workload, vec []int64) string {
	products := "nvidia.com/gpu"
	if len(w.GPU.Products) > 0 {
		products += " (" + strings.Join(w.GPU.Products, " or ") + ")"
	}
	var names []string
	for i := range ql.clusters {
		c := &ql.clusters[i]
		if c.known && !w.refusedBy(c) && c.cluster.Usable() && c.fits(vec, true) {
			names = append(names, c.name)
		}
	}
	return fmt.Sprintf("waiting for GPUs: needs %d %s, %d on one node; none free on %s (see WorkerCluster status.capacity)",
		w.GPU.Total, products, w.GPU.PerPod, strings.Join(names, ", "))
}

func (ql *queueLedger) cannotHoldMessage(w *Workload, vec []int64) string {
	var parts []string
	for i := range ql.clusters {
		c := &ql.clusters[i]
		switch {
		case !c.known:
			parts = append(parts, c.name+": no such WorkerCluster")
		case w.rejected[c.name] != "":
			parts = append(parts, c.name+": "+w.rejected[c.name])
		case !c.cluster.Runs(w.Kind):
			parts = append(parts, c.name+": does not run "+w.Kind+"s")
		default:
			for r, k := range ql.index {
				switch limit := c.limit(k); {
				case vec[k] <= limit:
				case limit > c.quota[k]:
					parts = append(parts, fmt.Sprintf("%s: needs %s %s, quota is %s, %s with what its cohort may lend", c.name,
						formatMilli(vec[k]), r, formatMilli(c.quota[k]), formatMilli(limit)))
				default:
					parts = append(parts, fmt.Sprintf("%s: needs %s %s, quota is %s", c.name,
						formatMilli(vec[k]), r, formatMilli(c.quota[k])))
				}
			}
		}
	}
	sort.Strings(parts)
	return "no cluster of GlobalQueue " + ql.q.Name + " can ever hold this workload: " + strings.Join(parts, "; ")
}

func (ql *queueLedger) unavailableMessage(w *Workload, vec []int64) string {
	var parts []string
	for i := range ql.clusters {
		c := &ql.clusters[i]
		if !c.known || w.refusedBy(c) || !c.couldEverFit(vec) {
			continue
		}
		switch {
		case !c.cluster.Connected:
			parts = append(parts, c.name+" is not connected")
		case !c.cluster.AgentReady:
			parts = append(parts, c.name+" has no ready agent")
		case c.cluster.Fenced:
			parts = append(parts, c.name+" is fenced")
		case c.cluster.Cordoned:
			parts = append(parts, c.name+" is cordoned")
		}
	}
	return "no cluster that could hold this workload is available: " + strings.Join(parts, ", ")
}

// anyConnecting says whether a cluster that could hold the workload is still being connected after the
// hub started: until it is tried, the workload is not said to have no cluster available, so a hub that
// restarts does not rewrite every waiting Workload while it reconnects.
func (ql *queueLedger) anyConnecting(w *Workload, vec []int64) bool {
	for i := range ql.clusters {
		if c := &ql.clusters[i]; c.known && c.cluster.Connecting && !w.refusedBy(c) && c.couldEverFit(vec) {
			return true
		}
	}
	return false
}

// addVerdict records a verdict for the workload and says so. One without a reason leaves the workload's
// last verdict as it is; so does one the workload already shows, unless its queue may preempt (a
// preemption may still say more of it): most of a deep queue in every pass, which then costs nothing.
func (ql *queueLedger) addVerdict(res *Result, w *Workload, v Verdict) bool {
	if v.Reason == "" || (w.Shows(v) && !ql.preempts()) {
		return false
	}
	ql.verdicts.add(res, w, v)
	return true
}

// Shows says whether the workload's Pending condition already says what the verdict would write.
func (w *Workload) Shows(v Verdict) bool {
	return !v.Withdraw && v.Reason == w.PendingReason && v.Message == w.PendingMessage
}

// refusedBy says whether the cluster is out for the workload: its agent rejected it, or the hub cannot
// run its kind there.
func (w *Workload) refusedBy(c *clusterLedger) bool {
	return (len(w.rejected) > 0 && w.rejected[c.name] != "") || !c.cluster.Runs(w.Kind)
}

func formatMilli(v int64) string {
	if v%1000 == 0 {
		return fmt.Sprint(v / 1000)
	}
	return fmt.Sprintf("%dm", v)
}

// AgentWords splits a Pending message written by waitingMessage back into what each nominated cluster's
// agent said ("Reason: message"), so that a reader of the hub can show it per cluster. Clusters whose
// agent said nothing are absent; a message of another form gives nil.
func AgentWords(pendingMessage string, nominated []string) map[string]string {
	rest, ok := strings.CutPrefix(pendingMessage, "waiting for "+strings.Join(nominated, ", ")+" to admit; ")
	if !ok || len(nominated) == 0 {
		return nil
	}
	words := map[string]string{}
	for i, c := range nominated {
		body, ok := strings.CutPrefix(rest, c+": ")
		if !ok {
			continue
		}
		end := len(body)
		for _, later := range nominated[i+1:] {
			if j := strings.Index(body, "; "+later+": "); j >= 0 && j < end {
				end = j
			}
		}
		words[c] = body[:end]
		rest = strings.TrimPrefix(body[end:], "; ")
	}
	return words
}
