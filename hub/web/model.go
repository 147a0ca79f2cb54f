// Package web is the hub's live page: the fleet at a glance (worker clusters with their free GPUs,
// queues with usage against quota, jobs with their position and cluster) and a page per job telling its
// story as kubectl gantry explain does. It reads only the hub's caches, and pushes a change event to
// open pages whenever those caches change, so pages never poll the API servers. Who sees what is asked
// of the hub's authorizer through Allowed; authentication happens before (hub/endpoint).
package web

import (
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/view"
)

// Snapshot is what the page is made from, read from the hub's caches.
type Snapshot struct {
	Clusters     []gantry.WorkerCluster
	GlobalQueues []gantry.GlobalQueue
	Queues       []gantry.Queue
	Workloads    []gantry.Workload
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

// Overview is the fleet as one reader may see it.
type Overview struct {
	// Clusters and Queues are nil when the reader may not list WorkerClusters or GlobalQueues.
	Clusters     []ClusterCard
	Queues       []QueueCard
	ShowClusters bool
	ShowQueues   bool
	// Jobs are the unfinished jobs, of every kind, that the reader may list: of the kinds and namespaces
	// where they may list jobs of that kind.
	Jobs []view.WorkloadRow
	// HiddenNamespaces counts the namespaces with jobs the reader may not see (of one kind at least).
	HiddenNamespaces int
	Now              time.Time
}

// BuildOverview makes the overview from a snapshot for a reader who sees the jobs of the workloads
// visible says, and the clusters and queues when allowed.
func BuildOverview(s Snapshot, visible func(*gantry.Workload) bool, showClusters, showQueues bool, now time.Time) Overview {
	o := Overview{ShowClusters: showClusters, ShowQueues: showQueues, Now: now}
	if showClusters {
		o.Clusters = clusterCards(s)
	}
	if showQueues {
		o.Queues = queueCards(s.GlobalQueues)
	}
	var shown []gantry.Workload
	hidden := map[string]bool{}
	for i := range s.Workloads {
		wl := &s.Workloads[i]
		if state, _ := view.StateOf(wl); state == view.StateFinished {
			continue
		}
		if !visible(wl) {
			hidden[wl.Namespace] = true
			continue
		}
		shown = append(shown, *wl)
	}
	o.HiddenNamespaces = len(hidden)
	o.Jobs = view.Workloads(shown, s.Queues, view.Positions(s.Workloads, s.Queues))
	return o
}

func clusterCards(s Snapshot) []ClusterCard {
	rows := view.Clusters(s.Clusters, s.Workloads)
	byName := make(map[string]*gantry.WorkerCluster, len(s.Clusters))
	for i := range s.Clusters {
		byName[s.Clusters[i].Name] = &s.Clusters[i]
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
