package v1beta1

import "testing"

func TestLocalQueueForANamespace(t *testing.T) {
	k := &WorkerKueue{LocalQueue: "gantry", Namespaces: []NamespaceLocalQueue{{Namespace: "team-a", LocalQueue: "a-queue"}}}
	cases := map[string]struct {
		k         *WorkerKueue
		namespace string
		want      string
	}{
		"a namespace named":      {k, "team-a", "a-queue"},
		"any other namespace":    {k, "team-b", "gantry"},
		"a worker without Kueue": {nil, "team-a", ""},
	}
	for name, c := range cases {
		if got := c.k.LocalQueueFor(c.namespace); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}
