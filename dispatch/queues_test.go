package dispatch

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// TestAQueueResolvesToTheGlobalQueueItNamesIfThatSelectsItsNamespace: a Queue that is missing, that
// names a GlobalQueue that is missing, or whose namespace that GlobalQueue does not select gives its
// workloads no GlobalQueue, and says so in words a person can act on.
func TestAQueueResolvesToTheGlobalQueueItNamesIfThatSelectsItsNamespace(t *testing.T) {
	x := &QueueIndex{
		GlobalQueueOf: map[QueueRef]string{{"team-a", "q"}: "gq", {"team-a", "dangling"}: "gone", {"team-b", "q"}: "gq",
			{"team-a", "paused"}: "held", {"team-a", "closing"}: "drained", {"team-b", "paused"}: "held"},
		Selects: map[string]labels.Selector{"gq": labels.SelectorFromSet(labels.Set{"team": "a"}),
			"held": labels.SelectorFromSet(labels.Set{"team": "a"}), "drained": labels.Everything()},
		Namespaces: map[string]labels.Set{"team-a": {"team": "a"}, "team-b": {"team": "b"}},
		Held:       map[string]bool{"held": false, "drained": true},
	}
	cases := map[QueueRef]struct{ globalQueue, reason, message string }{
		{"team-a", "q"}:        {"gq", "", ""},
		{"team-a", "missing"}:  {"", gantry.ReasonQueueNotFound, `Queue "missing" not found in namespace team-a`},
		{"team-a", "dangling"}: {"gone", gantry.ReasonGlobalQueueNotFound, `GlobalQueue "gone" of Queue "dangling" not found`},
		{"team-b", "q"}:        {"gq", gantry.ReasonNamespaceNotSelected, `namespace team-b is not selected by the namespaceSelector of GlobalQueue "gq"`},
		{"team-a", "paused"}:   {"held", gantry.ReasonQueueHeld, `GlobalQueue "held" is held (spec.held): nothing of it is dispatched until it is no longer held`},
		{"team-a", "closing"}:  {"drained", gantry.ReasonQueueDrained, `GlobalQueue "drained" is held and drained: what waits in it is finished, and its job marked Failed`},
		// A namespace the queue does not select hears that first: holding changes nothing for it.
		{"team-b", "paused"}: {"held", gantry.ReasonNamespaceNotSelected, `namespace team-b is not selected by the namespaceSelector of GlobalQueue "held"`},
	}
	for q, want := range cases {
		gq, problem := x.Resolve(q)
		var reason, message string
		if problem != nil {
			reason, message = problem.Reason, problem.Message
		}
		if gq != want.globalQueue || reason != want.reason || message != want.message {
			t.Errorf("%v: %q, %q: %q; want %q, %q: %q", q, gq, reason, message, want.globalQueue, want.reason, want.message)
		}
	}
}
