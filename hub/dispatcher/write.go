package dispatcher

import (
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/metrics"
	"github.com/gantry-dev/gantry/internal/expectations"
)

// ownWrite is a status write of the dispatcher: the Workload it leaves (or, once written, left), and
// the decision and Event it records once it is known to be applied.
type ownWrite struct {
	*gantry.Workload
	c     *change
	event func(client.Object)
}

// write persists one decision, then records its Event and asks for the pass that follows from it. A
// write that fails without the API server saying it was not applied may have been: it stands, and
// passes write nothing more for the Workload, until the cache or a live read tells (readBack).
func (d *Dispatcher) write(ctx context.Context, key string, decided *gantry.Workload, c *change, event func(client.Object)) {
	wl := decided.DeepCopy() // the update fills in the new resourceVersion; passes read decided meanwhile
	err := d.Client.Status().Update(ctx, wl)
	log := ctrllog.FromContext(ctx)
	switch {
	case err == nil:
		d.writes.Applied(key, ownWrite{Workload: decided}, ownWrite{Workload: wl, c: c, event: event})
		d.written(wl, c, event)
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		d.writes.NotApplied(key, false)
		// The cache is behind; the watch event that catches it up asks for the next pass too.
		d.Trigger()
	case notApplied(err):
		retry := d.writes.NotApplied(key, true)
		log.Error(err, "Writing dispatch status", "workload", key, "retryIn", retry)
		d.triggerAfter(retry)
	default:
		retry := d.writes.Unknown(key, ownWrite{Workload: decided, c: c, event: event}, d.Clock.Now())
		log.Error(err, "Writing dispatch status, outcome unknown: holding the decision until a live read", "workload", key, "readIn", retry)
		d.triggerAfter(retry)
	}
}

// notApplied tells whether a write's error says the API server did not apply it. Other errors
// (timeouts, server errors, lost connections, deadlines) leave the outcome unknown.
func notApplied(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsInvalid(err) ||
		apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}

func (d *Dispatcher) triggerAfter(wait time.Duration) {
	go func() {
		<-d.Clock.After(wait)
		d.Trigger()
	}()
}

// written records the Event and metrics of a decision the API server applied, and asks for the pass that
// follows from it.
func (d *Dispatcher) written(wl *gantry.Workload, c *change, event func(client.Object)) {
	d.Trigger()
	now := d.Clock.Now()
	for _, r := range c.rejections {
		metrics.Rejected(r.Cluster, r.Reason)
	}
	if c.winner != "" {
		metrics.Won(c.winner, wl.CreationTimestamp.Time, now)
		if since, ok := d.Timeline.Won(wl.UID, now); ok {
			metrics.Step(metrics.StepNominatedToWinner, since)
		}
	}
	if n := c.nomination; n != nil {
		metrics.Nominated(n.Reach, n.Clusters)
		d.Timeline.Nominated(wl.UID, now)
		if created := wl.CreationTimestamp.Time; n.Epoch == 1 && !created.IsZero() {
			metrics.Step(metrics.StepCreatedToNominated, now.Sub(created))
		}
	}
	if job := jobRef(wl); job != nil && event != nil {
		event(job)
	}
}

// readBackDue starts a live read of every Workload whose write of unknown outcome is due for one. The
// reads take writer slots, so that a pass never waits on the API server.
func (d *Dispatcher) readBackDue(ctx context.Context) {
	for _, u := range d.writes.DueForReadBack(d.Clock.Now()) {
		d.startInSlot(ctx, prompt, func() { d.readBack(ctx, u) })
	}
}

// readBack reads the Workload from the API server to learn what became of a write of unknown outcome. A
// resourceVersion other than the one the write was based on means the object changed, by that write or
// another, so the write can no longer apply: the live object is the truth from then on. The same
// resourceVersion means it was not applied: the next pass decides again.
func (d *Dispatcher) readBack(ctx context.Context, u *expectations.UnknownWrite[string, ownWrite]) {
	live := &gantry.Workload{}
	err := d.APIReader.Get(ctx, client.ObjectKeyFromObject(u.Value.Workload), live)
	exists := err == nil
	if apierrors.IsNotFound(err) {
		err = nil
	}
	outcome, retry := d.writes.ReadBack(u, ownWrite{Workload: live, c: u.Value.c, event: u.Value.event}, exists, err, d.Clock.Now())
	switch {
	case outcome == expectations.ReadFailed:
		ctrllog.FromContext(ctx).Error(err, "Reading a Workload back to learn what became of its status write", "workload", u.Key, "retryIn", retry)
		d.triggerAfter(retry)
	case outcome == expectations.Superseded && showsDecision(live, u.Value.c):
		d.written(live, u.Value.c, u.Value.event)
	default:
		d.Trigger()
	}
}

// showsDecision tells whether the Workload carries the decision, so that its Event and metrics are
// recorded once it is known to be applied.
func showsDecision(wl *gantry.Workload, c *change) bool {
	switch {
	case c.preemption != nil:
		return wl.Status.Preemption != nil && wl.Status.Preemption.Preemptor == c.preemption.Preemptor
	case c.winner != "":
		return wl.Status.Winner() == c.winner
	case c.nomination != nil:
		return wl.Status.DispatchEpoch == c.nomination.Epoch && slices.Equal(wl.Status.Nominated(), c.nomination.Clusters)
	case c.verdict != nil:
		cond := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending)
		return cond != nil && cond.Reason == c.verdict.Reason && cond.Message == c.verdict.Message
	}
	return false
}
