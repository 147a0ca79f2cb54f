package dispatch

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// QueueRef names a namespaced Queue.
type QueueRef struct{ Namespace, Name string }

// QueueProblem says why the workloads of a Queue cannot be dispatched: its Reason is their Pending
// reason, its Message says what a person can change.
type QueueProblem struct{ Reason, Message string }

// QueueIndex is what a workload's Queue resolves over: the GlobalQueue each Queue names, the namespaces
// each GlobalQueue selects, and the namespaces' labels.
type QueueIndex struct {
	GlobalQueueOf map[QueueRef]string
	// Selects holds every GlobalQueue there is, with its namespaceSelector (labels.Nothing() when it
	// has none or an invalid one).
	Selects    map[string]labels.Selector
	Namespaces map[string]labels.Set
	// Held holds the GlobalQueues that are held, true for those also drained (spec.drainWhileHeld).
	Held map[string]bool
}

// Resolve returns the GlobalQueue the Queue names, and why its workloads cannot be dispatched under it
// (nil when they can). The name comes back even when that GlobalQueue is missing or does not select
// the namespace.
func (x *QueueIndex) Resolve(q QueueRef) (string, *QueueProblem) {
	gq, ok := x.GlobalQueueOf[q]
	if !ok {
		return "", &QueueProblem{gantry.ReasonQueueNotFound, fmt.Sprintf("Queue %q not found in namespace %s", q.Name, q.Namespace)}
	}
	sel, exists := x.Selects[gq]
	switch {
	case !exists:
		return gq, &QueueProblem{gantry.ReasonGlobalQueueNotFound, fmt.Sprintf("GlobalQueue %q of Queue %q not found", gq, q.Name)}
	case !sel.Matches(x.Namespaces[q.Namespace]):
		return gq, &QueueProblem{gantry.ReasonNamespaceNotSelected,
			fmt.Sprintf("namespace %s is not selected by the namespaceSelector of GlobalQueue %q", q.Namespace, gq)}
	}
	if drained, held := x.Held[gq]; held {
		if drained {
			return gq, &QueueProblem{gantry.ReasonQueueDrained,
				fmt.Sprintf("GlobalQueue %q is held and drained: what waits in it is finished, and its job marked Failed", gq)}
		}
		return gq, &QueueProblem{gantry.ReasonQueueHeld,
			fmt.Sprintf("GlobalQueue %q is held (spec.held): nothing of it is dispatched until it is no longer held", gq)}
	}
	return gq, nil
}

// sayQueueProblems gives each pending workload whose Queue cannot be resolved its problem as a verdict,
// withdrawing its copies, unless it shows that already.
func (l *ledger) sayQueueProblems(res *Result) {
	for _, w := range l.unqueued {
		v := Verdict{Key: w.Key, Reason: w.QueueProblem.Reason, Message: w.QueueProblem.Message, Withdraw: len(w.Nominated) > 0}
		if !w.Shows(v) {
			l.verdicts.add(res, w, v)
		}
	}
}
