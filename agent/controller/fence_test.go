package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/agent/admission"
	"github.com/gantry-dev/gantry/agent/agenttest"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
)

func hubLease(rv string, policy gantryv1beta1.FailoverPolicy, seconds int32, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: gantryv1beta1.HubLeaseName, Namespace: gantryv1beta1.GantryNamespace, ResourceVersion: rv,
			Annotations: map[string]string{gantryv1beta1.FailoverPolicyAnnotation: string(policy)}},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To(seconds), RenewTime: &metav1.MicroTime{Time: renewed}},
	}
}

func TestReadHubLease(t *testing.T) {
	cases := map[string]struct {
		lease    *coordinationv1.Lease
		seen     LeaseSighting
		want     HubLease
		wantSeen LeaseSighting
	}{
		"no lease: nothing is ever stopped": {},
		"policy Wait: nothing is ever stopped": {
			lease: hubLease("5", gantryv1beta1.FailoverWait, 60, now), wantSeen: LeaseSighting{"5", now},
		},
		"a renewal just seen: the timeout from its renewTime, which is earlier": {
			lease: hubLease("5", gantryv1beta1.FailoverFence, 60, now.Add(-2*time.Second)),
			want:  HubLease{Fence: true, Timeout: time.Minute, Deadline: now.Add(58 * time.Second)}, wantSeen: LeaseSighting{"5", now},
		},
		"no renewal since the last sighting: the timeout from the sighting": {
			lease: hubLease("5", gantryv1beta1.FailoverFence, 60, now.Add(time.Hour)), // the hub's clock runs ahead
			seen:  LeaseSighting{"5", now.Add(-50 * time.Second)},
			want:  HubLease{Fence: true, Timeout: time.Minute, Deadline: now.Add(10 * time.Second)}, wantSeen: LeaseSighting{"5", now.Add(-50 * time.Second)},
		},
		"an agent started while cut off: the lease's renewTime counts": {
			lease: hubLease("5", gantryv1beta1.FailoverFence, 60, now.Add(-10*time.Minute)),
			want:  HubLease{Fence: true, Timeout: time.Minute, Deadline: now.Add(-9 * time.Minute)}, wantSeen: LeaseSighting{"5", now},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, seen := ReadHubLease(tc.lease, tc.seen, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("lease (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSeen, seen); diff != "" {
				t.Errorf("sighting (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideFence(t *testing.T) {
	twoNodes := []*corev1.Node{gpuNode("n1"), gpuNode("n2")}
	admittedA := func() *gantryv1beta1.Workload { return copyOf("a", 0, 2, "8").Admitted().Obj() }
	placement := map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 1, "n2", 1)}
	jobOfA := func(suspendedByFence bool) map[types.NamespacedName]client.Object {
		j := agenttest.MakeJob("a", "ns").Workload("hub-a").Created(now.Add(-time.Minute)).Obj()
		if suspendedByFence {
			j.Spec.Suspend = ptr.To(true)
			j.Annotations = map[string]string{gantryv1beta1.SuspendedByAnnotation: gantryv1beta1.SuspendedByFence}
		}
		return jobs(j)
	}
	lapsed := HubLease{Fence: true, Timeout: time.Minute, Deadline: now.Add(-time.Second)}
	fresh := HubLease{Fence: true, Timeout: time.Minute, Deadline: now.Add(40 * time.Second)}
	suspendedCopy := func() *gantryv1beta1.Workload {
		c := admittedA()
		c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{Type: gantryv1beta1.WorkloadSuspended,
			Status: metav1.ConditionTrue, Reason: gantryv1beta1.ReasonHubLeaseExpired})
		return c
	}
	resumedCopy := func(ago time.Duration) *gantryv1beta1.Workload {
		c := admittedA()
		c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{Type: gantryv1beta1.WorkloadSuspended,
			Status: metav1.ConditionFalse, Reason: gantryv1beta1.ReasonResumed, LastTransitionTime: metav1.NewTime(now.Add(-ago))})
		return c
	}
	cases := map[string]struct {
		in          Input
		wantSuspend int
		wantUpdates []string
		wantWake    time.Duration
		// wantReleased: the copy is given up and its room goes back.
		wantReleased bool
	}{
		"lease lapsed: the running Job is suspended and the copy says so; its room is kept": {
			in:          Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{admittedA()}, Jobs: jobOfA(false), Placements: placement, HubLease: lapsed},
			wantSuspend: 1, wantUpdates: []string{"Suspended=True/HubLeaseExpired"},
		},
		"lease lapsed, already suspended: nothing more, and no placement timeout for its missing pods": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{suspendedCopy()}, Jobs: jobOfA(true), Placements: placement, HubLease: lapsed,
				PlacementTimeout: 30 * time.Second},
		},
		"lease fresh: nothing stopped, a pass is due at the deadline": {
			in:       Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{admittedA()}, Jobs: jobOfA(false), Placements: placement, HubLease: fresh},
			wantWake: 40 * time.Second,
		},
		"lease renewed and the Job resumed by the hub: the copy says so": {
			in:          Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{suspendedCopy()}, Jobs: jobOfA(false), Placements: placement, HubLease: fresh},
			wantUpdates: []string{"Suspended=False/Resumed"}, wantWake: 40 * time.Second,
		},
		"resumed just now, a minute after its Job was created: the placement timeout counts from now": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{suspendedCopy()}, Jobs: jobOfA(false), Placements: placement, HubLease: fresh,
				PlacementTimeout: 30 * time.Second},
			wantUpdates: []string{"Suspended=False/Resumed"}, wantWake: 31 * time.Second,
		},
		"resumed 10s ago, pods not yet placed: within the placement timeout": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{resumedCopy(10 * time.Second)}, Jobs: jobOfA(false), Placements: placement,
				HubLease: fresh, PlacementTimeout: 30 * time.Second},
			wantWake: 21 * time.Second,
		},
		"resumed 40s ago, pods still not placed: given up": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{resumedCopy(40 * time.Second)}, Jobs: jobOfA(false), Placements: placement,
				HubLease: fresh, PlacementTimeout: 30 * time.Second},
			wantUpdates: []string{"Admitted=False/PlacementTimeout"}, wantWake: 40 * time.Second, wantReleased: true,
		},
		"policy Wait: nothing is ever stopped (the pass is due for the placement timeout only)": {
			in:       Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{admittedA()}, Jobs: jobOfA(false), Placements: placement},
			wantWake: 4*time.Minute + time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.in.Now = now
			if tc.in.PlacementTimeout == 0 {
				tc.in.PlacementTimeout = 5 * time.Minute
			}
			plan := Decide(tc.in)
			var updates []string
			for _, u := range plan.Updates {
				updates = append(updates, u.Condition.Type+"="+string(u.Condition.Status)+"/"+u.Condition.Reason)
			}
			if diff := cmp.Diff(tc.wantUpdates, updates); diff != "" {
				t.Errorf("updates (-want +got):\n%s", diff)
			}
			if len(plan.Suspend) != tc.wantSuspend {
				t.Errorf("suspends %d Jobs, want %d", len(plan.Suspend), tc.wantSuspend)
			}
			if r, ok := plan.Snapshot.Reservation("ns/a"); (ok && len(r) > 0) == tc.wantReleased {
				t.Errorf("the admitted copy's room held: %v, want %v", ok && len(r) > 0, !tc.wantReleased)
			}
			if plan.Wake != tc.wantWake {
				t.Errorf("wake %v, want %v", plan.Wake, tc.wantWake)
			}
		})
	}
}
