// Package view turns snapshots of Gantry's objects into what kubectl gantry and the hub's page show:
// pure functions, table-tested, with no Kubernetes I/O.
package view

import (
	"fmt"
	"sort"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// ClusterRow is one worker cluster as kubectl gantry clusters shows it.
type ClusterRow struct {
	Name string
	// Connected is True, False (with the reason) or Unknown.
	Connected string
	Agent     string
	// State is Ready, Cordoned, Fenced or Cordoned,Fenced.
	State    string
	Failover string
	// GPUs lists free/allocatable per product, as the agent last reported them.
	GPUs []string
	// Running counts the Workloads that won this cluster and have not finished.
	Running int
}

// RunningOn counts, per cluster, the Workloads that won it and have not finished.
func RunningOn(workloads []gantry.Workload) map[string]int {
	running := map[string]int{}
	for i := range workloads {
		wl := &workloads[i]
		if w := wl.Status.Winner(); w != "" && !apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadFinished) {
			running[w]++
		}
	}
	return running
}

// Clusters builds the rows, sorted by name, from the WorkerClusters and the count of what runs on
// each (RunningOn).
func Clusters(clusters []gantry.WorkerCluster, running map[string]int) []ClusterRow {
	rows := make([]ClusterRow, 0, len(clusters))
	for i := range clusters {
		wc := &clusters[i]
		rows = append(rows, ClusterRow{
			Name:      wc.Name,
			Connected: conditionWithReason(wc, gantry.ClusterConnected),
			Agent:     conditionWithReason(wc, gantry.ClusterAgentReady),
			State:     clusterState(wc),
			Failover:  failoverOf(wc),
			GPUs:      gpus(wc),
			Running:   running[wc.Name],
		})
	}
	sort.Slice(rows, func(a, b int) bool { return rows[a].Name < rows[b].Name })
	return rows
}

// conditionWithReason is True, Unknown when the hub has not said, or False (Reason).
func conditionWithReason(wc *gantry.WorkerCluster, typ string) string {
	c := apimeta.FindStatusCondition(wc.Status.Conditions, typ)
	switch {
	case c == nil:
		return "Unknown"
	case c.Status == "True":
		return "True"
	default:
		return fmt.Sprintf("%s (%s)", c.Status, c.Reason)
	}
}

func clusterState(wc *gantry.WorkerCluster) string {
	var s []string
	if wc.Spec.Cordoned {
		s = append(s, "Cordoned")
	}
	if wc.Spec.Fenced {
		s = append(s, "Fenced")
	}
	if len(s) == 0 {
		return "Ready"
	}
	return strings.Join(s, ",")
}

func failoverOf(wc *gantry.WorkerCluster) string {
	p := wc.Spec.Failover.Policy
	if p == "" {
		p = gantry.FailoverWait
	}
	return fmt.Sprintf("%s/%s", p, wc.Spec.Failover.TimeoutOrDefault())
}

func gpus(wc *gantry.WorkerCluster) []string {
	if wc.Status.Capacity == nil {
		return nil
	}
	var out []string
	for _, p := range wc.Status.Capacity.GPUProducts {
		out = append(out, fmt.Sprintf("%s %d/%d", p.Product, p.Free, p.Allocatable))
	}
	sort.Strings(out)
	return out
}
