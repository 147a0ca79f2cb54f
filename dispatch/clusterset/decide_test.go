package clusterset

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func gpuSet() *gantry.WorkerClusterSet {
	return &gantry.WorkerClusterSet{
		ObjectMeta: metav1.ObjectMeta{Name: "gpus", UID: "set-uid", Generation: 1},
		Spec: gantry.WorkerClusterSetSpec{ClusterProfileSelector: &metav1.LabelSelector{},
			Template: gantry.WorkerClusterTemplate{Labels: map[string]string{"tier": "gpu"}, Failover: gantry.Failover{Policy: gantry.FailoverFence}}},
	}
}

// made is a WorkerCluster the set made, as it made it.
func made(name string, mods ...func(*gantry.WorkerCluster)) *gantry.WorkerCluster {
	wc := newWorkerCluster(gpuSet(), name)
	for _, m := range mods {
		m(wc)
	}
	return wc
}

func connected(wc *gantry.WorkerCluster) {
	wc.Status.Conditions = []metav1.Condition{{Type: gantry.ClusterConnected, Status: metav1.ConditionTrue, Reason: gantry.ReasonConnected}}
}

func cordonedBySet(wc *gantry.WorkerCluster) {
	wc.Spec.Cordoned = true
	wc.Annotations = map[string]string{gantry.CordonedBySetAnnotation: now.Add(-time.Minute).Format(time.RFC3339)}
}

func byHand(name string) *gantry.WorkerCluster {
	return &gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gantry.WorkerClusterSpec{KubeconfigSecretRef: &gantry.SecretReference{Name: name + "-kubeconfig"}}}
}

func clusters(wcs ...*gantry.WorkerCluster) map[string]*gantry.WorkerCluster {
	m := map[string]*gantry.WorkerCluster{}
	for _, wc := range wcs {
		m[wc.Name] = wc
	}
	return m
}

// outcome is a Plan as a test reads it.
type outcome struct {
	Create, Update, Delete []string
	States                 map[string]gantry.MemberState
	Synced                 metav1.ConditionStatus
	Requeue                time.Duration
}

func summarize(p Plan, prev gantry.WorkerClusterSetStatus) outcome {
	o := outcome{States: map[string]gantry.MemberState{}, Requeue: p.RequeueAfter}
	for _, wc := range p.Create {
		o.Create = append(o.Create, wc.Name)
	}
	for _, wc := range p.Update {
		o.Update = append(o.Update, wc.Name)
	}
	for _, wc := range p.Delete {
		o.Delete = append(o.Delete, wc.Name)
	}
	st := &prev
	if p.Status != nil {
		st = p.Status
	}
	for _, m := range st.Clusters {
		o.States[m.Name] = m.State
	}
	for _, c := range st.Conditions {
		if c.Type == gantry.SetSynced {
			o.Synced = c.Status
		}
	}
	return o
}

func TestDecide(t *testing.T) {
	cases := map[string]struct {
		selected       []string
		problem        *Problem
		workerClusters map[string]*gantry.WorkerCluster
		needed         map[string][]string
		want           outcome
	}{
		"new clusters are made": {
			selected: []string{"east", "west"},
			want:     outcome{Create: []string{"east", "west"}, States: map[string]gantry.MemberState{"east": gantry.MemberJoined, "west": gantry.MemberJoined}, Synced: metav1.ConditionTrue},
		},
		"made ones are kept as they are": {
			selected:       []string{"east"},
			workerClusters: clusters(made("east", connected)),
			want:           outcome{States: map[string]gantry.MemberState{"east": gantry.MemberJoined}, Synced: metav1.ConditionTrue},
		},
		"a drifted one is brought back to the template, cordon and fence left to the operator": {
			selected: []string{"east"},
			workerClusters: clusters(made("east", func(wc *gantry.WorkerCluster) {
				wc.Spec.Failover.Policy, wc.Labels["tier"], wc.Spec.Cordoned, wc.Spec.Fenced = gantry.FailoverWait, "cpu", true, true
			})),
			want: outcome{Update: []string{"east"}, States: map[string]gantry.MemberState{"east": gantry.MemberJoined}, Synced: metav1.ConditionTrue},
		},
		"one registered by hand under the name is left alone": {
			selected:       []string{"east"},
			workerClusters: clusters(byHand("east")),
			want:           outcome{States: map[string]gantry.MemberState{"east": gantry.MemberConflict}, Synced: metav1.ConditionTrue},
		},
		"one that left is cordoned first": {
			workerClusters: clusters(made("east", connected)),
			needed:         map[string][]string{"east": {"team/job-a"}},
			want: outcome{Update: []string{"east"}, States: map[string]gantry.MemberState{"east": gantry.MemberLeaving},
				Synced: metav1.ConditionTrue, Requeue: LeavingPoll},
		},
		"a cordoned one that jobs still need waits": {
			workerClusters: clusters(made("east", cordonedBySet)),
			needed:         map[string][]string{"east": {"team/job-a"}},
			want:           outcome{States: map[string]gantry.MemberState{"east": gantry.MemberLeaving}, Synced: metav1.ConditionTrue, Requeue: LeavingPoll},
		},
		"just cordoned, it waits for a dispatch on its way even when nothing needs it": {
			workerClusters: clusters(made("east", func(wc *gantry.WorkerCluster) {
				cordonedBySet(wc)
				wc.Annotations[gantry.CordonedBySetAnnotation] = now.Add(-2 * time.Second).Format(time.RFC3339)
			})),
			want: outcome{States: map[string]gantry.MemberState{"east": gantry.MemberLeaving}, Synced: metav1.ConditionTrue, Requeue: LeavingPoll - 2*time.Second},
		},
		"a cordoned one nothing needs goes": {
			workerClusters: clusters(made("east", cordonedBySet)),
			want:           outcome{Delete: []string{"east"}, States: map[string]gantry.MemberState{"east": gantry.MemberLeaving}, Synced: metav1.ConditionTrue},
		},
		"one the operator cordoned goes as well once it left and nothing needs it": {
			workerClusters: clusters(made("east", func(wc *gantry.WorkerCluster) { wc.Spec.Cordoned = true })),
			want:           outcome{Delete: []string{"east"}, States: map[string]gantry.MemberState{"east": gantry.MemberLeaving}, Synced: metav1.ConditionTrue},
		},
		"selected again while leaving, it is uncordoned": {
			selected:       []string{"east"},
			workerClusters: clusters(made("east", cordonedBySet)),
			want:           outcome{Update: []string{"east"}, States: map[string]gantry.MemberState{"east": gantry.MemberJoined}, Synced: metav1.ConditionTrue},
		},
		"others' WorkerClusters are never touched": {
			workerClusters: clusters(byHand("north"), func() *gantry.WorkerCluster {
				wc := made("south")
				wc.OwnerReferences[0].UID = "another-set"
				return wc
			}()),
			want: outcome{States: map[string]gantry.MemberState{}, Synced: metav1.ConditionTrue},
		},
		"a selection that cannot be read changes nothing": {
			problem:        &Problem{Reason: gantry.ReasonSelectionAPINotServed, Message: "no PlacementDecisions"},
			workerClusters: clusters(made("east", connected)),
			want:           outcome{States: map[string]gantry.MemberState{"east": gantry.MemberJoined}, Synced: metav1.ConditionFalse},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			set := gpuSet()
			if tc.workerClusters == nil {
				tc.workerClusters = map[string]*gantry.WorkerCluster{}
			}
			p := Decide(View{Now: now, Set: set, Selected: tc.selected, Problem: tc.problem, WorkerClusters: tc.workerClusters, Needed: tc.needed})
			if diff := cmp.Diff(tc.want, summarize(p, set.Status)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			for _, wc := range p.Update {
				if orig := tc.workerClusters[wc.Name]; orig.Spec.Fenced != wc.Spec.Fenced || (orig.Spec.Cordoned && !wc.Spec.Cordoned && orig.Annotations[gantry.CordonedBySetAnnotation] == "") {
					t.Errorf("%s: the operator's cordon or fence was changed", wc.Name)
				}
			}
		})
	}
}

// What the set makes is reached through the profile of its name, carries the template, and is the
// set's; a second look at what the first made plans nothing more, and the status settles.
func TestDecideSettles(t *testing.T) {
	set := gpuSet()
	p := Decide(View{Now: now, Set: set, Selected: []string{"east", "east"}, WorkerClusters: map[string]*gantry.WorkerCluster{}})
	if len(p.Create) != 1 {
		t.Fatalf("made %d for one cluster named twice", len(p.Create))
	}
	wc := p.Create[0]
	if wc.Spec.ClusterProfileRef == nil || wc.Spec.ClusterProfileRef.Name != "east" || wc.Spec.KubeconfigSecretRef != nil ||
		wc.Labels["tier"] != "gpu" || wc.Spec.Failover.Policy != gantry.FailoverFence || !MadeBy(set, wc) {
		t.Fatalf("made %+v", wc)
	}
	set.Status = *p.Status
	again := Decide(View{Now: now.Add(time.Minute), Set: set, Selected: []string{"east"}, WorkerClusters: clusters(wc)})
	if len(again.Create)+len(again.Update)+len(again.Delete) != 0 {
		t.Fatalf("second look plans %+v", again)
	}
	set.Status = *again.Status // "just made" is gone from the message
	if third := Decide(View{Now: now.Add(2 * time.Minute), Set: set, Selected: []string{"east"}, WorkerClusters: clusters(wc)}); third.Status != nil {
		t.Fatalf("the status keeps changing: %+v", third.Status)
	}
	if set.Status.Selected != 1 || set.Status.Joined != 1 || set.Status.Connected != 0 {
		t.Fatalf("counts %+v", set.Status)
	}
}
