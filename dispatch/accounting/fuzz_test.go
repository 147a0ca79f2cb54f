package accounting

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// FuzzAccountCountsEachRunOnce plays jobs that run, end, are taken back and run again, and are deleted,
// with accounting passes whose writes may each fail: the Usage's, any Workload's mark, any release. At
// every step the Usage counts no more GPU time than the closed runs hold, and once the writes go
// through it counts exactly that, with nothing in flight and every deleted Workload gone.
func FuzzAccountCountsEachRunOnce(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
	f.Add([]byte{3, 3, 3, 250, 251, 3, 3, 252, 3, 3, 3, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		w := newWorld()
		for i, op := range ops {
			w.step(op)
			if got, closed := w.counted(), w.closedGPUSeconds(); got > closed {
				t.Fatalf("after op %d (%d): the Usage counts %d GPU-seconds, the closed runs hold %d", i, op, got, closed)
			}
		}
		for range 4 { // every write goes through
			w.pass(0xff)
		}
		if got, closed := w.counted(), w.closedGPUSeconds(); got != closed {
			t.Fatalf("the Usage counts %d GPU-seconds, the closed runs hold %d", got, closed)
		}
		if n := len(w.usage.InFlight); n != 0 {
			t.Errorf("%d Workloads still in flight", n)
		}
		for _, wl := range w.workloads {
			if wl.DeletionTimestamp != nil {
				t.Errorf("Workload %s was deleted and is still there", wl.UID)
			}
		}
	})
}

// world is a namespace whose Workloads run on w1, one minute a step.
type world struct {
	now       time.Time
	usage     *gantry.UsageStatus
	workloads []*gantry.Workload
	gone      int64 // GPU-seconds of the closed runs of Workloads now gone
	next      int
}

func newWorld() *world { return &world{now: t0} }

// step does what op says: op%8 < 5 changes a job, else an accounting pass whose writes go through as
// the bits of op say.
func (w *world) step(op byte) {
	w.now = w.now.Add(time.Minute)
	switch op % 8 {
	case 0:
		w.next++
		wl := workloadWith(fmt.Sprintf("w%d", w.next), 0)
		wl.Finalizers = []string{gantry.WorkloadFinalizer, gantry.UsageFinalizer}
		wl.Spec.PodSets = []gantry.PodSet{{Name: "main", Count: 1}}
		w.workloads = append(w.workloads, wl)
	case 1, 2, 3, 4:
		if len(w.workloads) > 0 {
			w.change(w.workloads[int(op/8)%len(w.workloads)], op%8)
		}
	default:
		w.pass(op)
	}
}

// change starts a run, ends it, takes it back, or deletes the Workload (closing its run as its
// controller does, and letting go of it).
func (w *world) change(wl *gantry.Workload, what byte) {
	st := &wl.Status
	n := len(st.Runs)
	open := n > 0 && st.Runs[n-1].Ended == nil
	now := metav1.Time{Time: w.now}
	switch {
	case what == 4:
		if wl.DeletionTimestamp == nil {
			wl.DeletionTimestamp = &now
		}
		if open {
			st.Runs[n-1].Ended, st.Runs[n-1].Outcome = &now, gantry.RunDeleted
		}
		controllerutil.RemoveFinalizer(wl, gantry.WorkloadFinalizer)
	case wl.DeletionTimestamp != nil:
	case !open:
		st.Runs = append(st.Runs, gantry.Run{Cluster: "w1", Epoch: int64(n) + 1, GPUs: int64(n%3) + 1, Started: now})
	default:
		st.Runs[n-1].Ended, st.Runs[n-1].TakenBack = &now, what == 2
	}
}

// pass runs Account and carries out its plan, each write going through when its bit of op is set.
func (w *world) pass(op byte) {
	p := Account(Namespace{Usage: w.usage, Workloads: w.workloads, Clusters: fleet, Now: w.now})
	if op&1 == 0 {
		return // the Usage's write failed: nothing after it is done
	}
	if p.Usage != nil {
		w.usage = p.Usage
	}
	bit := 1
	for _, wl := range w.workloads {
		if e, ok := p.Marks[wl.UID]; ok {
			bit = (bit + 1) % 8
			if op&(1<<bit) != 0 {
				wl.Status.AccountedEpoch = e
			}
		}
	}
	kept := w.workloads[:0]
	for _, wl := range w.workloads {
		if contains(p.Release, wl.UID) {
			w.gone += closedOf(wl)
			continue
		}
		kept = append(kept, wl)
	}
	w.workloads = kept
}

func contains(uids []types.UID, uid types.UID) bool {
	for _, u := range uids {
		if u == uid {
			return true
		}
	}
	return false
}

func closedOf(wl *gantry.Workload) int64 {
	var sum int64
	for _, r := range wl.Status.Runs {
		if r.Ended != nil {
			sum += r.GPUs * int64(r.Ended.Sub(r.Started.Time)/time.Second)
		}
	}
	return sum
}

func (w *world) closedGPUSeconds() int64 {
	sum := w.gone
	for _, wl := range w.workloads {
		sum += closedOf(wl)
	}
	return sum
}

func (w *world) counted() int64 {
	if w.usage == nil {
		return 0
	}
	var sum int64
	for _, e := range w.usage.Totals {
		sum += e.GPUSeconds
	}
	return sum
}
