package accounting

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Summarize is what a namespace used, by Queue, GlobalQueue, cluster and GPU product: what its Usage
// counts, from the start of the UTC day of since (zero: all its totals), and what it does not count
// yet: runs that ended since its last pass, and runs that still run, up to now (not lost, so far). A
// counter read from it only grows: a run moves into the Usage's count in the one write that counts it.
func Summarize(ns Namespace, since time.Time) []gantry.UsageEntry {
	var from time.Time
	if !since.IsZero() {
		s := since.UTC()
		from = time.Date(s.Year(), s.Month(), s.Day(), 0, 0, 0, 0, time.UTC)
	}
	b := &book{st: &gantry.UsageStatus{}, clusters: ns.Clusters, totalsOnly: true}
	counted := map[types.UID]int64{}
	if u := ns.Usage; u != nil {
		b.st.Totals = slices.Clone(u.Totals)
		if !from.IsZero() {
			b.st.Totals = nil
			for _, d := range u.Days {
				if d.Day >= from.Format(time.DateOnly) {
					for _, e := range d.Entries {
						merge(&b.st.Totals, e)
					}
				}
			}
		}
		for _, m := range u.InFlight {
			counted[m.WorkloadUID] = m.Epoch
		}
	}
	for _, wl := range ns.Workloads {
		mark := max(wl.Status.AccountedEpoch, counted[wl.UID])
		for _, r := range wl.Status.Runs {
			if r.Epoch <= mark {
				continue
			}
			if r.Ended == nil {
				r.Ended = &metav1.Time{Time: ns.Now}
			}
			if r.Started.Time.Before(from) {
				r.Started = metav1.Time{Time: from}
			}
			b.add(wl.Spec.QueueName, &r, wl.Spec.CheckpointInterval)
		}
	}
	return b.st.Totals
}

// merge adds an entry into the entries of its key.
func merge(entries *[]gantry.UsageEntry, e gantry.UsageEntry) {
	i, found := slices.BinarySearchFunc(*entries, e, compareKeys)
	if !found {
		*entries = slices.Insert(*entries, i, gantry.UsageEntry{Queue: e.Queue, GlobalQueue: e.GlobalQueue, Cluster: e.Cluster, GPUProduct: e.GPUProduct})
	}
	(*entries)[i].Add(e)
}
