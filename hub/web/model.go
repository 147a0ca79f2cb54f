// Package web is the hub's live page: the fleet at a glance (worker clusters with their free GPUs,
// queues with usage against quota, the GPU-hours of the last 7 days, jobs with their position and
// cluster, filtered, sorted and cut into pages on the hub) and a page per job telling its story as
// kubectl gantry explain does. It reads only the hub's caches: a Table follows the Workloads and makes
// them into a snapshot at most once per RefreshInterval, and open pages are told of each change, so
// pages never poll the API servers and a deep queue costs a page its own length. Who sees what is
// asked of the hub's authorizer through Allowed; authentication happens before (hub/endpoint).
package web

import (
	"slices"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/view"
)

// Fleet is what the page shows besides the jobs, read from the hub's caches.
type Fleet struct {
	Clusters     []gantry.WorkerCluster
	GlobalQueues []gantry.GlobalQueue
}

// Bar is a quantity against its maximum, drawn as a meter.
type Bar struct {
	Label      string
	Value, Max float64
	Text       string
}

// ClusterCard is one worker cluster on the overview.
type ClusterCard struct {
	view.ClusterRow
	// GPUs are the free GPUs of each product against the allocatable ones.
	GPUs []Bar
}

// QueueCard is one cluster of one GlobalQueue: confirmed usage against quota per resource.
type QueueCard struct {
	view.QueueRow
	Usage []Bar
}

// Filter is one of the table's pickers: the query parameter it sets, the values to pick from (the
// first is the one that filters nothing) and the one picked.
type Filter struct {
	Param, Label string
	Options      []Option
	Picked       string
}

// Option is one value of a Filter and how it reads.
type Option struct{ Value, Text string }

// Overview is the fleet as one reader may see it.
type Overview struct {
	// Clusters and Queues are nil when the reader may not list WorkerClusters or GlobalQueues.
	Clusters     []ClusterCard
	Queues       []QueueCard
	ShowClusters bool
	ShowQueues   bool
	// Usage is the GPU time of the UsageWindow of the namespaces whose Usage the reader may list; nil
	// when there is none.
	Usage *UsageTable
	// Jobs is the page of the jobs the query asked for, of those the reader may list.
	Jobs    Selection
	Query   Query
	Filters []Filter
	// Last is the number of the last page; Previous and Next are links to the pages around this one,
	// empty at either end.
	Last           int
	Previous, Next string
	Now            time.Time
}

// BuildOverview makes the overview from the fleet (its clusters and queues when showClusters and
// showQueues say the reader may see them), a page of jobs and what runs on each cluster.
func BuildOverview(f Fleet, jobs Selection, q Query, runningOn map[string]int, showClusters, showQueues bool, now time.Time) Overview {
	o := Overview{ShowClusters: showClusters, ShowQueues: showQueues, Jobs: jobs, Query: q, Now: now,
		Last: max(1, (jobs.Matching+PageSize-1)/PageSize)}
	if showClusters {
		o.Clusters = clusterCards(f.Clusters, runningOn)
	}
	if showQueues {
		o.Queues = queueCards(f.GlobalQueues)
	}
	if q.Page > 1 {
		o.Previous = pageLink(q, min(q.Page-1, o.Last))
	}
	if q.Page < o.Last {
		o.Next = pageLink(q, q.Page+1)
	}
	o.Filters = []Filter{
		picker("namespace", "Namespace", "every namespace", jobs.Namespaces, q.Namespace),
		picker("queue", "Queue", "every queue", jobs.Queues, q.Queue),
		picker("globalQueue", "GlobalQueue", "every global queue", jobs.GlobalQueues, q.GlobalQueue),
		picker("cluster", "Cluster", "every cluster", jobs.Clusters, q.Cluster),
		{Param: "state", Label: "State", Picked: q.State, Options: stateOptions},
		{Param: "sort", Label: "Sort by", Picked: q.Sort, Options: []Option{{SortQueue, "queue order"}, {SortNewest, "newest first"},
			{SortOldest, "oldest first"}, {SortName, "namespace and name"}}},
	}
	return o
}

var stateOptions = []Option{{StateUnfinished, "unfinished"}, {StateAll, "all (finished: last day)"}, {view.StatePending, view.StatePending},
	{view.StateAdmitted, view.StateAdmitted}, {view.StateRunning, view.StateRunning}, {view.StateDeleting, view.StateDeleting},
	{view.StateFinished, "Finished (last day)"}}

// picker offers the values, and the one picked even when no row has it.
func picker(param, label, none string, values []string, picked string) Filter {
	if picked != "" && !slices.Contains(values, picked) {
		values = append([]string{picked}, values...)
	}
	return Filter{Param: param, Label: label, Picked: picked, Options: append([]Option{{"", none}}, options(values)...)}
}

func options(values []string) []Option {
	out := make([]Option, len(values))
	for i, v := range values {
		out[i] = Option{v, v}
	}
	return out
}

// pageLink is the URL of page n of the query's rows.
func pageLink(q Query, n int) string {
	q.Page = n
	if v := q.Values().Encode(); v != "" {
		return "/?" + v
	}
	return "/"
}

func clusterCards(clusters []gantry.WorkerCluster, runningOn map[string]int) []ClusterCard {
	rows := view.Clusters(clusters, runningOn)
	byName := make(map[string]*gantry.WorkerCluster, len(clusters))
	for i := range clusters {
		byName[clusters[i].Name] = &clusters[i]
	}
	cards := make([]ClusterCard, 0, len(rows))
	for _, r := range rows {
		card := ClusterCard{ClusterRow: r}
		if c := byName[r.Name].Status.Capacity; c != nil {
			for _, g := range c.GPUProducts {
				card.GPUs = append(card.GPUs, Bar{Label: g.Product, Value: float64(g.Free), Max: float64(g.Allocatable),
					Text: strconv.FormatInt(g.Free, 10) + " free of " + strconv.FormatInt(g.Allocatable, 10)})
			}
			sort.Slice(card.GPUs, func(a, b int) bool { return card.GPUs[a].Label < card.GPUs[b].Label })
		}
		cards = append(cards, card)
	}
	return cards
}

func queueCards(gqs []gantry.GlobalQueue) []QueueCard {
	quota := map[string]corev1.ResourceList{}
	usage := map[string]gantry.ClusterUsage{}
	for _, gq := range gqs {
		for _, c := range gq.Spec.Clusters {
			quota[gq.Name+"/"+c.Name] = c.Quota
		}
		for _, u := range gq.Status.Usage {
			usage[gq.Name+"/"+u.Name] = u
		}
	}
	rows := view.Queues(gqs)
	cards := make([]QueueCard, 0, len(rows))
	for _, r := range rows {
		key := r.GlobalQueue + "/" + r.Cluster
		card := QueueCard{QueueRow: r}
		names := make([]string, 0, len(quota[key]))
		for n := range quota[key] {
			names = append(names, string(n))
		}
		sort.Strings(names)
		for _, n := range names {
			q, used := quota[key][corev1.ResourceName(n)], usage[key].Admitted[corev1.ResourceName(n)]
			card.Usage = append(card.Usage, Bar{Label: n, Value: used.AsApproximateFloat64(), Max: q.AsApproximateFloat64(),
				Text: used.String() + " of " + q.String()})
		}
		cards = append(cards, card)
	}
	return cards
}
