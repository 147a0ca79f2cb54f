package dispatch

import (
	"fmt"
	"slices"
	"strings"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// A job its owner stopped (its annotation gantry.dev/stopped, the Workload's spec.stopped) is not
// dispatched: pending, it is walked by no queue, reserves nothing, and is told so, its nomination
// withdrawn; admitted, the Workload controller takes it back from its winner as a preempted one is
// (workersync), and it is pending, and stopped, once the dispatcher clears its winner. Resumed, it is
// walked again in its place: its priority and creation time are what they were.

// sayStopped gives each pending stopped workload the verdict Stopped, withdrawing its copies, unless it
// shows that already; in key order, whatever the order of the snapshot.
func (l *ledger) sayStopped(res *Result) {
	slices.SortFunc(l.stopped, func(a, b *Workload) int { return strings.Compare(a.Key, b.Key) })
	for _, w := range l.stopped {
		v := Verdict{Key: w.Key, Reason: gantry.ReasonStopped, Message: StoppedMessage(w.Kind, w.Key), Withdraw: len(w.Nominated) > 0}
		if !w.Shows(v) {
			l.verdicts.add(res, w, v)
		}
	}
}

// StoppedMessage is the Pending message of a stopped workload of the kind ("" is a batch Job) and key
// (namespace/name of its Workload, which is its kind's ref and its job's name): what stopped it, and
// how to resume it.
func StoppedMessage(kind, key string) string {
	ns, name, _ := strings.Cut(key, "/")
	if kind == "" {
		kind = string(gantry.JobKindJob)
	}
	ref := strings.ToLower(kind)
	job := ref + "/" + strings.TrimPrefix(name, ref+"-")
	return fmt.Sprintf("stopped by its owner (annotation %s on the %s): it is not dispatched until it is resumed: kubectl gantry resume %s -n %s",
		gantry.StoppedAnnotation, kind, job, ns)
}
