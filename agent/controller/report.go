package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gantry-dev/gantry/agent/admission"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
)

// DefaultHeartbeatInterval is how often the agent rewrites its CapacityReport when nothing changed.
const DefaultHeartbeatInterval = 30 * time.Second

// MinReportInterval is the least time between two reports with different capacity.
const MinReportInterval = 5 * time.Second

// CapacityFromSummary converts an admission summary to the API's CapacitySummary, with what the
// admitted copies ask for of each resource (milli-units).
func CapacityFromSummary(s admission.Summary, admitted map[corev1.ResourceName]int64) gantryv1beta1.CapacitySummary {
	out := gantryv1beta1.CapacitySummary{Nodes: s.Nodes, ReadyNodes: s.ReadyNodes}
	for _, r := range s.Resources {
		out.Resources = append(out.Resources, gantryv1beta1.ResourceCapacity{
			Name:              r.Name,
			Allocatable:       r.Allocatable,
			Free:              r.Free,
			LargestFreeOnNode: r.LargestFreeOnNode,
			Admitted:          resource.NewMilliQuantity(admitted[r.Name], r.Allocatable.Format),
		})
	}
	for _, p := range s.GPUProducts {
		gp := gantryv1beta1.GPUProductCapacity{
			Product:           p.Product,
			Nodes:             p.Nodes,
			Allocatable:       p.Allocatable,
			Free:              p.Free,
			LargestFreeOnNode: p.LargestFreeOnNode,

			LargestAllocatableOnNode: p.LargestAllocatableOnNode,
		}
		for _, sh := range p.Shapes {
			gp.Shapes = append(gp.Shapes, gantryv1beta1.GPUShapeCount{GPUs: sh.GPUs, Pods: sh.Pods})
		}
		out.GPUProducts = append(out.GPUProducts, gp)
	}
	return out
}

// GangSchedulingCondition is the report's GangScheduling condition for a cluster that serves the
// PodGroup API or not, its transition time kept from cur's conditions.
func GangSchedulingCondition(cur []metav1.Condition, served bool, now time.Time) metav1.Condition {
	if served {
		return servedCondition(cur, gantryv1beta1.ClusterGangScheduling, metav1.ConditionTrue, gantryv1beta1.ReasonPodGroupsServed,
			"the cluster serves scheduling.k8s.io/v1beta1 PodGroups: its scheduler binds a gang's pods all or none", now)
	}
	return servedCondition(cur, gantryv1beta1.ClusterGangScheduling, metav1.ConditionFalse, gantryv1beta1.ReasonNoPodGroupAPI,
		"the cluster does not serve scheduling.k8s.io/v1beta1 PodGroups: its scheduler binds a gang's pods one by one", now)
}

// KueueCondition is the report's Kueue condition for a cluster that serves Kueue's API or not, its
// transition time kept from cur's conditions.
func KueueCondition(cur []metav1.Condition, served bool, now time.Time) metav1.Condition {
	if served {
		return servedCondition(cur, gantryv1beta1.ClusterKueue, metav1.ConditionTrue, gantryv1beta1.ReasonKueueServed,
			"the cluster serves Kueue's API (kueue.x-k8s.io/v1beta2): a job sent through one of its LocalQueues is admitted within what its ClusterQueue has left", now)
	}
	return servedCondition(cur, gantryv1beta1.ClusterKueue, metav1.ConditionFalse, gantryv1beta1.ReasonNoKueueAPI,
		"the cluster does not serve Kueue's API (kueue.x-k8s.io/v1beta2): jobs sent through a LocalQueue (WorkerCluster spec.kueue) are refused here", now)
}

// servedCondition is a condition of the report, its transition time kept from cur's while its status
// stays.
func servedCondition(cur []metav1.Condition, typ string, status metav1.ConditionStatus, reason, message string, now time.Time) metav1.Condition {
	c := metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(now).Rfc3339Copy()}
	if old := apimeta.FindStatusCondition(cur, c.Type); old != nil && old.Status == c.Status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	return c
}

// ReportDue tells whether a report showing cur must be rewritten to show want at now: when its cluster
// name, agent version, capacity or conditions differ, or its heartbeat is interval old. It also returns how long until the next
// heartbeat falls due if nothing changes.
func ReportDue(cur gantryv1beta1.CapacityReportStatus, want gantryv1beta1.CapacityReportStatus, now time.Time, interval time.Duration) (bool, time.Duration) {
	if cur.HeartbeatTime.IsZero() || cur.ClusterName != want.ClusterName || cur.AgentVersion != want.AgentVersion ||
		!equality.Semantic.DeepEqual(cur.Conditions, want.Conditions) {
		return true, interval
	}
	age := now.Sub(cur.HeartbeatTime.Time)
	if !equality.Semantic.DeepEqual(cur.Capacity, want.Capacity) {
		// Every admission changes the free capacity; during a burst the report follows at most every
		// MinReportInterval, so it costs a bounded number of writes here and on the hub.
		if wait := MinReportInterval - age; wait > 0 {
			return false, wait
		}
		return true, interval
	}
	if left := interval - age; left > 0 {
		return false, left
	}
	return true, interval
}

// syncReport brings the cluster's CapacityReport up to date with capacity, creating it when it is
// missing. It returns when the next heartbeat is due.
func (r *Reconciler) syncReport(ctx context.Context, capacity gantryv1beta1.CapacitySummary) (time.Duration, error) {
	logger := log.FromContext(ctx)
	now := r.clock.Now()
	want := gantryv1beta1.CapacityReportStatus{
		ClusterName:   r.opts.ClusterName,
		AgentVersion:  r.opts.Version,
		HeartbeatTime: metav1.NewTime(now).Rfc3339Copy(),
		Capacity:      capacity,
	}
	report := &gantryv1beta1.CapacityReport{}
	err := r.client.Get(ctx, client.ObjectKey{Name: r.opts.ClusterName}, report)
	switch {
	case apierrors.IsNotFound(err):
		report = &gantryv1beta1.CapacityReport{ObjectMeta: metav1.ObjectMeta{Name: r.opts.ClusterName}}
		if err := r.client.Create(ctx, report); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// The cache is behind; its create event queues the next pass.
				logger.V(2).Info("CapacityReport exists but is not in the cache yet", "report", klog.KObj(report))
				return r.opts.HeartbeatInterval, nil
			}
			return 0, fmt.Errorf("creating CapacityReport %s: %w", r.opts.ClusterName, err)
		}
		logger.Info("Created CapacityReport", "report", klog.KObj(report))
	case err != nil:
		return 0, fmt.Errorf("reading CapacityReport %s: %w", r.opts.ClusterName, err)
	}

	cur := report.Status
	if written, behind := r.lastReport.Behind(report.Name, report.ResourceVersion); behind {
		cur = written // the cache does not show the last write yet
	}
	want.Conditions = []metav1.Condition{GangSchedulingCondition(cur.Conditions, r.podGroups, now), KueueCondition(cur.Conditions, r.kueue, now)}
	due, next := ReportDue(cur, want, now, r.opts.HeartbeatInterval)
	if !due {
		return next, nil
	}
	updated := report.DeepCopy()
	updated.Status = want
	if err := r.client.Status().Update(ctx, updated); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Changed or deleted since the cache saw it; its event queues the next pass.
			logger.V(2).Info("CapacityReport changed since it was read", "report", klog.KObj(report), "err", err)
			return r.opts.HeartbeatInterval, nil
		}
		return 0, fmt.Errorf("updating the status of CapacityReport %s: %w", r.opts.ClusterName, err)
	}
	r.lastReport.Record(report.Name, report.ResourceVersion, want)
	logger.V(4).Info("Wrote CapacityReport", "report", klog.KObj(report), "readyNodes", capacity.ReadyNodes)
	return next, nil
}
