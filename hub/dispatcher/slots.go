package dispatcher

import (
	"context"

	"github.com/gantry-dev/gantry/hub/metrics"
)

// urgency orders the writes and reads a pass starts when every writer slot is taken: a winner recorded
// or a victim preempted moves a job along at once, a nomination starts its race, and a waiting verdict
// only tells why nothing happens yet.
type urgency int

const (
	urgent   urgency = iota // winners, preemptions
	prompt                  // nominations, withdrawals, reads back of a write of unknown outcome
	deferred                // waiting verdicts
	urgencies
)

// slotTask is a write or read waiting to be started in a slot.
type slotTask struct {
	urgency urgency
	run     func()
}

// startInSlot runs f in one of the Writers slots: at once when one is free, else queued behind every
// queued task of its urgency or a more urgent one, run by the first slot that frees. A pass never waits
// on the API server. When ctx has ended, queued tasks are dropped.
func (d *Dispatcher) startInSlot(ctx context.Context, u urgency, f func()) {
	d.slotMu.Lock()
	defer d.slotMu.Unlock()
	select {
	case d.writers <- struct{}{}:
		go d.runSlot(ctx, f)
	default:
		d.queued[u] = append(d.queued[u], f)
		d.countQueued()
	}
}

// runSlot runs f and then the queued tasks, most urgent first, until none is left, and frees its slot.
// The slot is freed under slotMu, so a task queued meanwhile is either seen here or finds the slot free.
func (d *Dispatcher) runSlot(ctx context.Context, f func()) {
	for f != nil {
		f()
		d.slotMu.Lock()
		f = nil
		if ctx.Err() != nil {
			d.queued = [urgencies][]func(){}
		}
		for u := range d.queued {
			if q := d.queued[u]; len(q) > 0 {
				f, d.queued[u] = q[0], q[1:]
				break
			}
		}
		if f == nil {
			<-d.writers
		}
		d.countQueued()
		d.slotMu.Unlock()
	}
}

// queuedTasks is the number of tasks waiting for a slot.
func (d *Dispatcher) queuedTasks() int {
	d.slotMu.Lock()
	defer d.slotMu.Unlock()
	return d.queuedLocked()
}

func (d *Dispatcher) queuedLocked() int {
	n := 0
	for _, q := range d.queued {
		n += len(q)
	}
	return n
}

// countQueued publishes the number of queued tasks. d.slotMu must be held.
func (d *Dispatcher) countQueued() { metrics.WritesQueued(d.queuedLocked()) }

// urgencyOf is how soon a workload's part of a pass should reach the API server.
func urgencyOf(c *change) urgency {
	switch {
	case c.winner != "" || c.preemption != nil:
		return urgent
	case c.nomination != nil || (c.verdict != nil && c.verdict.Withdraw):
		return prompt
	default:
		return deferred
	}
}
