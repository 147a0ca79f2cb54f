package workersync

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// A run opens when the Job is created on the winner, with the GPUs, product and borrowing of its
// admission, and closes when the job ends there (its Finished reason), is taken back (the eviction's
// reason, TakenBack) or is deleted with its job.
func TestRunsRecordEachTimeTheJobRanOnACluster(t *testing.T) {
	started := metav1.NewTime(now.Add(-time.Hour))
	open := gantry.Run{Cluster: "w1", Epoch: 2, GlobalQueue: "q", GPUs: 8, GPUProduct: "H100", Borrowed: true, Started: started}
	closed := func(outcome string, takenBack bool) []gantry.Run {
		r := open
		r.Ended, r.Outcome, r.TakenBack = &metav1.Time{Time: now}, outcome, takenBack
		return []gantry.Run{r}
	}
	admitted := func(running bool) *hubtest.WorkloadWrapper {
		w := hubtest.MakeWorkload("job-train", "ns").UID(uid).Generation(1).Finalizer(gantry.WorkloadFinalizer).
			OwnedByJob("train", "job-uid").Queue("q").PodSet("main", 2, string(gantry.GPUResource), "4").Now(now.Add(-time.Hour)).
			Nominated("q", 2, "w1").AdmittedOn("w1")
		w.Status.Admission = &gantry.Admission{PodSets: []gantry.PodSetAdmission{{Name: "main", GPUProduct: "H100"}}, Borrowed: true}
		if running {
			w.JobCreated()
			w.Status.Runs = []gantry.Run{open}
		}
		return w
	}
	cases := map[string]struct {
		view View
		want []gantry.Run
	}{
		"the Job is created: a run opens": {
			view: view(admitted(false).Obj(), hubJob(), up("w1").with(copyOf(uid, 2).Admitted(), running(remoteJob(uid, 2)))),
			want: []gantry.Run{{Cluster: "w1", Epoch: 2, GlobalQueue: "q", GPUs: 8, GPUProduct: "H100", Borrowed: true, Started: metav1.NewTime(now)}},
		},
		"the job says it wrote a checkpoint: recorded on its run": {
			view: view(admitted(true).Obj(), hubJob(), up("w1").with(copyOf(uid, 2).Admitted(),
				checkpointed(running(remoteJob(uid, 2)), now.Add(-10*time.Minute).Format(time.RFC3339)))),
			want: func() []gantry.Run {
				r := open
				r.Checkpointed = &metav1.Time{Time: now.Add(-10 * time.Minute)}
				return []gantry.Run{r}
			}(),
		},
		"a checkpoint in the future, before the run or no time is left alone": {
			view: view(admitted(true).Obj(), hubJob(), up("w1").with(copyOf(uid, 2).Admitted(),
				checkpointed(running(remoteJob(uid, 2)), now.Add(time.Hour).Format(time.RFC3339)))),
		},
		"it succeeds": {
			view: view(admitted(true).Obj(), hubJob(), up("w1").with(copyOf(uid, 2).Admitted(), completed(remoteJob(uid, 2)))),
			want: closed(gantry.ReasonJobSucceeded, false),
		},
		"it is preempted": {
			view: view(admitted(true).Preempted("w1", 2, "ns/urgent", gantry.ReasonInQueuePriority).Obj(), hubJob(),
				up("w1").with(copyOf(uid, 2).Admitted(), nil)),
			want: closed(gantry.ReasonPreempted, true),
		},
		"it is deleted with its job": {
			view: view(admitted(true).Deleting().Obj(), nil, up("w1")),
			want: closed(gantry.RunDeleted, false),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := Decide(tc.view)
			if tc.want == nil {
				if p.Status != nil {
					t.Errorf("status written: runs %+v", p.Status.Runs)
				}
				return
			}
			if p.Status == nil {
				t.Fatal("no status written")
			}
			if diff := cmp.Diff(tc.want, p.Status.Runs); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
		})
	}
}

func checkpointed(j *batchv1.Job, at string) *batchv1.Job {
	j.Annotations = map[string]string{gantry.LastCheckpointAnnotation: at}
	return j
}

// A last-checkpoint that is no time is not recorded, and the hub job gets a Warning Event that names
// the value; a time in the future is left alone without one (the job's clock may run ahead).
func TestABadCheckpointTimeIsReported(t *testing.T) {
	w := hubtest.MakeWorkload("job-train", "ns").UID(uid).Generation(1).Finalizer(gantry.WorkloadFinalizer).
		OwnedByJob("train", "job-uid").Queue("q").PodSet("main", 1, string(gantry.GPUResource), "1").Now(now.Add(-time.Hour)).
		Nominated("q", 2, "w1").AdmittedOn("w1").JobCreated()
	w.Status.Runs = []gantry.Run{{Cluster: "w1", Epoch: 2, GlobalQueue: "q", Started: metav1.NewTime(now.Add(-time.Hour))}}
	for value, warned := range map[string]bool{"yesterday": true, now.Add(time.Hour).Format(time.RFC3339): false} {
		p := Decide(view(w.Obj(), hubJob(), up("w1").with(copyOf(uid, 2).Admitted(), checkpointed(running(remoteJob(uid, 2)), value))))
		if p.Status != nil {
			t.Errorf("%q: status written, runs %+v", value, p.Status.Runs)
		}
		got := false
		for _, e := range p.Events {
			got = got || (e.Reason == EventBadCheckpoint && e.Type == "Warning" && strings.Contains(e.Message, `"yesterday"`))
		}
		if got != warned {
			t.Errorf("%q: events %+v; want a BadCheckpoint warning: %v", value, p.Events, warned)
		}
	}
}
