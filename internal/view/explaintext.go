package view

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

// Lines tell the explanation in plain words, its times counted back from now.
func (e *Explanation) Lines(now time.Time) []string {
	if e.NoWorkload != nil {
		return e.noWorkloadLines(now)
	}
	lines := e.header(now)
	lines = append(lines, "")
	lines = append(lines, e.stateLines(now)...)
	if e.State.State == StatePending && !e.State.Stopped && e.Queue.GlobalQueueExists != nil && *e.Queue.GlobalQueueExists {
		heading := "Clusters of GlobalQueue " + e.Queue.GlobalQueue + ":"
		if len(e.Queue.Scores) > 0 {
			heading = "Clusters of GlobalQueue " + e.Queue.GlobalQueue + ", ranked by " + strings.Join(e.Queue.Scores, ", ") + ":"
		}
		lines = append(lines, "", heading)
		lines = append(lines, e.clusterLines(now)...)
	}
	if h := e.historyLines(now); len(h) > 0 {
		lines = append(lines, "", "History:")
		lines = append(lines, h...)
	}
	if len(e.Unreadable) > 0 {
		lines = append(lines, "", "Left out: you may not read "+strings.Join(e.Unreadable, ", ")+" on the hub.")
	}
	return lines
}

func (e *Explanation) header(now time.Time) []string {
	lines := []string{fmt.Sprintf("%s %s/%s (Workload %s)", e.Job.Kind, e.Job.Namespace, e.Job.Name, e.Workload)}
	if e.Resubmitted != nil {
		lines = append(lines, fmt.Sprintf("  Note:      this is the story of an earlier %s of this name; the one on the hub now was submitted %s ago "+
			"and gets its own Workload once this one is gone", e.Job.Kind, since(now, e.Resubmitted.Time)))
	}
	lines = append(lines, "  Queue:     "+e.Queue.text(e.Job.Namespace), "  Demand:    "+e.Demand.text())
	if len(e.Demand.GPUProducts) > 0 {
		lines = append(lines, "  GPUs:      "+strings.Join(e.Demand.GPUProducts, " or ")+" (in that order)")
	}
	if e.Demand.TopologyKey != "" {
		lines = append(lines, "  Topology:  all pods on nodes sharing one "+e.Demand.TopologyKey)
	}
	if len(e.Demand.DataLocation) > 0 {
		lines = append(lines, "  Data:      near clusters labelled "+strings.Join(e.Demand.DataLocation, ", "))
	}
	return append(lines, fmt.Sprintf("  Priority:  %d; submitted %s ago", *e.Priority, since(now, e.Submitted.Time)))
}

func (q ExplainedQueue) text(ns string) string {
	switch {
	case q.Exists == nil:
		return q.Name + " (you may not read Queues)"
	case !*q.Exists:
		return q.Name + " (no such Queue in namespace " + ns + ")"
	case q.GlobalQueueExists != nil && !*q.GlobalQueueExists:
		return q.Name + ", GlobalQueue " + q.GlobalQueue + " (not found)"
	}
	return q.Name + ", GlobalQueue " + q.GlobalQueue
}

// text says what each pod set asks for and the total.
func (d *Demand) text() string {
	var sets []string
	for _, ps := range d.PodSets {
		sets = append(sets, fmt.Sprintf("%s: %d × {%s}", ps.Name, ps.Count, resources(ps.Requests)))
	}
	return strings.Join(sets, "; ") + "; in all " + resources(d.Total)
}

// resources lists a resource list in name order: "cpu 4, nvidia.com/gpu 8".
func resources(rl corev1.ResourceList) string {
	names := make([]string, 0, len(rl))
	for n := range rl {
		names = append(names, string(n))
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		q := rl[corev1.ResourceName(n)]
		parts[i] = n + " " + q.String()
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

func (e *Explanation) stateLines(now time.Time) []string {
	s := e.State
	switch s.State {
	case StatePending:
		return s.pendingLines(now)
	case StateFinished:
		lines := []string{fmt.Sprintf("State: Finished (%s) %s ago: %s", s.Reason, since(now, s.Since.Time), s.Message)}
		return append(lines, e.jobStatusLines(now)...)
	case StateDeleting:
		if s.Since == nil {
			return []string{"State: Deleting"}
		}
		return []string{fmt.Sprintf("State: Deleting (%s): %s", s.Reason, s.Message)}
	}
	lines := []string{fmt.Sprintf("State: %s on %s", s.State, s.Cluster)}
	if s.Stopped {
		lines = append(lines, "  Stopping: "+s.Message+".", "  To do: "+s.Advice+".")
	}
	if s.Unreachable != "" {
		lines = append(lines, "  The hub cannot reach it: "+s.Unreachable)
	}
	if c := s.JobNotCreated; c != nil {
		lines = append(lines, fmt.Sprintf("  Its Job is not created there (%s, for %s): %s", c.Reason, since(now, c.Time.Time), c.Message))
	}
	return append(lines, e.jobStatusLines(now)...)
}

func (s *JobState) pendingLines(now time.Time) []string {
	if s.Since == nil {
		return []string{"State: Pending: not looked at by the hub yet"}
	}
	lines := []string{fmt.Sprintf("State: Pending (%s) for %s", dashIfEmpty(s.Reason), since(now, s.Since.Time)), "  " + s.Message}
	if s.Advice != "" {
		lines = append(lines, "  To do: "+s.Advice+".")
	}
	if p := s.Position; p != nil {
		lines = append(lines, fmt.Sprintf("  Position %d of %d pending in GlobalQueue %s (higher priority first, then older first).",
			p.Index, p.Of, p.GlobalQueue))
	}
	return lines
}

// progressWords say how far a job got, in the text.
var progressWords = map[string]string{ProgressNotStarted: "not started", ProgressRunning: "running",
	ProgressSucceeded: "succeeded", ProgressFailed: "failed"}

// jobStatusLines tell what the hub mirrored back of its job from the cluster it runs on.
func (e *Explanation) jobStatusLines(now time.Time) []string {
	p := e.JobStatus
	if p == nil {
		return nil
	}
	line := fmt.Sprintf("  %s: %s", e.Job.Kind, progressWords[p.Progress])
	if p.Detail != "" {
		line += "; " + p.Detail
	}
	lines := []string{line}
	for _, c := range p.Conditions {
		lines = append(lines, fmt.Sprintf("  %s %s %s ago: %s", e.Job.Kind, c.Type, since(now, c.Time.Time), strings.TrimSpace(c.Reason+" "+c.Message)))
	}
	return lines
}

func since(now, t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return duration.HumanDuration(now.Sub(t))
}

// clusterLines say, for each cluster of the GlobalQueue, what keeps it from taking the job.
func (e *Explanation) clusterLines(now time.Time) []string {
	width := 0
	for _, v := range e.Clusters {
		width = max(width, len(v.Name))
	}
	var lines []string
	for _, v := range e.Clusters {
		verdict := v.text(now)
		lines = append(lines, fmt.Sprintf("  %-*s  %s", width, v.Name, verdict[0]))
		for _, more := range verdict[1:] {
			lines = append(lines, fmt.Sprintf("  %-*s  %s", width, "", more))
		}
	}
	return lines
}

// text is the verdict, then what is known of the cluster's capacity.
func (v *ClusterVerdict) text(now time.Time) []string {
	var first string
	switch v.Verdict {
	case VerdictRejected:
		return []string{fmt.Sprintf("rejected by its agent %s ago: %s: %s", since(now, v.Since.Time), v.Reason, v.Message)}
	case VerdictNoSuchCluster:
		return []string{"no WorkerCluster of that name"}
	case VerdictNotConnected:
		return []string{"unavailable: not connected" + conditionDetail(v.Reason, v.Message)}
	case VerdictAgentNotReady:
		return []string{"unavailable: its agent is not ready" + conditionDetail(v.Reason, v.Message)}
	case VerdictFenced, VerdictCordoned:
		return []string{"unavailable: " + strings.ToLower(v.Verdict)}
	case VerdictNeverFitsQuota, VerdictBlockedByQuota:
		first = v.quotaText()
	case VerdictHasCopy:
		first = fmt.Sprintf("has a copy of epoch %d; its agent says %s", v.Epoch, v.Agent)
		if v.Agent == "" {
			first = fmt.Sprintf("has a copy of epoch %d, holding quota; its agent has not decided yet", v.Epoch)
		}
	case VerdictBlockedByCapacity:
		first = "blocked by capacity: quota allows it, but the last capacity report has no room"
	default:
		first = "quota and the last capacity report leave room: it can be nominated on its turn"
	}
	out := []string{first}
	if v.Capacity != nil {
		out = append(out, v.Capacity.text())
	}
	if p := v.Placement.text(); p != "" {
		out = append(out, p)
	}
	return out
}

// text says what the cluster's price and labels offer the job; empty when nothing is known.
func (p *PlacementCheck) text() string {
	if p == nil {
		return ""
	}
	var parts []string
	if p.PerHour != nil {
		parts = append(parts, fmt.Sprintf("costs %.2f an hour", *p.PerHour))
	}
	if p.DataTermsMatched != nil {
		parts = append(parts, fmt.Sprintf("carries %d of the labels of its data", *p.DataTermsMatched))
	}
	if len(parts) == 0 {
		return "placement: it prices none of the GPUs the job would get"
	}
	return "placement: " + strings.Join(parts, "; ")
}

func conditionDetail(reason, message string) string {
	switch {
	case reason == "":
		return " (the hub has not said yet)"
	case message == "":
		return " (" + reason + ")"
	}
	return fmt.Sprintf(" (%s: %s)", reason, message)
}

func (v *ClusterVerdict) quotaText() string {
	q := v.Quota
	text := fmt.Sprintf("blocked by quota: needs %s %s, %s left of %s (%s used, %s reserved)", q.Resource, q.Needs.String(),
		q.Left.String(), q.Quota.String(), q.Used.String(), q.Reserved.String())
	if v.Verdict == VerdictNeverFitsQuota {
		text = fmt.Sprintf("can never fit its quota: needs %s %s, quota is %s", q.Resource, q.Needs.String(), q.Quota.String())
	}
	if v.Cohort != "" {
		// Beyond its own quota it may still borrow; how much its cohort lends now only the dispatcher knows.
		text += "; beyond its quota it runs only on what cohort " + v.Cohort + " lends here"
	}
	return text
}

func (c *CapacityCheck) text() string {
	if !c.ReportsGPUs {
		return "capacity: its agent reports no GPU products"
	}
	var parts []string
	for _, g := range c.Products {
		parts = append(parts, fmt.Sprintf("%s %d free of %d, at most %d on one node", g.Product, g.Free, g.Allocatable, g.LargestFreeOnNode))
	}
	if len(parts) == 0 {
		parts = append(parts, "none of the GPU products it accepts")
	}
	return fmt.Sprintf("capacity: needs %d %s, %d on one node; reported %s", c.GPUs, gantry.GPUResource, c.GPUsPerPod, strings.Join(parts, "; "))
}

// historyLines tell the dispatch so far: the current epoch and its copies, evictions, rejections once
// it no longer waits (while it waits the clusters say them), the winner and its Job.
func (e *Explanation) historyLines(now time.Time) []string {
	h := e.Dispatch
	var lines []string
	if h.Epoch > 0 {
		line := fmt.Sprintf("  Dispatch epoch %d", h.Epoch)
		if len(h.Nominated) > 0 {
			line += ": copies on " + strings.Join(h.Nominated, ", ")
		}
		lines = append(lines, line)
	}
	for _, ev := range h.Evictions {
		lines = append(lines, fmt.Sprintf("  Evicted from %s (epoch %d) %s ago: %s: %s", ev.Cluster, ev.Epoch,
			since(now, ev.Time.Time), ev.Reason, ev.Message))
	}
	if e.State.State != StatePending {
		for _, r := range h.Rejections {
			lines = append(lines, fmt.Sprintf("  Rejected by %s %s ago: %s: %s", r.Cluster, since(now, r.Time.Time), r.Reason, r.Message))
		}
	}
	w := h.Winner
	if w == nil {
		return lines
	}
	lines = append(lines, "  "+w.text(now))
	if w.JobCreated != nil {
		lines = append(lines, fmt.Sprintf("  %s created on %s %s ago", e.Job.Kind, w.Cluster, since(now, w.JobCreated.Time)))
	}
	return lines
}

func (w *Winner) text(now time.Time) string {
	line := fmt.Sprintf("Won by %s in epoch %d", w.Cluster, w.Epoch)
	if w.Admitted != nil {
		line += fmt.Sprintf(", %s ago", since(now, w.Admitted.Time))
	}
	if w.GPUProduct != "" {
		line += "; GPU product " + w.GPUProduct
	}
	if w.TopologyDomain != "" {
		line += "; topology domain " + w.TopologyDomain
	}
	if w.PodGroup != "" {
		line += "; its scheduler binds the gang whole (PodGroup " + w.PodGroup + ")"
	}
	if w.GlobalQueue != "" {
		line += "; quota of GlobalQueue " + w.GlobalQueue
	}
	return line
}

// noWorkloadLines tell about a job the hub made no Workload for.
func (e *Explanation) noWorkloadLines(now time.Time) []string {
	j := e.Job
	lines := []string{fmt.Sprintf("%s %s/%s has no Workload on the hub.", j.Kind, j.Namespace, j.Name)}
	switch e.NoWorkload.Why {
	case NoWorkloadNotQueued:
		return append(lines, "  It has no "+gantry.QueueLabel+" label, so Gantry does not dispatch it.")
	case NoWorkloadEventsUnreadable:
		return append(lines, "  Its events are not shown here: kubectl describe "+jobkind.Ref(gantry.JobKind(j.Kind))+" "+j.Name+" -n "+j.Namespace+
			" shows whether the hub refused it (InvalidJob) and why.")
	case NoWorkloadNotTakenUp:
		return append(lines, fmt.Sprintf("  Submitted %s ago to queue %s; the hub has not taken it up yet (is gantry-hub running?).",
			since(now, e.Submitted.Time), e.Queue.Name))
	}
	lines = append(lines, "  The hub refused it:")
	for _, w := range e.NoWorkload.Warnings {
		lines = append(lines, fmt.Sprintf("    %s ago: %s: %s", since(now, w.Time.Time), w.Reason, w.Message))
	}
	return lines
}
