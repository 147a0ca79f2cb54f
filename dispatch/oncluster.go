package dispatch

import (
	"slices"
	"sort"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// OnCluster names (namespace/name) the hub Workloads that still need the cluster: those it runs that
// have not finished, and those without a winner nominated to it, whose copy there may still win.
func OnCluster(cluster string, workloads []gantry.Workload) (running, nominated []string) {
	for i := range workloads {
		wl := &workloads[i]
		if apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadFinished) {
			continue
		}
		key := wl.Namespace + "/" + wl.Name
		switch {
		case wl.Status.Winner() == cluster:
			running = append(running, key)
		case wl.Status.Winner() == "" && slices.Contains(wl.Status.Nominated(), cluster):
			nominated = append(nominated, key)
		}
	}
	sort.Strings(running)
	sort.Strings(nominated)
	return running, nominated
}
