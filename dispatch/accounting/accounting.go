// Package accounting adds up the GPU time of the runs of a namespace's jobs into its Usage, exactly once
// each, with no I/O. A run is counted when it ends. The Usage and the Workloads are two objects, so the
// count is made in three steps, each safe to repeat after a restart: the Usage counts the new runs and
// remembers the Workload's mark as in flight; the Workload then records the mark (accountedEpoch); the
// next pass forgets the mark in flight. A run is never counted twice, and none is lost while its
// Workload holds the finalizer gantry.dev/usage.
package accounting

import (
	"cmp"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// Cluster is what the accounting reads of a WorkerCluster: its price, and the GPU products its agent
// last reported (a run whose product is not recorded ran on the only one, if there is one).
type Cluster struct {
	Price    *dispatch.Price
	Products []string
}

// Namespace is one namespace's state: its Usage's status (nil when it has none yet), its Workloads, the
// clusters, and the time.
type Namespace struct {
	Usage     *gantry.UsageStatus
	Workloads []*gantry.Workload
	Clusters  map[string]Cluster
	Now       time.Time
}

// Plan is what to write, in order: the Usage's status (nil: unchanged), then each Workload's mark, then
// the release of the Workloads whose runs are all counted and that are being deleted.
type Plan struct {
	Usage   *gantry.UsageStatus
	Marks   map[types.UID]int64
	Release []types.UID
}

// Account decides one pass over a namespace.
func Account(ns Namespace) Plan {
	st := &gantry.UsageStatus{}
	if ns.Usage != nil {
		st = ns.Usage.DeepCopy()
	}
	inFlight := map[types.UID]int64{}
	for _, m := range st.InFlight {
		inFlight[m.WorkloadUID] = m.Epoch
	}
	plan := Plan{Marks: map[types.UID]int64{}}
	b := &book{st: st, clusters: ns.Clusters}
	present := map[types.UID]bool{}
	for _, wl := range ns.Workloads {
		present[wl.UID] = true
		mark := wl.Status.AccountedEpoch
		if e, ok := inFlight[wl.UID]; ok {
			if mark >= e {
				delete(inFlight, wl.UID) // the Workload says so now
			} else {
				plan.Marks[wl.UID] = e
				continue
			}
		}
		if newMark := b.count(wl, mark); newMark > mark {
			inFlight[wl.UID], plan.Marks[wl.UID] = newMark, newMark
			continue
		}
		if releasable(wl) {
			plan.Release = append(plan.Release, wl.UID)
		}
	}
	for uid := range inFlight {
		if !present[uid] {
			delete(inFlight, uid) // its Workload is gone: nothing of it can be counted again
		}
	}
	st.InFlight = marksOf(inFlight)
	st.Days = retained(st.Days, ns.Now)
	if ns.Usage == nil || !equality.Semantic.DeepEqual(ns.Usage, st) {
		plan.Usage = st
	}
	return plan
}

// releasable says whether a Workload being deleted may go: its Workload controller let it go, and every
// run it has is closed and counted.
func releasable(wl *gantry.Workload) bool {
	if wl.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(wl, gantry.UsageFinalizer) ||
		controllerutil.ContainsFinalizer(wl, gantry.WorkloadFinalizer) {
		return false
	}
	for _, r := range wl.Status.Runs {
		if r.Ended == nil || r.Epoch > wl.Status.AccountedEpoch {
			return false
		}
	}
	return true
}

func marksOf(inFlight map[types.UID]int64) []gantry.AccountedRuns {
	out := make([]gantry.AccountedRuns, 0, len(inFlight))
	for uid, e := range inFlight {
		out = append(out, gantry.AccountedRuns{WorkloadUID: uid, Epoch: e})
	}
	slices.SortFunc(out, func(a, b gantry.AccountedRuns) int { return cmp.Compare(a.WorkloadUID, b.WorkloadUID) })
	if len(out) == 0 {
		return nil
	}
	return out
}

// retained keeps the days within gantry.UsageRetentionDays of now, today included.
func retained(days []gantry.DayUsage, now time.Time) []gantry.DayUsage {
	oldest := now.UTC().AddDate(0, 0, -(gantry.UsageRetentionDays - 1)).Format(time.DateOnly)
	return slices.DeleteFunc(days, func(d gantry.DayUsage) bool { return d.Day < oldest })
}

// book adds runs to a Usage's status: to its totals, and by day unless totalsOnly.
type book struct {
	st         *gantry.UsageStatus
	clusters   map[string]Cluster
	totalsOnly bool
}

// count adds the Workload's closed runs of epochs after mark, and returns the epoch of the last one it
// added (mark when none).
func (b *book) count(wl *gantry.Workload, mark int64) int64 {
	newMark := mark
	for i := range wl.Status.Runs {
		r := &wl.Status.Runs[i]
		if r.Ended == nil || r.Epoch <= mark {
			continue
		}
		b.add(wl.Spec.QueueName, r, wl.Spec.CheckpointInterval)
		newMark = max(newMark, r.Epoch)
	}
	return newMark
}

// add counts one run, in the totals and in each UTC day it ran in. Of a run taken back, what ran since
// its work was last saved (Run.Saved: its last checkpoint, or its start) is lost.
func (b *book) add(queue string, r *gantry.Run, interval *metav1.Duration) {
	if r.GPUs <= 0 {
		return
	}
	c := b.clusters[r.Cluster]
	key := gantry.UsageEntry{Queue: queue, GlobalQueue: r.GlobalQueue, Cluster: r.Cluster, GPUProduct: productOf(r, c)}
	price := c.Price.PerGPUHour(key.GPUProduct)
	lostFrom := r.Ended.Time // nothing lost
	if r.TakenBack {
		lostFrom = r.Saved(r.Ended.Time, interval)
	}
	for start := r.Started.UTC(); start.Before(r.Ended.Time); {
		end := time.Date(start.Year(), start.Month(), start.Day()+1, 0, 0, 0, 0, time.UTC)
		if r.Ended.Time.Before(end) {
			end = r.Ended.UTC()
		}
		s := seconds{used: r.GPUs * int64(end.Sub(start)/time.Second), lost: r.GPUs * int64(overlap(start, end, lostFrom, r.Ended.Time)/time.Second)}
		if r.Borrowed {
			s.borrowed = s.used
		}
		if !b.totalsOnly {
			addTo(&b.day(start.Format(time.DateOnly)).Entries, key, s, price)
		}
		addTo(&b.st.Totals, key, s, price)
		start = end
	}
}

// seconds are the GPU-seconds of a run in one day: used, of them borrowed and lost.
type seconds struct{ used, borrowed, lost int64 }

// overlap is how long [a, b) and [c, d) share.
func overlap(a, b, c, d time.Time) time.Duration {
	if c.After(a) {
		a = c
	}
	if d.Before(b) {
		b = d
	}
	return max(b.Sub(a), 0)
}

// productOf is the product the run got: as recorded, else the cluster's only one.
func productOf(r *gantry.Run, c Cluster) string {
	if r.GPUProduct == "" && len(c.Products) == 1 {
		return c.Products[0]
	}
	return r.GPUProduct
}

// day is the Usage's entry for the day, made in date order when missing.
func (b *book) day(date string) *gantry.DayUsage {
	i, found := slices.BinarySearchFunc(b.st.Days, date, func(d gantry.DayUsage, date string) int { return cmp.Compare(d.Day, date) })
	if !found {
		b.st.Days = slices.Insert(b.st.Days, i, gantry.DayUsage{Day: date})
	}
	return &b.st.Days[i]
}

// addTo adds GPU-seconds of a run to the entry of key, made in key order when missing; price is of an
// hour of one GPU (NaN: none).
func addTo(entries *[]gantry.UsageEntry, key gantry.UsageEntry, s seconds, price float64) {
	i, found := slices.BinarySearchFunc(*entries, key, compareKeys)
	if !found {
		*entries = slices.Insert(*entries, i, key)
	}
	e := &(*entries)[i]
	e.GPUSeconds += s.used
	e.BorrowedGPUSeconds += s.borrowed
	e.LostGPUSeconds += s.lost
	if math.IsNaN(price) {
		return
	}
	e.Cost = gantry.AmountOfMicros(e.Cost.Micros() + int64(math.Round(price*1e6*float64(s.used)/3600)))
	if s.lost > 0 {
		e.LostCost = gantry.AmountOfMicros(e.LostCost.Micros() + int64(math.Round(price*1e6*float64(s.lost)/3600)))
	}
}

func compareKeys(a, b gantry.UsageEntry) int {
	return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.GlobalQueue, b.GlobalQueue),
		cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.GPUProduct, b.GPUProduct))
}

// ClustersOf is what the accounting reads of the WorkerClusters: their prices and reported products.
func ClustersOf(wcs []gantry.WorkerCluster) map[string]Cluster {
	out := make(map[string]Cluster, len(wcs))
	for i := range wcs {
		c := Cluster{Price: dispatch.PriceOf(wcs[i].Spec.Price)}
		for _, g := range dispatch.GPUCapacityOf(wcs[i].Status.Capacity) {
			c.Products = append(c.Products, g.Product)
		}
		out[wcs[i].Name] = c
	}
	return out
}
