package queues

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// What the dispatcher reads of a Workload's runs: the run on its winner, for the work a preemption
// would lose; and, for one taken back after it saved work, the cluster where its checkpoint is.
func TestEntryReadsTheRuns(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	started := metav1.NewTime(t0)
	ended := &metav1.Time{Time: t0.Add(time.Hour)}
	saved := &metav1.Time{Time: t0.Add(30 * time.Minute)}
	cases := map[string]struct {
		run            gantry.Run
		wantRun        bool
		checkpointedOn string
	}{
		"running":                           {run: gantry.Run{Cluster: "w1", Started: started}, wantRun: true},
		"taken back after a checkpoint":     {run: gantry.Run{Cluster: "w1", Started: started, Ended: ended, TakenBack: true, Checkpointed: saved}, checkpointedOn: "w1"},
		"taken back with nothing saved":     {run: gantry.Run{Cluster: "w1", Started: started, Ended: ended, TakenBack: true}},
		"ended on its own, nothing to move": {run: gantry.Run{Cluster: "w1", Started: started, Ended: ended, Checkpointed: saved}},
	}
	for name, tc := range cases {
		wl := hubtest.MakeWorkload("job-a", "ns").Queue("q").PodSet("main", 1).Obj()
		wl.Status.Runs = []gantry.Run{tc.run}
		e := newEntry(wl, nil)
		if (e.w.Run != nil) != tc.wantRun || e.w.CheckpointedOn != tc.checkpointedOn {
			t.Errorf("%s: run %+v, checkpointed on %q; want run %v, checkpointed on %q", name, e.w.Run, e.w.CheckpointedOn, tc.wantRun, tc.checkpointedOn)
		}
	}
}
