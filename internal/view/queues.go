package view

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// QueueRow is one cluster of one GlobalQueue as kubectl gantry queues shows it.
type QueueRow struct {
	GlobalQueue, Cluster string
	// Cohort is the cohort the queue lends to and borrows from, and Weight its fair-sharing weight there;
	// both "-" for a queue in no cohort, where a weight has no effect.
	Cohort, Weight string
	// Usage lists, per resource with a quota, confirmed usage/quota and what is reserved beyond it.
	Usage []string
	// Pending and Admitted count the queue's Workloads (the same on every row of a queue).
	Pending, Admitted int32
}

// Queues builds one row per (GlobalQueue, cluster of its spec), sorted by queue then spec order.
func Queues(gqs []gantry.GlobalQueue) []QueueRow {
	sorted := append([]gantry.GlobalQueue(nil), gqs...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a].Name < sorted[b].Name })
	var rows []QueueRow
	for i := range sorted {
		gq := &sorted[i]
		usage := map[string]gantry.ClusterUsage{}
		for _, u := range gq.Status.Usage {
			usage[u.Name] = u
		}
		cohort, weight := "-", "-"
		if gq.Spec.Cohort != "" {
			cohort, weight = gq.Spec.Cohort, strconv.Itoa(int(ptr.Deref(gq.Spec.FairSharing.Weight, 1)))
		}
		for _, c := range gq.Spec.Clusters {
			rows = append(rows, QueueRow{GlobalQueue: gq.Name, Cluster: c.Name, Cohort: cohort, Weight: weight,
				Usage:   usageOf(c.Quota, usage[c.Name]),
				Pending: gq.Status.PendingWorkloads, Admitted: gq.Status.AdmittedWorkloads})
		}
	}
	return rows
}

// usageOf says, per resource of the quota in name order, "name used/quota", with "+N reserved" when
// admitted copies hold room that is not confirmed yet, and what the queue borrows from its cohort there
// and lends it.
func usageOf(quota corev1.ResourceList, u gantry.ClusterUsage) []string {
	names := make([]string, 0, len(quota))
	for n := range quota {
		names = append(names, string(n))
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for _, n := range names {
		rn := corev1.ResourceName(n)
		s := fmt.Sprintf("%s %s/%s", n, quantity(u.Admitted, rn), quantity(quota, rn))
		if r, ok := u.Reserved[rn]; ok && !r.IsZero() {
			s += " +" + r.String() + " reserved"
		}
		if b, ok := u.Borrowed[rn]; ok && !b.IsZero() {
			s += " (" + b.String() + " borrowed)"
		}
		if l, ok := u.Lent[rn]; ok && !l.IsZero() {
			s += " (" + l.String() + " lent)"
		}
		out = append(out, s)
	}
	return out
}

func quantity(l corev1.ResourceList, n corev1.ResourceName) string {
	q, ok := l[n]
	if !ok {
		return "0"
	}
	return q.String()
}

// Join lists a row's entries in one cell.
func Join(entries []string) string {
	if len(entries) == 0 {
		return "-"
	}
	return strings.Join(entries, ", ")
}
