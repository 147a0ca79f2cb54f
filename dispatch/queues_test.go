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
		GlobalQueueOf: map[QueueRef]string{{"team-a", "q"}: "gq", {"team-a", "dangling"}: "gone", {"team-b", "q"}: "gq"},
		Selects:       map[string]labels.Selector{"gq": labels.SelectorFromSet(labels.Set{"team": "a"})},
		Namespaces:    map[string]labels.Set{"team-a": {"team": "a"}, "team-b": {"team": "b"}},
	}
	cases := map[QueueRef]struct{ globalQueue, reason, message string }{
		{"team-a", "q"}:        {"gq", "", ""},
		{"team-a", "missing"}:  {"", gantry.ReasonQueueNotFound, `Queue "missing" not found in namespace team-a`},
		{"team-a", "dangling"}: {"gone", gantry.ReasonGlobalQueueNotFound, `GlobalQueue "gone" of Queue "dangling" not found`},
		{"team-b", "q"}:        {"gq", gantry.ReasonNamespaceNotSelected, `namespace team-b is not selected by the namespaceSelector of GlobalQueue "gq"`},
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
