package queues

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// restingHub is a hub of GlobalQueues a and b, each with a Queue of the same name in namespace ns and
// four GPUs on cluster w1, and a workload of eight GPUs waiting in each: once their verdicts are
// written, both queues are at rest and a pass parks them.
type restingHub struct {
	t    *testing.T
	m    *Manager
	read Read
	wls  map[string]*gantry.Workload
	last *Pass
}

func newRestingHub(t *testing.T) *restingHub {
	h := &restingHub{t: t, m: NewManager(0), wls: map[string]*gantry.Workload{}}
	h.read = Read{Namespaces: []corev1.Namespace{namespace("ns", nil)}, Now: at.Time,
		Clusters: map[string]dispatch.Cluster{"w1": {Name: "w1", Connected: true, AgentReady: true}}}
	for _, q := range []string{"a", "b"} {
		h.read.GlobalQueues = append(h.read.GlobalQueues, *hubtest.MakeGlobalQueue(q).SelectAll().Cluster("w1", gantry.GPUResource, "4").Obj())
		h.read.Queues = append(h.read.Queues, *hubtest.MakeQueue(q, "ns").GlobalQueue(q).Obj())
		h.change(hubWorkload("ns", "big-"+q, q).Obj())
	}
	for range 4 {
		h.pass()
	}
	if parked := h.pass(); !slices.Equal(parked, []string{"a", "b"}) {
		t.Fatalf("a hub at rest parks %v, want a and b", parked)
	}
	return h
}

// change tells the manager of the Workload as it is now; nil deletes the one of that key.
func (h *restingHub) change(wl *gantry.Workload) {
	h.wls[keyOf(wl)] = wl
	h.m.WorkloadChanged(keyOf(wl), wl)
}

// pass runs a pass a minute after the last one, writes its verdicts into the Workloads as the
// dispatcher would, and returns the GlobalQueues it parked.
func (h *restingHub) pass() []string {
	h.read.Now = h.read.Now.Add(time.Minute)
	h.m.Sync()
	p := h.m.Begin(h.read)
	h.last = p
	res := dispatch.Plan(p.Snapshot())
	h.m.End(p, &res)
	for _, v := range res.Verdicts {
		wl := h.wls[v.Key].DeepCopy()
		wl.ResourceVersion += "+"
		apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: gantry.WorkloadPending, Status: metav1.ConditionTrue,
			Reason: v.Reason, Message: v.Message, ObservedGeneration: wl.Generation})
		h.change(wl)
	}
	var parked []string
	for q := range p.rest.parked {
		parked = append(parked, q)
	}
	slices.Sort(parked)
	return parked
}

// TestEachEventWakesTheQueuesItNames: on a hub at rest, each kind of event wakes the queues it names and
// no other: the next pass walks them and still parks the rest.
func TestEachEventWakesTheQueuesItNames(t *testing.T) {
	gpus := func(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
	cases := map[string]struct {
		event   func(h *restingHub)
		parked  []string // by the next pass
		wokeAll Event    // the event that made it walk everything
	}{
		"none": {event: func(*restingHub) {}, parked: []string{"a", "b"}},
		"WorkloadChanged": {event: func(h *restingHub) {
			wl := h.wls["ns/big-a"].DeepCopy()
			wl.Spec.Priority, wl.ResourceVersion = 3, "2"
			h.change(wl)
		}, parked: []string{"b"}},
		"WorkloadChanged, a new one": {event: func(h *restingHub) { h.change(hubWorkload("ns", "new", "b").Obj()) }, parked: []string{"a"}},
		"WorkloadLeft":               {event: func(h *restingHub) { h.m.WorkloadChanged("ns/big-a", nil) }, parked: []string{"b"}},
		"OwnWrite": {event: func(h *restingHub) {
			h.read.Own = map[string]*gantry.Workload{"ns/big-b": h.wls["ns/big-b"]}
		}, parked: []string{"a"}},
		"CopiesRead": {event: func(h *restingHub) {
			h.change(hubWorkload("ns", "nominated", "a").Nominated("a", 1, "w1").Obj())
			for range 3 { // it is taken in, and nothing more is decided for it: only its copies can change
				h.pass()
			}
		}, parked: []string{"b"}},
		"RejectionLapsed": {event: func(h *restingHub) {
			wl := h.wls["ns/big-b"].DeepCopy()
			wl.ResourceVersion += "r"
			wl.Status.RejectedClusters = []gantry.RejectedCluster{{Name: "w1", Reason: gantry.ReasonNeverFits,
				Time: metav1.NewTime(h.read.Now.Add(-dispatch.DefaultRejectionTTL + 330*time.Second))}} // lapses after five passes
			h.change(wl)
			for range 4 { // it is taken in, and b comes to rest again
				h.pass()
			}
			if parked := h.pass(); !slices.Equal(parked, []string{"a", "b"}) {
				h.t.Fatalf("with the rejection taken in, the hub parks %v, want a and b", parked)
			}
		}, parked: []string{"a"}},
		"QuotaGrew": {event: func(h *restingHub) {
			h.read.GlobalQueues = slices.Clone(h.read.GlobalQueues)
			gq := h.read.GlobalQueues[0].DeepCopy()
			gq.ResourceVersion, gq.Spec.Clusters[0].Quota[gantry.GPUResource] = "2", gpus(5)
			h.read.GlobalQueues[0] = *gq
		}, parked: []string{"b"}},
		"SpecChanged": {event: func(h *restingHub) {
			h.read.Queues = append(slices.Clone(h.read.Queues), *hubtest.MakeQueue("c", "ns").GlobalQueue("a").Obj())
		}, wokeAll: SpecChanged{Kind: "Queue", Namespace: "ns", Name: "c"}},
		"ClusterChanged": {event: func(h *restingHub) {
			w1 := h.read.Clusters["w1"]
			w1.Cordoned = true
			h.read.Clusters = map[string]dispatch.Cluster{"w1": w1}
		}, wokeAll: ClusterChanged{Cluster: "w1"}},
		"Resync": {event: func(h *restingHub) { h.m.Forget() }, wokeAll: Resync{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newRestingHub(t)
			tc.event(h)
			if got := h.pass(); !slices.Equal(got, tc.parked) {
				t.Errorf("the pass after the event parks %v, want %v", got, tc.parked)
			}
			if got := h.last.WokeAll(); got != tc.wokeAll {
				t.Errorf("the pass walked everything for %#v, want %#v", got, tc.wokeAll)
			}
		})
	}
}
