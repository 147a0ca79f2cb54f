package dispatcher

import (
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/hub/metrics"
)

// unknownWrite is a status write that failed without the API server saying it was not applied: a
// timeout, a server error, a lost connection. It may have been applied, or may still be, so passes see
// the Workload as decided, and write nothing more for it, until the Workload is read again.
type unknownWrite struct {
	key     string
	decided *gantry.Workload // what the write would leave; its resourceVersion is the one it was based on
	c       *change
	event   func(client.Object)
	due     time.Time // when to read the live Workload
	reading bool
}

// write persists one decision, then records its Event and asks for the pass that follows from it.
func (d *Dispatcher) write(ctx context.Context, key string, decided *gantry.Workload, c *change, event func(client.Object)) {
	wl := decided.DeepCopy() // the update fills in the new resourceVersion; passes read decided meanwhile
	err := d.Client.Status().Update(ctx, wl)
	log := ctrllog.FromContext(ctx)
	d.mu.Lock()
	delete(d.inflight, key)
	var retry time.Duration
	switch {
	case err == nil:
		d.assumed.Record(key, d.replacedVersion(key, decided), wl)
		delete(d.backoff, key)
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
	case notApplied(err):
		retry = d.nextBackoff(key)
	default:
		// Taken to pass in the same critical section as the in-flight entry, so no pass sees neither.
		retry = d.nextBackoff(key)
		d.unknown[key] = &unknownWrite{key: key, decided: decided, c: c, event: event, due: d.Clock.Now().Add(retry)}
	}
	d.mu.Unlock()
	switch {
	case err == nil:
		d.written(wl, c, event)
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		// The cache is behind; the watch event that catches it up asks for the next pass too.
		d.Trigger()
	case notApplied(err):
		log.Error(err, "Writing dispatch status", "workload", key, "retryIn", retry)
		d.triggerAfter(retry)
	default:
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

// nextBackoff doubles the key's backoff, from 100 ms up to a minute. d.mu must be held.
func (d *Dispatcher) nextBackoff(key string) time.Duration {
	retry := min(max(2*d.backoff[key], 100*time.Millisecond), time.Minute)
	d.backoff[key] = retry
	return retry
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
		metrics.Nominated(n.Clusters)
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
	now := d.Clock.Now()
	var due []*unknownWrite
	d.mu.Lock()
	for _, u := range d.unknown {
		if !u.reading && !now.Before(u.due) {
			u.reading = true
			due = append(due, u)
		}
	}
	d.mu.Unlock()
	for _, u := range due {
		d.startInSlot(ctx, prompt, func() { d.readBack(ctx, u) })
	}
}

// readBack reads the Workload from the API server to learn what became of a write of unknown outcome. A
// resourceVersion other than the one the write was based on means the object changed, by that write or
// another, so the write can no longer apply: the live object is the truth from then on. The same
// resourceVersion means it was not applied: the next pass decides again.
func (d *Dispatcher) readBack(ctx context.Context, u *unknownWrite) {
	live := &gantry.Workload{}
	err := d.APIReader.Get(ctx, client.ObjectKeyFromObject(u.decided), live)
	d.mu.Lock()
	u.reading = false
	if d.unknown[u.key] != u {
		d.mu.Unlock()
		return // the cache told what became of it meanwhile
	}
	var retry time.Duration
	var changed bool
	switch {
	case apierrors.IsNotFound(err) || (err == nil && live.UID != u.decided.UID):
		delete(d.unknown, u.key) // the Workload is gone
	case err != nil:
		retry = d.nextBackoff(u.key)
		u.due = d.Clock.Now().Add(retry)
	case live.ResourceVersion != u.decided.ResourceVersion:
		delete(d.unknown, u.key)
		delete(d.backoff, u.key)
		d.assumed.Record(u.key, d.replacedVersion(u.key, u.decided), live)
		changed = true
	default:
		delete(d.unknown, u.key) // not applied; its backoff has passed
	}
	d.mu.Unlock()
	switch {
	case retry > 0:
		ctrllog.FromContext(ctx).Error(err, "Reading a Workload back to learn what became of its status write", "workload", u.key, "retryIn", retry)
		d.triggerAfter(retry)
	case changed && showsDecision(live, u.c):
		d.written(live, u.c, u.event)
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
		return wl.Status.ClusterName == c.winner
	case c.nomination != nil:
		return wl.Status.DispatchEpoch == c.nomination.Epoch && slices.Equal(wl.Status.NominatedClusters, c.nomination.Clusters)
	case c.verdict != nil:
		cond := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending)
		return cond != nil && cond.Reason == c.verdict.Reason && cond.Message == c.verdict.Message
	}
	return false
}

// replacedVersion is the version the cache shows while it is behind a write based on decided: decided's
// own, or, when decided was itself an earlier write the cache did not show yet, the version that one
// replaced. Call it with d.mu held.
func (d *Dispatcher) replacedVersion(key string, decided *gantry.Workload) string {
	if prev, stale, ok := d.assumed.Get(key); ok && prev.ResourceVersion == decided.ResourceVersion {
		return stale
	}
	return decided.ResourceVersion
}
