package queues

import (
	"maps"

	"github.com/gantry-dev/gantry/dispatch"
)

// tallies sum up the book's admitted Workloads, by GlobalQueue, cluster, priority and Queue, so that a
// pass counts what runs in one step per tally and never walks the Workloads that run (see
// dispatch.Tally). They change only with the Workloads that change. An admitted Workload is tallied
// unless it is being preempted or its status records no GlobalQueue: a pass lists those one by one.
type tallies struct {
	byKey map[tallyKey]*tally
	// entries are the tallied entries in no order; workloads are theirs, in the same order.
	entries   []*entry
	workloads []*dispatch.Workload
}

type tallyKey struct {
	globalQueue, cluster string
	priority             int32
	queue                queueKey
}

// tally is one dispatch.Tally and the Queue its Workloads name, for the Queue's status.
type tally struct {
	dispatch.Tally
	queue queueKey
}

func newTallies() *tallies { return &tallies{byKey: map[tallyKey]*tally{}} }

func (e *entry) tallyKey() tallyKey {
	return tallyKey{globalQueue: e.w.GlobalQueue, cluster: e.w.Winner, priority: e.w.Priority, queue: e.queue.queueKey}
}

// add counts the entry in its tally.
func (ts *tallies) add(e *entry) {
	k := e.tallyKey()
	t := ts.byKey[k]
	if t == nil {
		t = &tally{Tally: dispatch.Tally{GlobalQueue: k.globalQueue, Cluster: k.cluster, Priority: k.priority}, queue: k.queue}
		ts.byKey[k] = t
	}
	t.Add(&e.w, 1)
	e.tallied, e.talliedAt = true, len(ts.entries)
	ts.entries = append(ts.entries, e)
	ts.workloads = append(ts.workloads, &e.w)
}

// remove takes the entry out of its tally; the last entry of the list takes its place there.
func (ts *tallies) remove(e *entry) {
	k := e.tallyKey()
	if t := ts.byKey[k]; t != nil {
		if t.Add(&e.w, -1); t.Workloads == 0 {
			delete(ts.byKey, k)
		}
	}
	i, last := e.talliedAt, len(ts.entries)-1
	moved := ts.entries[last]
	ts.entries[i], ts.workloads[i] = moved, ts.workloads[last]
	moved.talliedAt = i
	ts.entries[last], ts.workloads[last] = nil, nil
	ts.entries, ts.workloads = ts.entries[:last], ts.workloads[:last]
	e.tallied, e.talliedAt = false, 0
}

// passTallies are the tallies as one pass counts them.
type passTallies struct {
	tallies []dispatch.Tally
	queues  []queueKey // the Queue of each tally
	tallied []*dispatch.Workload
	// standIns are the entries that the dispatcher's own writes laid over tallied ones: the pass lists
	// them one by one, and the tallies leave out the entries they stand in for.
	standIns []*entry
}

// forPass copies the tallies for a pass whose overlay is over, over the book's entries.
func (ts *tallies) forPass(over, entries map[string]*entry) passTallies {
	var pt passTallies
	var covered map[*entry]bool
	for key, o := range over {
		if e := entries[key]; e != nil && e.tallied {
			if covered == nil {
				covered = map[*entry]bool{}
			}
			covered[e] = true
			pt.standIns = append(pt.standIns, o)
		}
	}
	pt.tallies, pt.queues = make([]dispatch.Tally, 0, len(ts.byKey)), make([]queueKey, 0, len(ts.byKey))
	index := map[tallyKey]int(nil)
	if covered != nil {
		index = make(map[tallyKey]int, len(ts.byKey))
	}
	for k, t := range ts.byKey {
		if index != nil {
			index[k] = len(pt.tallies)
		}
		pt.tallies = append(pt.tallies, t.Tally)
		pt.queues = append(pt.queues, t.queue)
	}
	if covered == nil {
		pt.tallied = ts.workloads
		return pt
	}
	// Rare: the dispatcher wrote to admitted Workloads (preemptions) and the cache does not show it yet.
	for e := range covered {
		t := &pt.tallies[index[e.tallyKey()]]
		t.Requests = maps.Clone(t.Requests) // the book's own map stays as it is
		t.Add(&e.w, -1)
	}
	pt.tallied = make([]*dispatch.Workload, 0, len(ts.workloads))
	for i, e := range ts.entries {
		if !covered[e] {
			pt.tallied = append(pt.tallied, ts.workloads[i])
		}
	}
	return pt
}
