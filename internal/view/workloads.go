package view

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/jobkind"
)

// States of a workload as kubectl gantry shows them.
const (
	StatePending  = "Pending"
	StateAdmitted = "Admitted"
	StateRunning  = "Running"
	StateFinished = "Finished"
	StateDeleting = "Deleting"
)

// ReasonStopping is the reason shown of a job its owner stopped while it has a cluster: its Job there is
// being deleted, pods first, and it waits (Pending, Stopped) once it is gone.
const ReasonStopping = "Stopping"

// WorkloadRow is one job as kubectl gantry jobs and workloads show it.
type WorkloadRow struct {
	// Name is the job's; Workload the name of its Workload, empty on the row of a job without one.
	Namespace, Name, Workload string
	// Kind is the job's kind: Job, JobSet, ...
	Kind  gantry.JobKind
	Queue string
	// GlobalQueue is the one whose quota the workload uses or waits for; empty when its Queue is unknown.
	GlobalQueue string
	// State is one of the State constants; Reason says why it is in it.
	State, Reason string
	// Position is "3/7": third of the 7 pending workloads of its GlobalQueue the reader may see.
	Position string
	Cluster  string
	Epoch    int64
	// GPUProduct is what the winner's agent chose; GPUs the total the job asks for.
	GPUProduct string
	GPUs       int64
	Priority   int32
	Created    time.Time
}

// StateOf says where a Workload is, and why.
func StateOf(wl *gantry.Workload) (state, reason string) {
	conds := wl.Status.Conditions
	if c := apimeta.FindStatusCondition(conds, gantry.WorkloadDeleting); wl.DeletionTimestamp != nil || (c != nil && c.Status == "True") {
		return StateDeleting, reasonOf(c)
	}
	if c := apimeta.FindStatusCondition(conds, gantry.WorkloadFinished); c != nil && c.Status == "True" {
		return StateFinished, c.Reason
	}
	if wl.Spec.Stopped { // its owner's word, before the hub's writes catch up with it
		if wl.Status.Winner() != "" {
			return stateOfWinner(conds), ReasonStopping
		}
		return StatePending, gantry.ReasonStopped
	}
	if wl.Status.TakenBack() {
		return StatePending, gantry.ReasonEvicted // until the dispatcher's next write says more
	}
	if wl.Status.Winner() != "" {
		if c := apimeta.FindStatusCondition(conds, gantry.WorkloadClusterReachable); c != nil && c.Status == "False" {
			return stateOfWinner(conds), c.Reason
		}
		if c := apimeta.FindStatusCondition(conds, gantry.WorkloadJobCreated); c != nil && c.Status == "False" && c.Reason == gantry.ReasonWorkerRefusing {
			return StateAdmitted, c.Reason
		}
		return stateOfWinner(conds), reasonOf(apimeta.FindStatusCondition(conds, gantry.WorkloadAdmitted))
	}
	return StatePending, reasonOf(apimeta.FindStatusCondition(conds, gantry.WorkloadPending))
}

func stateOfWinner(conds []metav1.Condition) string {
	if apimeta.IsStatusConditionTrue(conds, gantry.WorkloadJobCreated) {
		return StateRunning
	}
	return StateAdmitted
}

func reasonOf(c *metav1.Condition) string {
	if c == nil || c.Reason == "" {
		return "-"
	}
	return c.Reason
}

// Position is where a pending workload stands in its GlobalQueue.
type Position struct {
	GlobalQueue string `json:"globalQueue"`
	// Index counts from 1; Of is how many pending workloads the queue holds.
	Index int `json:"index"`
	Of    int `json:"of"`
}

func (p Position) String() string {
	if p.Of == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", p.Index, p.Of)
}

// Positions orders the pending Workloads of each GlobalQueue as the dispatcher takes them and says where
// each stands, keyed by namespace/name. A pending workload belongs to the GlobalQueue its Queue names
// now; one whose Queue is unknown has no position.
func Positions(wls []gantry.Workload, queues []gantry.Queue) map[string]Position {
	globalOf := globalQueues(queues)
	var pending []*dispatch.Workload
	for i := range wls {
		wl := &wls[i]
		if state, _ := StateOf(wl); state != StatePending {
			continue
		}
		gq, ok := globalOf[wl.Namespace+"/"+wl.Spec.QueueName]
		if !ok {
			continue
		}
		pending = append(pending, &dispatch.Workload{Key: wl.Namespace + "/" + wl.Name, GlobalQueue: gq,
			Priority: wl.Spec.Priority, Created: wl.CreationTimestamp.Time})
	}
	dispatch.SortByQueueOrder(pending)
	count := map[string]int{}
	for _, w := range pending {
		count[w.GlobalQueue]++
	}
	out := make(map[string]Position, len(pending))
	index := map[string]int{}
	for _, w := range pending {
		index[w.GlobalQueue]++
		out[w.Key] = Position{GlobalQueue: w.GlobalQueue, Index: index[w.GlobalQueue], Of: count[w.GlobalQueue]}
	}
	return out
}

// globalQueues maps namespace/name of each Queue to the GlobalQueue it names.
func globalQueues(queues []gantry.Queue) map[string]string {
	out := make(map[string]string, len(queues))
	for _, q := range queues {
		out[q.Namespace+"/"+q.Name] = q.Spec.GlobalQueue
	}
	return out
}

// Workloads builds one row per Workload, sorted by namespace and name, with the positions Positions
// computed (over as many Workloads as the reader may see).
func Workloads(wls []gantry.Workload, queues []gantry.Queue, positions map[string]Position) []WorkloadRow {
	globalOf := globalQueues(queues)
	rows := make([]WorkloadRow, 0, len(wls))
	for i := range wls {
		wl := &wls[i]
		row := RowOf(wl)
		if row.GlobalQueue == "" || row.State == StatePending {
			row.GlobalQueue = globalOf[wl.Namespace+"/"+wl.Spec.QueueName]
		}
		row.Position = positions[wl.Namespace+"/"+wl.Name].String()
		rows = append(rows, row)
	}
	sortRows(rows)
	return rows
}

// RowOf is a Workload's row without what needs the other objects: its GlobalQueue is the one whose
// quota it used, if any, and it has no position.
func RowOf(wl *gantry.Workload) WorkloadRow {
	state, reason := StateOf(wl)
	return WorkloadRow{
		Namespace: wl.Namespace, Name: JobOrWorkloadName(wl), Workload: wl.Name, Kind: jobkind.Of(wl).Name(), Queue: wl.Spec.QueueName,
		GlobalQueue: wl.Status.GlobalQueue, State: state, Reason: reason,
		Cluster: wl.Status.Winner(), Epoch: wl.Status.DispatchEpoch, GPUProduct: gpuProductOf(wl),
		GPUs: dispatch.GPUDemandOf(&wl.Spec).Total, Priority: wl.Spec.Priority, Created: wl.CreationTimestamp.Time,
	}
}

// JobOrWorkloadName is the name of the Job a Workload stands for, or the Workload's own name.
func JobOrWorkloadName(wl *gantry.Workload) string {
	if n := wl.Labels[gantry.JobNameLabel]; n != "" {
		return n
	}
	return wl.Name
}

// gpuProductOf lists the GPU products the winner's agent chose, one per product.
func gpuProductOf(wl *gantry.Workload) string {
	a := wl.Status.WinnerAdmission()
	if a == nil {
		return ""
	}
	var products []string
	for _, ps := range a.PodSets {
		if ps.GPUProduct != "" && !slices.Contains(products, ps.GPUProduct) {
			products = append(products, ps.GPUProduct)
		}
	}
	return strings.Join(products, ",")
}

// ReasonNoWorkload: the hub has no Workload for a job. It has not seen the job yet, or refused it; the
// job's events say why, and kubectl gantry explain shows them.
const ReasonNoWorkload = "NoWorkload"

// JobRows is one row per job, of any kind Gantry dispatches, sorted by namespace, name and kind: the
// row of its Workload, or a pending row saying it has none.
func JobRows(jobs []client.Object, workloadRows []WorkloadRow) []WorkloadRow {
	byJob := make(map[string]WorkloadRow, len(workloadRows))
	for _, r := range workloadRows {
		byJob[r.Namespace+"/"+string(r.Kind)+"/"+r.Name] = r
	}
	rows := make([]WorkloadRow, 0, len(jobs))
	for _, job := range jobs {
		k, ok := jobkind.ForObject(job)
		if !ok {
			continue
		}
		r, ok := byJob[job.GetNamespace()+"/"+string(k.Name())+"/"+job.GetName()]
		if !ok {
			r = WorkloadRow{Namespace: job.GetNamespace(), Name: job.GetName(), Kind: k.Name(), Queue: job.GetLabels()[gantry.QueueLabel],
				State: StatePending, Reason: ReasonNoWorkload, Position: "-", Created: job.GetCreationTimestamp().Time}
		}
		rows = append(rows, r)
	}
	sortRows(rows)
	return rows
}

func sortRows(rows []WorkloadRow) {
	sort.Slice(rows, func(a, b int) bool {
		if rows[a].Namespace != rows[b].Namespace {
			return rows[a].Namespace < rows[b].Namespace
		}
		if rows[a].Name != rows[b].Name {
			return rows[a].Name < rows[b].Name
		}
		return rows[a].Kind < rows[b].Kind
	})
}
