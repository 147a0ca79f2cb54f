package clusterset

import (
	"fmt"
	"testing"
	"time"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Over any selection and any WorkerClusters: only the set's own are changed or removed; a removed one
// was cordoned and needed by no Workload; nothing is made under a name that is taken; the operator's
// fence is never changed.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{0, 255, 17, 3, 9, 128, 64})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func(n int) int {
			if len(data) == 0 {
				return 0
			}
			b := int(data[0])
			data = data[1:]
			return b % n
		}
		set := gpuSet()
		wcs := map[string]*gantry.WorkerCluster{}
		needed := map[string][]string{}
		var selected []string
		for i := range 6 {
			name := fmt.Sprintf("c%d", i)
			switch next(4) {
			case 1:
				wcs[name] = made(name)
			case 2:
				wcs[name] = byHand(name)
			case 3:
				wcs[name] = made(name)
				wcs[name].OwnerReferences[0].UID = "another-set"
			}
			if wc := wcs[name]; wc != nil {
				wc.Spec.Cordoned, wc.Spec.Fenced = next(2) == 1, next(3) == 0
				if wc.Spec.Cordoned && next(2) == 1 {
					wc.Annotations = map[string]string{gantry.CordonedBySetAnnotation: "2026-01-01T00:00:00Z"}
				}
			}
			if next(2) == 1 {
				needed[name] = []string{"team/job-" + name}
			}
			if next(2) == 1 {
				selected = append(selected, name)
			}
		}
		var problem *Problem
		if next(5) == 0 {
			problem = &Problem{Reason: gantry.ReasonSelectionAPINotServed, Message: "unreadable"}
		}
		p := Decide(View{Now: time.Now(), Set: set, Selected: selected, Problem: problem, WorkerClusters: wcs, Needed: needed})
		for _, wc := range p.Create {
			if _, taken := wcs[wc.Name]; taken || problem != nil {
				t.Fatalf("made %s: taken %v, selection unreadable %v", wc.Name, taken, problem != nil)
			}
		}
		for _, wc := range p.Update {
			orig := wcs[wc.Name]
			if orig == nil || !MadeBy(set, orig) || orig.Spec.Fenced != wc.Spec.Fenced {
				t.Fatalf("changed %s, which is not the set's or whose fence changed", wc.Name)
			}
		}
		for _, wc := range p.Delete {
			if !MadeBy(set, wc) || !wc.Spec.Cordoned || len(needed[wc.Name]) > 0 || problem != nil {
				t.Fatalf("removed %s: set's %v, cordoned %v, needed by %v, selection unreadable %v", wc.Name, MadeBy(set, wc), wc.Spec.Cordoned, needed[wc.Name], problem != nil)
			}
		}
	})
}
