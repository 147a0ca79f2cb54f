package queues

import (
	"reflect"
	"slices"
	"testing"

	"github.com/gantry-dev/gantry/dispatch"
)

// snapshotFields lists the fields of dispatch.Snapshot as dotted paths, going into the structs of the
// dispatch package it holds (through maps, slices and pointers), each once: a struct met again (a
// Cut's First workload, the Tallied ones) is a field of its own.
func snapshotFields() []string {
	var paths []string
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Map || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			ours := ft.Kind() == reflect.Struct && (ft.PkgPath() == reflect.TypeFor[dispatch.Snapshot]().PkgPath() ||
				ft.Name() == "PreemptionPolicy")
			if ours && !seen[ft] {
				walk(ft, prefix+f.Name+".")
				continue
			}
			paths = append(paths, prefix+f.Name)
		}
	}
	walk(reflect.TypeFor[dispatch.Snapshot](), "")
	return paths
}

// TestEveryPlanInputHasAnEvent: every field of the snapshot dispatch.Plan decides over is in
// planInputs, with an event that changes it, and planInputs names no field that is gone. A field added
// to the snapshot without one fails here, not in a queue parked on stale state.
func TestEveryPlanInputHasAnEvent(t *testing.T) {
	fields := snapshotFields()
	for _, f := range fields {
		if len(planInputs[f]) == 0 {
			t.Errorf("dispatch.Snapshot's %s: no event changes it (planInputs)", f)
		}
	}
	for f := range planInputs {
		if !slices.Contains(fields, f) {
			t.Errorf("planInputs names %s, which dispatch.Snapshot does not have", f)
		}
	}
}

// TestRestNoticesEveryChangeOfACluster: a change of any field of a cluster in the snapshot (set by
// reflection, so that a field added later is covered) is an event: ClusterChanged or CapacityReported.
func TestRestNoticesEveryChangeOfACluster(t *testing.T) {
	base := dispatch.Cluster{Name: "w1", Connected: true, AgentReady: true, Kinds: map[string]bool{"Job": true},
		GPUs: []dispatch.GPUCapacity{{Product: "A100", Allocatable: 8, Free: 8, LargestFreeOnNode: 8, LargestAllocatableOnNode: 8}}}
	typ := reflect.TypeFor[dispatch.Cluster]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "Name" {
			continue // the key: another name is another cluster
		}
		changed := base
		changed.GPUs = slices.Clone(base.GPUs)
		v := reflect.ValueOf(&changed).Elem().Field(i)
		switch v.Kind() {
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.String:
			v.SetString(v.String() + "-changed")
		case reflect.Int, reflect.Int32, reflect.Int64:
			v.SetInt(v.Int() + 1)
		case reflect.Map:
			m := reflect.MakeMap(v.Type())
			m.SetMapIndex(reflect.Zero(v.Type().Key()), reflect.Zero(v.Type().Elem()))
			v.Set(m)
		case reflect.Slice:
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
		default:
			t.Fatalf("Cluster.%s is of a kind (%s) this test cannot change: teach it", f.Name, v.Kind())
		}
		was, now := map[string]dispatch.Cluster{"w1": base}, map[string]dispatch.Cluster{"w1": changed}
		_, sameAvail := sameAvailability(was, now)
		_, sameCap := sameCapacity(was, now)
		if sameAvail && sameCap {
			t.Errorf("a change of Cluster.%s is not noticed by rest", f.Name)
		}
	}
}
