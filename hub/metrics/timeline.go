package metrics

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Timeline remembers when this replica persisted each workload's nomination and winner, so that the
// dispatch latency of the step that follows is measured on one clock: the times of conditions are
// kept by the API to the second, and most steps take less. A step that began before this replica led
// is not measured. A nil Timeline remembers nothing.
type Timeline struct {
	mu sync.Mutex
	at map[types.UID]marks
}

type marks struct{ nominated, won time.Time }

// NewTimeline returns an empty Timeline.
func NewTimeline() *Timeline { return &Timeline{at: map[types.UID]marks{}} }

// Nominated remembers that the workload's nomination was persisted at t; the nomination of a new epoch
// replaces the one before.
func (t *Timeline) Nominated(uid types.UID, at time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.at[uid] = marks{nominated: at}
}

// Won remembers that the workload's winner was persisted at t and returns the time since its
// nomination; false when the nomination is not known.
func (t *Timeline) Won(uid types.UID, at time.Time) (time.Duration, bool) {
	if t == nil {
		return 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.at[uid]
	m.won = at
	t.at[uid] = m
	if !ok || m.nominated.IsZero() {
		return 0, false
	}
	return at.Sub(m.nominated), true
}

// JobCreated returns the time since the workload's winner was persisted, and forgets the workload:
// nothing more of its dispatch is measured; false when the winner is not known.
func (t *Timeline) JobCreated(uid types.UID, at time.Time) (time.Duration, bool) {
	if t == nil {
		return 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.at[uid]
	delete(t.at, uid)
	if !ok || m.won.IsZero() {
		return 0, false
	}
	return at.Sub(m.won), true
}

// KeepOnly forgets the workloads for which live says false.
func (t *Timeline) KeepOnly(live func(types.UID) bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid := range t.at {
		if !live(uid) {
			delete(t.at, uid)
		}
	}
}

// Len is how many workloads the Timeline remembers.
func (t *Timeline) Len() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.at)
}
