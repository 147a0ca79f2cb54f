package workload

import (
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/metrics"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

func TestTransitionOf(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	with := func(st gantry.WorkloadStatus, typ, reason string) gantry.WorkloadStatus {
		st = *st.DeepCopy()
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason})
		return st
	}
	evicted := func(st gantry.WorkloadStatus, epoch int64) gantry.WorkloadStatus {
		st = *st.DeepCopy()
		st.Evictions = append(st.Evictions, gantry.Eviction{Cluster: "w1", Epoch: epoch, Reason: gantry.ReasonPlacementTimeout, Time: at})
		return st
	}
	won := gantry.WorkloadStatus{DispatchEpoch: 1, ClusterName: "w1"}
	created := with(won, gantry.WorkloadJobCreated, gantry.ReasonJobCreated)
	full := gantry.WorkloadStatus{}
	for e := range int64(gantry.MaxEvictions) {
		full = evicted(full, e+1)
	}
	trimmed := evicted(full, gantry.MaxEvictions+1)
	trimmed.Evictions = trimmed.Evictions[1:]
	for name, tc := range map[string]struct {
		before, after gantry.WorkloadStatus
		want          transition
	}{
		"the Job created is recorded":       {before: won, after: created, want: transition{jobCreated: true}},
		"a record already there is not new": {before: created, after: created},
		"finished":                          {before: created, after: with(created, gantry.WorkloadFinished, gantry.ReasonJobSucceeded), want: transition{finished: gantry.ReasonJobSucceeded}},
		"evicted":                           {before: created, after: evicted(created, 1), want: transition{eviction: &evicted(created, 1).Evictions[0]}},
		"evicted with the history full":     {before: full, after: trimmed, want: transition{eviction: &trimmed.Evictions[gantry.MaxEvictions-1]}},
		"an eviction recorded before":       {before: evicted(won, 1), after: evicted(won, 1)},
	} {
		got := transitionOf(&tc.before, &tc.after)
		if got.jobCreated != tc.want.jobCreated || got.finished != tc.want.finished || (got.eviction == nil) != (tc.want.eviction == nil) ||
			(got.eviction != nil && !sameEviction(*got.eviction, *tc.want.eviction)) {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}

func TestWithdrawalReason(t *testing.T) {
	wl, _ := hubObjects("")
	copyOf := func(uid string, epoch int64) *gantry.Workload {
		return hubtest.MakeCopy(wl.Name, wl.Namespace, uid, epoch).Obj()
	}
	won := wl.DeepCopy()
	won.Status.ClusterName = "w1"
	deleting := wl.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for name, tc := range map[string]struct {
		wl      *gantry.Workload
		cluster string
		cp      *gantry.Workload
		want    string
	}{
		"left by an earlier Workload": {wl, "w1", copyOf("other-uid", 1), metrics.WithdrawnLeftover},
		"the Workload is deleted":     {deleting, "w1", copyOf("wl-uid", 1), metrics.WithdrawnDeleted},
		"another cluster won":         {won, "w2", copyOf("wl-uid", 1), metrics.WithdrawnLost},
		"an earlier epoch":            {wl, "w1", copyOf("wl-uid", 0), metrics.WithdrawnStaleEpoch},
		"no longer nominated":         {wl, "w3", copyOf("wl-uid", 1), metrics.WithdrawnNotNominated},
	} {
		if got := withdrawalReason(tc.wl, tc.cluster, tc.cp); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}
