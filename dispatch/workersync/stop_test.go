package workersync

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// A Workload its owner stopped is taken back from its winner as a preempted one is: its Job deleted
// there, pods first, then its copy, and only behind a live read the take-back that releases its quota.
// A stopped one without a winner gets no new copy (the dispatcher withdraws its nomination), and no
// admission deadline ends it. One whose Job ended on its cluster finishes as usual.
func TestDecideStopped(t *testing.T) {
	admitted := func() View {
		return view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Stopped().Obj(), hubJob(),
			up("w1").with(copyOf(uid, 2).Admitted(), running(remoteJob(uid, 2))))
	}
	cases := map[string]struct {
		view View
		want outcome
	}{
		"running: its Job is deleted, pods first": {
			view: admitted(),
			want: outcome{Worker: []string{"DeleteForeground w1 Job ns/train uid=wl-uid epoch=2"}, Requeue: DeletionPoll},
		},
		"its Job going: waited for": {
			view: func() View {
				v := admitted()
				v.Clusters["w1"] = up("w1").with(copyOf(uid, 2).Admitted(), deletingJob(running(remoteJob(uid, 2))))
				return v
			}(),
			want: outcome{Requeue: DeletionPoll},
		},
		"its Job gone: its copy goes and it is taken back behind a live check": {
			view: func() View {
				v := admitted()
				v.Clusters["w1"] = up("w1").with(copyOf(uid, 2).Admitted(), nil)
				return v
			}(),
			want: outcome{Worker: []string{"Delete w1 Copy ns/job-train uid=wl-uid epoch=2"}, ConfirmGone: "w1", Winner: "-", Evictions: 1,
				Changed: []string{"JobCreated=False/Evicted"}, Events: []string{"Normal Evicted"}},
		},
		"admitted, its Job not created yet: nothing is created, it is taken back": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").Stopped().Obj(), hubJob(), up("w1").with(copyOf(uid, 2).Admitted(), nil)),
			want: outcome{Worker: []string{"Delete w1 Copy ns/job-train uid=wl-uid epoch=2"}, ConfirmGone: "w1", Winner: "-", Evictions: 1,
				Changed: []string{"JobCreated=False/Evicted"}, Events: []string{"Normal Evicted"}},
		},
		"admitted, its Job created but not in the cache yet: waited for": {
			view: func() View {
				c := up("w1").with(copyOf(uid, 2).Admitted(), nil)
				c.JobExpected = now.Add(time.Second)
				return view(workload().Nominated("", 2, "w1").AdmittedOn("w1").Stopped().Obj(), hubJob(), c)
			}(),
			want: outcome{Requeue: time.Second},
		},
		"its winner unreachable: it keeps its winner and quota until its Job can be removed": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Stopped().Obj(), hubJob(), down("w1")),
			want: outcome{Changed: []string{"ClusterReachable=False/Unreachable"}, Events: []string{"Warning ClusterUnreachable"}},
		},
		"its Job ended on its cluster: it finishes, not taken back": {
			view: view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Stopped().Obj(), hubJob(),
				up("w1").with(copyOf(uid, 2).Admitted(), completed(remoteJob(uid, 2)))),
			want: outcome{HubJob: "mirrored", Changed: []string{"Finished=True/Succeeded"}},
		},
		"nominated, its copies not created yet: none is": {
			view: view(workload().Nominated("", 2, "w1", "w2").Stopped().Obj(), hubJob(), up("w1"), up("w2")),
			want: outcome{},
		},
		"nominated, its copies there: left for the dispatcher's withdrawal": {
			view: view(workload().Nominated("", 2, "w1").Stopped().Obj(), hubJob(), up("w1").with(copyOf(uid, 2), nil)),
			want: outcome{},
		},
		"withdrawn by the dispatcher: its copies go": {
			view: view(workload().Nominated("", 2).Stopped().Pending(gantry.ReasonStopped, "stopped").Obj(), hubJob(), up("w1").with(copyOf(uid, 2), nil)),
			want: outcome{Worker: []string{"Delete w1 Copy ns/job-train uid=wl-uid epoch=2"}, Events: []string{"Normal Withdrawn"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := summarize(tc.view, Decide(tc.view))
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// The eviction of a stopped Workload says it was stopped, and where from.
func TestAStopIsRecordedAsAnEviction(t *testing.T) {
	p := Decide(view(workload().Nominated("", 2, "w1").AdmittedOn("w1").JobCreated().Stopped().Obj(), hubJob(),
		up("w1").with(copyOf(uid, 2).Admitted(), nil)))
	if p.Status == nil || p.Status.Winner() != "" || len(p.Status.Evictions) != 1 {
		t.Fatalf("status = %+v", p.Status)
	}
	if e := p.Status.Evictions[0]; e.Reason != gantry.ReasonStopped || e.Cluster != "w1" || !strings.Contains(e.Message, gantry.StoppedAnnotation) {
		t.Errorf("eviction = %+v", e)
	}
	if len(p.Events) != 1 || !strings.Contains(p.Events[0].Message, "Stopped on w1") {
		t.Errorf("events = %+v", p.Events)
	}
}

// A stopped Workload waits for its owner: its admission deadline does not end it.
func TestAStoppedWorkloadOutlivesItsAdmissionDeadline(t *testing.T) {
	v := view(workload().Stopped().Created(now.Add(-2*time.Hour)).Obj(), hubJob())
	v.AdmissionDeadline = time.Hour
	p := Decide(v)
	if p.Status != nil {
		for _, c := range p.Status.Conditions {
			if c.Type == gantry.WorkloadFinished && c.Status == metav1.ConditionTrue {
				t.Fatalf("finished: %+v", c)
			}
		}
	}
}
