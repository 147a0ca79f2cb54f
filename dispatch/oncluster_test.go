package dispatch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func TestOnCluster(t *testing.T) {
	wl := func(name, cluster string, nominated []string, finished bool) gantry.Workload {
		w := gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name},
			Status: gantry.WorkloadStatus{ClusterName: cluster, NominatedClusters: nominated}}
		if finished {
			w.Status.Conditions = []metav1.Condition{{Type: gantry.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded"}}
		}
		return w
	}
	workloads := []gantry.Workload{
		wl("runs-here", "w3", []string{"w3"}, false),
		wl("done-here", "w3", nil, true),
		wl("runs-elsewhere", "w1", []string{"w1", "w3"}, false),
		wl("nominated-here", "", []string{"w1", "w3"}, false),
		wl("nominated-elsewhere", "", []string{"w1"}, false),
		wl("a-runs-here", "w3", nil, false),
	}
	running, nominated := OnCluster("w3", workloads)
	if diff := cmp.Diff([]string{"team/a-runs-here", "team/runs-here"}, running); diff != "" {
		t.Errorf("running (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"team/nominated-here"}, nominated); diff != "" {
		t.Errorf("nominated (-want +got):\n%s", diff)
	}
}
