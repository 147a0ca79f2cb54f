package workersync

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// A Workload without a winner that waited its admission deadline is finished as Inadmissible and its
// copies withdrawn; once that is written, its hub job is marked Failed with the reason. The deadline
// counts from its creation or its last eviction, and one with a winner is never ended by it.
func TestDecideAdmissionDeadline(t *testing.T) {
	const deadline = 30 * time.Minute
	queued := func(ago time.Duration) *hubtest.WorkloadWrapper {
		return workload().Nominated("", 2, "w1", "w2").Pending(gantry.ReasonWaitingForAdmission, "set by the test").Created(now.Add(-ago))
	}
	evicted := func(b *hubtest.WorkloadWrapper, ago time.Duration) *hubtest.WorkloadWrapper {
		return b.Evicted("w1", 1, gantry.ReasonPlacementTimeout, now.Add(-ago))
	}
	inadmissible := outcome{
		Worker:  []string{"Delete w1 Copy ns/job-train uid=wl-uid epoch=2", "Delete w2 Copy ns/job-train uid=wl-uid epoch=2"},
		Changed: []string{"Finished=True/" + gantry.ReasonInadmissible},
		Events:  []string{"Warning " + EventFinished},
	}
	cases := map[string]struct {
		wl       *gantry.Workload
		deadline time.Duration
		want     outcome
	}{
		"within the deadline: it waits, and is looked at again when it runs out": {
			wl: queued(deadline - time.Minute).Obj(), deadline: deadline, want: outcome{Requeue: time.Minute},
		},
		"past the deadline: finished as Inadmissible, copies withdrawn": {
			wl: queued(deadline + time.Second).Obj(), deadline: deadline, want: inadmissible,
		},
		"no deadline: it waits as long as it takes": {
			wl: queued(1000 * time.Hour).Obj(), want: outcome{},
		},
		"taken back from a cluster: the deadline counts anew from the eviction": {
			wl: evicted(queued(2*deadline), deadline-time.Minute).Obj(), deadline: deadline, want: outcome{Requeue: time.Minute},
		},
		"stopped long ago and resumed within the deadline: it counts anew from the resume": {
			wl:       queued(3*deadline).Now(now.Add(-(deadline - time.Minute))).Condition(gantry.WorkloadStopped, metav1.ConditionFalse, gantry.ReasonResumed, "").Obj(),
			deadline: deadline, want: outcome{Requeue: time.Minute},
		},
		"resumed long ago: past the deadline": {
			wl:       queued(3*deadline).Now(now.Add(-(deadline + time.Second))).Condition(gantry.WorkloadStopped, metav1.ConditionFalse, gantry.ReasonResumed, "").Obj(),
			deadline: deadline, want: inadmissible,
		},
		"taken back long ago: past the deadline": {
			wl: evicted(queued(3*deadline), deadline+time.Second).Obj(), deadline: deadline, want: inadmissible,
		},
		"admitted, though late: the deadline no longer applies": {
			wl: queued(2 * deadline).AdmittedOn("w1").JobCreated().Obj(), deadline: deadline,
			want: outcome{Worker: []string{"Delete w2 Copy ns/job-train uid=wl-uid epoch=2"}, HubJob: "mirrored"},
		},
		"finished as Inadmissible: the hub job is marked Failed, and a copy that shows up later is withdrawn": {
			wl: queued(2*deadline).Condition(gantry.WorkloadFinished, metav1.ConditionTrue, gantry.ReasonInadmissible, "set by the test").Obj(), deadline: deadline,
			want: outcome{Worker: []string{"Delete w1 Copy ns/job-train uid=wl-uid epoch=2", "Delete w2 Copy ns/job-train uid=wl-uid epoch=2"},
				HubJob: "Failed/" + gantry.ReasonInadmissible},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := view(tc.wl, hubJob(), up("w1").with(copyOf(uid, 2), nil), up("w2").with(copyOf(uid, 2), nil))
			if tc.wl.Status.ClusterName == "w1" {
				v.Clusters["w1"] = up("w1").with(copyOf(uid, 2), running(remoteJob(uid, 2)))
			}
			v.AdmissionDeadline = tc.deadline
			p := Decide(v)
			if diff := cmp.Diff(tc.want, summarize(v, p)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if !slices.Equal(tc.want.Changed, inadmissible.Changed) {
				return
			}
			// It says what the deadline was and what blocked the Workload (its Pending message).
			c := apimeta.FindStatusCondition(p.Status.Conditions, gantry.WorkloadFinished)
			if !strings.Contains(c.Message, "admission deadline of 30m0s") || !strings.HasSuffix(c.Message, ": set by the test") {
				t.Errorf("finished: %q", c.Message)
			}
		})
	}
}

// A Workload without a winner whose GlobalQueue is held and drained is finished as QueueDrained and
// its copies withdrawn; once that is written, its hub job is marked Failed. One with a winner runs on.
func TestDecideDrainedQueue(t *testing.T) {
	waiting := func() *hubtest.WorkloadWrapper {
		return workload().Nominated("", 2, "w1", "w2").Pending(gantry.ReasonQueueDrained, "set by the test").Created(now.Add(-time.Minute))
	}
	cases := map[string]struct {
		wl   *gantry.Workload
		want outcome
	}{
		"waiting: finished as QueueDrained, copies withdrawn": {
			wl: waiting().Obj(),
			want: outcome{Worker: []string{"Delete w1 Copy ns/job-train uid=wl-uid epoch=2", "Delete w2 Copy ns/job-train uid=wl-uid epoch=2"},
				Changed: []string{"Finished=True/" + gantry.ReasonQueueDrained}, Events: []string{"Warning " + EventFinished}},
		},
		"admitted before the drain: it runs on": {
			wl:   waiting().AdmittedOn("w1").JobCreated().Obj(),
			want: outcome{Worker: []string{"Delete w2 Copy ns/job-train uid=wl-uid epoch=2"}, HubJob: "mirrored"},
		},
		"finished as QueueDrained: the hub job is marked Failed": {
			wl: waiting().Condition(gantry.WorkloadFinished, metav1.ConditionTrue, gantry.ReasonQueueDrained, "set by the test").Obj(),
			want: outcome{Worker: []string{"Delete w1 Copy ns/job-train uid=wl-uid epoch=2", "Delete w2 Copy ns/job-train uid=wl-uid epoch=2"},
				HubJob: "Failed/" + gantry.ReasonQueueDrained},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := view(tc.wl, hubJob(), up("w1").with(copyOf(uid, 2), nil), up("w2").with(copyOf(uid, 2), nil))
			if tc.wl.Status.ClusterName == "w1" {
				v.Clusters["w1"] = up("w1").with(copyOf(uid, 2), running(remoteJob(uid, 2)))
			}
			v.DrainedBy = "closing"
			p := Decide(v)
			if diff := cmp.Diff(tc.want, summarize(v, p)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if len(tc.want.Changed) == 0 {
				return
			}
			if c := apimeta.FindStatusCondition(p.Status.Conditions, gantry.WorkloadFinished); c == nil || !strings.Contains(c.Message, "GlobalQueue closing was held and drained") {
				t.Errorf("finished: %+v", c)
			}
		})
	}
}
