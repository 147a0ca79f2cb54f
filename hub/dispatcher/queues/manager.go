// Package queues is the dispatcher's queue manager. Told of every change of the hub's Workloads, it
// holds the unfinished ones: the waiting ones in queue order, the admitted ones summed up in tallies.
// For each pass it turns what changed since the last one into events (events.go), each of which wakes
// the queues it names, and builds the dispatch.Snapshot that dispatch.Plan decides over: every workload
// of the queues woken, and of the others only those that hold a reservation; the waiting workloads of
// the queues at rest are parked, and the settled tails of deep queues cut, because Plan would decide
// nothing for them. It does no I/O: the dispatcher reads the hub and writes what Plan decided.
package queues

import (
	"cmp"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/types"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// DefaultCutAfter is how many settled entries of a queue a pass walks at least before it cuts the rest.
const DefaultCutAfter = 64

// Manager is the queue manager. WorkloadChanged may be called from any goroutine; everything else is
// for passes, one at a time.
type Manager struct {
	book *book
	rest rest
	// proposed and agentNews are what passes left for the waiting verdicts still to write
	// (dispatch.Snapshot's Proposed and AgentNews).
	proposed  map[string]dispatch.Proposal
	agentNews map[string]time.Time
}

// NewManager returns a manager of no Workloads whose passes walk cutAfter settled entries of a queue
// before they cut the rest (0: DefaultCutAfter).
func NewManager(cutAfter int) *Manager {
	return &Manager{book: newBook(), rest: rest{cutAfter: cmp.Or(cutAfter, DefaultCutAfter)}, agentNews: map[string]time.Time{}}
}

// WorkloadChanged is told of a Workload as the cache shows it now; nil when it was deleted. A finished
// Workload leaves the book. The next Sync takes the change in.
func (m *Manager) WorkloadChanged(key string, wl *gantry.Workload) { m.book.note(key, wl) }

// Replace makes the next Sync leave the book holding exactly these Workloads, for a dispatcher whose
// cache sends no events.
func (m *Manager) Replace(workloads []*gantry.Workload) { m.book.replace(workloads) }

// Sync takes in the Workloads' changes since the last Sync.
func (m *Manager) Sync() { m.book.sync() }

// Workload is the book's Workload of the key, as the cache showed it at the last Sync; nil when the
// book holds none.
func (m *Manager) Workload(key string) *gantry.Workload {
	if e := m.book.entries[key]; e != nil {
		return e.wl
	}
	return nil
}

// HasUID says whether a Workload of that UID is in the book.
func (m *Manager) HasUID(uid types.UID) bool { return m.book.hasUID(uid) }

// Forget makes the next pass walk every workload, as the first one does.
func (m *Manager) Forget() { m.rest.forget() }

// End, once the pass is decided, remembers what the pass decided over and which queues it decided nothing for, and the waiting
// verdicts it held back, for the next pass.
func (m *Manager) End(p *Pass, res *dispatch.Result) {
	if p.rest != nil {
		m.rest.end(p, res)
	}
	m.proposed = res.Proposed
	// A new map: the pass's snapshot holds the last one.
	news := make(map[string]time.Time, len(m.agentNews)+len(res.AgentNews))
	for key, at := range m.agentNews {
		if p.Writable(key) != nil {
			news[key] = at
		}
	}
	maps.Copy(news, res.AgentNews)
	m.agentNews = news
}
