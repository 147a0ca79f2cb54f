package view

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	visibility "github.com/gantry-dev/gantry/apis/visibility/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// whatIfIndent lines continuation lines up under a header line's value.
const whatIfIndent = "            "

// WhatIfText tells what the dispatcher would do with a job submitted now: the job, its decision, when
// it would most likely start if it waits, then a table of its GlobalQueue's clusters.
func WhatIfText(w *visibility.WhatIf) string {
	var b strings.Builder
	for _, l := range whatIfHeader(w) {
		b.WriteString(l + "\n")
	}
	if len(w.Clusters) > 0 {
		b.WriteString("\n" + clustersHeading(w.GlobalQueue) + "\n")
		writeClusterTable(&b, w)
	}
	return b.String()
}

func whatIfHeader(w *visibility.WhatIf) []string {
	job := fmt.Sprintf("%s %s/%s", w.JobKind, w.Namespace, jobName(w.ObjectMeta))
	if w.Workload != "" {
		job += ", as Workload " + w.Workload
	}
	lines := []string{
		"Job:        " + job,
		"Queue:      " + whatIfQueue(w),
		"Requests:   " + resources(w.Requests),
		"Decision:   " + whatIfDecision(w),
	}
	if w.Decision == visibility.DecisionPreempt {
		for i, p := range w.Preemptions {
			label := whatIfIndent
			if i == 0 {
				label = "Preempts:   "
			}
			lines = append(lines, fmt.Sprintf("%sWorkload %s/%s on %s", label, p.Namespace, p.Name, p.Cluster))
		}
	}
	if w.Decision == visibility.DecisionWait && w.Forecast != nil {
		f := forecastLines(w.Forecast, w.GlobalQueue, w.Requests)
		lines = append(lines, "Forecast:   "+f[0])
		for _, more := range f[1:] {
			lines = append(lines, whatIfIndent+more)
		}
	}
	return lines
}

// jobName is the job's name; one the hub completed from a generateName is not the name the job would
// get, so only the generateName is shown.
func jobName(m metav1.ObjectMeta) string {
	if m.GenerateName != "" && strings.HasPrefix(m.Name, m.GenerateName) {
		return m.GenerateName + "<generated>"
	}
	return m.Name
}

func whatIfQueue(w *visibility.WhatIf) string {
	q := dashIfEmpty(w.Queue)
	if w.GlobalQueue == "" {
		q += " (it names no GlobalQueue)"
	} else {
		q += ", GlobalQueue " + w.GlobalQueue
	}
	q += fmt.Sprintf("; priority %d", w.Priority)
	if w.PositionInGlobalQueue > 0 {
		q += fmt.Sprintf("; position %d of %d pending", w.PositionInGlobalQueue, w.PendingInGlobalQueue)
	}
	return q
}

func whatIfDecision(w *visibility.WhatIf) string {
	switch w.Decision {
	case visibility.DecisionDispatch:
		switch len(w.Nominated) {
		case 0:
			return "Dispatch now"
		case 1:
			return "Dispatch to " + w.Nominated[0] + " now"
		}
		return "Dispatch now, a copy to each of " + strings.Join(w.Nominated, ", ") + " (in the queue's order of preference)"
	case visibility.DecisionPreempt:
		n := len(w.Preemptions)
		return fmt.Sprintf("Preempt %d %s, and be dispatched once %s gone", n, plural(n, "workload", "workloads"), plural(n, "it is", "they are"))
	}
	text := dashIfEmpty(w.Decision)
	if w.Reason != "" {
		text += " (" + w.Reason + ")"
	}
	if w.Message != "" {
		text += ": " + w.Message
	}
	return text
}

// forecastLines say when a waiting job would most likely start, or why that cannot be said.
func forecastLines(f *visibility.StartForecast, globalQueue string, requests corev1.ResourceList) []string {
	queue := "its GlobalQueue"
	if globalQueue != "" {
		queue = "GlobalQueue " + globalQueue
	}
	gpus := requests[gantry.GPUResource]
	size := sizeClass(gpus.Value())
	window := duration.HumanDuration(f.Window.Duration)
	inLine := ""
	if f.Ahead > 0 {
		inLine = fmt.Sprintf("; this one is number %d in line among them", f.Ahead)
	}
	if !f.Known {
		return []string{fmt.Sprintf("none: %s started no job %s in the last %s%s", queue, size, window, inLine)}
	}
	rate := f.StartsPerHour
	if rate == "" {
		rate = "?"
	}
	return []string{
		fmt.Sprintf("most likely in %s; %d%% likely between %s and %s, if the queue goes on as it did",
			humanDuration(f.Likely), f.Coverage, humanDuration(f.Early), humanDuration(f.Late)),
		fmt.Sprintf("(%s starts %s jobs %s an hour, as its runs of the last %s tell%s)", queue, rate, size, window, inLine),
	}
}

// sizeClass names the jobs a forecast counts as of the same size: their GPUs rounded up to the same
// power of two.
func sizeClass(gpus int64) string {
	switch {
	case gpus <= 0:
		return "without GPUs"
	case gpus == 1:
		return "of 1 GPU"
	case gpus == 2:
		return "of 2 GPUs"
	}
	hi := int64(1) << bits.Len64(uint64(gpus-1))
	return fmt.Sprintf("of %d to %d GPUs", hi/2+1, hi)
}

func humanDuration(d *metav1.Duration) string {
	if d == nil {
		return "?"
	}
	return duration.HumanDuration(d.Duration)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func clustersHeading(globalQueue string) string {
	if globalQueue == "" {
		return "Clusters, in the queue's order:"
	}
	return "Clusters of GlobalQueue " + globalQueue + ", in its order:"
}

// clusterColumn is a column of the clusters' table, and how to read it when that is not plain.
type clusterColumn struct {
	header, note string
	cell         func(visibility.WhatIfCluster) string
}

// writeClusterTable writes one row per cluster, with the columns that say something for at least one of
// them, then how to read those that are not plain.
func writeClusterTable(b *strings.Builder, w *visibility.WhatIf) {
	columns := clusterColumns(w)
	tw := tabwriter.NewWriter(b, 0, 0, 3, ' ', 0)
	row := make([]string, len(columns))
	for i, col := range columns {
		row[i] = col.header
	}
	fmt.Fprintln(tw, strings.Join(row, "\t"))
	for _, c := range w.Clusters {
		for i, col := range columns {
			row[i] = col.cell(c)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	_ = tw.Flush()
	for _, col := range columns {
		if col.note != "" {
			b.WriteString(col.note + "\n")
		}
	}
}

// clusterColumns are the columns of the table: a column that would be empty, or zero, for every cluster
// is left out.
func clusterColumns(w *visibility.WhatIf) []clusterColumn {
	some := func(f func(visibility.WhatIfCluster) bool) bool { return slices.ContainsFunc(w.Clusters, f) }
	columns := []clusterColumn{{header: "CLUSTER", cell: func(c visibility.WhatIfCluster) string { return c.Name }},
		{header: "CANDIDATE", cell: candidateCell}}
	borrows := some(func(c visibility.WhatIfCluster) bool { return c.Candidate && !c.WithinQuota })
	for i, r := range limitedResources(w.Clusters) {
		col := clusterColumn{header: "QUOTA " + string(r), cell: func(c visibility.WhatIfCluster) string { return quotaCell(c, r) }}
		if i == 0 {
			col.note = "QUOTA: used (admitted workloads) + reserved (nominated ones) / the GlobalQueue's quota ≤ the most it may use there, borrowing included."
			if borrows {
				col.note += "\nborrowing: it would run beyond the GlobalQueue's own quota there, on what its cohort lends."
			}
		}
		columns = append(columns, col)
	}
	if some(func(c visibility.WhatIfCluster) bool { return len(c.GPUs) > 0 }) {
		columns = append(columns, clusterColumn{header: "GPUS FREE", cell: func(c visibility.WhatIfCluster) string { return gpusCell(c.GPUs) }})
	}
	if some(func(c visibility.WhatIfCluster) bool { return c.StartedRecently > 0 }) {
		// The hub sends no forecast for a job it would dispatch; its window is the dispatcher's all the same.
		window := dispatch.ForecastWindow
		if w.Forecast != nil {
			window = w.Forecast.Window.Duration
		}
		gpus := w.Requests[gantry.GPUResource]
		columns = append(columns, clusterColumn{header: "STARTED", cell: func(c visibility.WhatIfCluster) string { return fmt.Sprint(c.StartedRecently) },
			note: fmt.Sprintf("STARTED: the jobs %s the GlobalQueue started there in the last %s.", sizeClass(gpus.Value()), duration.HumanDuration(window))})
	}
	if some(func(c visibility.WhatIfCluster) bool { return c.PerHour != "" }) {
		columns = append(columns, clusterColumn{header: "PER HOUR", cell: func(c visibility.WhatIfCluster) string { return dashIfEmpty(c.PerHour) },
			note: "PER HOUR: what an hour of the job would cost there, at the cluster's prices."})
	}
	if some(func(c visibility.WhatIfCluster) bool { return c.DataTermsMatched > 0 }) {
		columns = append(columns, clusterColumn{header: "DATA", cell: func(c visibility.WhatIfCluster) string { return fmt.Sprint(c.DataTermsMatched) },
			note: "DATA: how many of the job's data location labels the cluster carries."})
	}
	if some(func(c visibility.WhatIfCluster) bool { return len(c.Scores) > 0 }) {
		columns = append(columns, clusterColumn{header: "SCORES", cell: func(c visibility.WhatIfCluster) string { return scoresCell(c.Scores) },
			note: "SCORES: the raw value of each of the GlobalQueue's scores there (? where it knows none); higher ranks first."})
	}
	return columns
}

// limitedResources are the resources the GlobalQueue limits on at least one cluster, in name order.
func limitedResources(clusters []visibility.WhatIfCluster) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, c := range clusters {
		for r := range c.Quota {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	slices.Sort(out)
	return out
}

func candidateCell(c visibility.WhatIfCluster) string {
	switch {
	case c.Candidate && c.WithinQuota:
		return "yes"
	case c.Candidate:
		return "yes, borrowing"
	}
	return "no: " + dashIfEmpty(c.Reason)
}

// quotaCell is used+reserved/quota ≤ ceiling of one resource; "-" where the queue does not limit it.
func quotaCell(c visibility.WhatIfCluster, r corev1.ResourceName) string {
	quota, ok := c.Quota[r]
	if !ok {
		return "-"
	}
	amount := func(rl corev1.ResourceList) string {
		q, ok := rl[r]
		if !ok {
			return "0"
		}
		return q.String()
	}
	cell := amount(c.Used) + "+" + amount(c.Reserved) + "/" + quota.String()
	if ceiling, ok := c.Ceiling[r]; ok {
		cell += " ≤ " + ceiling.String()
	}
	return cell
}

// gpusCell says the free GPUs of each product, and the most free on one node where that is fewer.
func gpusCell(gpus []visibility.WhatIfGPUs) string {
	if len(gpus) == 0 {
		return "-"
	}
	parts := make([]string, len(gpus))
	for i, g := range gpus {
		parts[i] = fmt.Sprintf("%s %d of %d", g.Product, g.Free, g.Allocatable)
		if g.LargestFreeOnNode < g.Free {
			parts[i] += fmt.Sprintf(" (%d on one node)", g.LargestFreeOnNode)
		}
	}
	return strings.Join(parts, ", ")
}

func scoresCell(scores []visibility.WhatIfScore) string {
	if len(scores) == 0 {
		return "-"
	}
	parts := make([]string, len(scores))
	for i, s := range scores {
		v := s.Value
		if v == "" {
			v = "?"
		}
		parts[i] = s.Name + "=" + v
	}
	return strings.Join(parts, " ")
}
