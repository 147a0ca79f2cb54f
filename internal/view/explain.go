package view

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/jobkind"
)

// Facts are what kubectl gantry explain read from the hub about one job. What the reader may not read
// is nil and named in Unreadable.
type Facts struct {
	Workload *gantry.Workload
	// Job is the hub's job the Workload stands for, of its kind, with the status the hub mirrors back
	// from its cluster.
	Job client.Object
	// Successor is the job of the Workload's kind and name on the hub when it is another than the one
	// the Workload stands for: submitted again under the name while the earlier one's Workload goes.
	Successor client.Object
	// Queue is nil when it does not exist; GlobalQueue when it does not exist or cannot be read.
	Queue       *gantry.Queue
	GlobalQueue *gantry.GlobalQueue
	// Clusters are the WorkerClusters by name; nil when they cannot be read.
	Clusters map[string]*gantry.WorkerCluster
	Position Position
	// Unreadable names the kinds the reader may not read ("WorkerClusters").
	Unreadable []string
	Now        time.Time
}

// Explain tells a job's story in plain words: what it asks for, where it stands and why, per cluster of
// its GlobalQueue, what happened to it so far and where it runs.
func Explain(f Facts) []string {
	lines := header(f)
	lines = append(lines, "")
	lines = append(lines, stateLines(f)...)
	if state, _ := StateOf(f.Workload); state == StatePending && f.GlobalQueue != nil {
		lines = append(lines, "")
		lines = append(lines, clusterLines(f)...)
	}
	if h := historyLines(f); len(h) > 0 {
		lines = append(lines, "", "History:")
		lines = append(lines, h...)
	}
	if len(f.Unreadable) > 0 {
		lines = append(lines, "", "Left out: you may not read "+strings.Join(f.Unreadable, ", ")+" on the hub.")
	}
	return lines
}

func header(f Facts) []string {
	wl := f.Workload
	lines := []string{fmt.Sprintf("%s %s/%s (Workload %s)", jobkind.Of(wl).Name(), wl.Namespace, JobOrWorkloadName(wl), wl.Name)}
	if f.Successor != nil {
		lines = append(lines, fmt.Sprintf("  Note:      this is the story of an earlier %s of this name; the one on the hub now was submitted %s ago "+
			"and gets its own Workload once this one is gone", jobkind.Of(wl).Name(), since(f.Now, f.Successor.GetCreationTimestamp().Time)))
	}
	queue := fmt.Sprintf("  Queue:     %s", wl.Spec.QueueName)
	switch {
	case f.Queue == nil && slices.Contains(f.Unreadable, "Queues"):
		queue += " (you may not read Queues)"
	case f.Queue == nil:
		queue += " (no such Queue in namespace " + wl.Namespace + ")"
	case f.GlobalQueue == nil && slices.Contains(f.Unreadable, "GlobalQueues"):
		queue += ", GlobalQueue " + f.Queue.Spec.GlobalQueue
	case f.GlobalQueue == nil:
		queue += ", GlobalQueue " + f.Queue.Spec.GlobalQueue + " (not found)"
	default:
		queue += ", GlobalQueue " + f.GlobalQueue.Name
	}
	lines = append(lines, queue, "  Demand:    "+demandOf(&wl.Spec))
	if gpu := dispatch.GPUDemandOf(&wl.Spec); len(gpu.Products) > 0 {
		lines = append(lines, "  GPUs:      "+strings.Join(gpu.Products, " or ")+" (in that order)")
	}
	if wl.Spec.TopologyKey != "" {
		lines = append(lines, "  Topology:  all pods on nodes sharing one "+wl.Spec.TopologyKey)
	}
	lines = append(lines, fmt.Sprintf("  Priority:  %d; submitted %s ago", wl.Spec.Priority, since(f.Now, wl.CreationTimestamp.Time)))
	return lines
}

// demandOf says what each pod set asks for and the total.
func demandOf(spec *gantry.WorkloadSpec) string {
	var sets []string
	for _, ps := range spec.PodSets {
		sets = append(sets, fmt.Sprintf("%s: %d × {%s}", ps.Name, ps.Count, resources(ps.Requests)))
	}
	return strings.Join(sets, "; ") + "; in all " + resources(totalOf(spec))
}

// totalOf sums the requests of all pods, each resource in the format its pods asked in (1Gi stays binary).
func totalOf(spec *gantry.WorkloadSpec) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, ps := range spec.PodSets {
		for name, q := range ps.Requests {
			sum := q.DeepCopy()
			sum.Mul(int64(ps.Count))
			if prev, ok := total[name]; ok {
				sum.Add(prev)
			}
			total[name] = sum
		}
	}
	return total
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

func stateLines(f Facts) []string {
	wl := f.Workload
	state, reason := StateOf(wl)
	switch state {
	case StatePending:
		return pendingLines(f, reason)
	case StateFinished:
		c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadFinished)
		lines := []string{fmt.Sprintf("State: Finished (%s) %s ago: %s", c.Reason, since(f.Now, c.LastTransitionTime.Time), c.Message)}
		return append(lines, jobStatusLines(f)...)
	case StateDeleting:
		c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadDeleting)
		if c == nil {
			return []string{"State: Deleting"}
		}
		return []string{fmt.Sprintf("State: Deleting (%s): %s", c.Reason, c.Message)}
	}
	lines := []string{fmt.Sprintf("State: %s on %s", state, wl.Status.Winner())}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadClusterReachable); c != nil && c.Status == "False" {
		lines = append(lines, "  The hub cannot reach it: "+c.Message)
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadJobCreated); c != nil && c.Status == "False" && c.Reason == gantry.ReasonWorkerRefusing {
		lines = append(lines, fmt.Sprintf("  Its Job is not created there (%s, for %s): %s", c.Reason, since(f.Now, c.LastTransitionTime.Time), c.Message))
	}
	return append(lines, jobStatusLines(f)...)
}

// pendingAdvice says what a person can do about the reasons that are theirs to fix.
var pendingAdvice = map[string]string{
	gantry.ReasonQueueNotFound:        "create the Queue in this namespace, or fix the job's label " + gantry.QueueLabel,
	gantry.ReasonGlobalQueueNotFound:  "the Queue names a GlobalQueue that does not exist: create it, or point the Queue at another",
	gantry.ReasonNamespaceNotSelected: "the GlobalQueue's namespaceSelector does not select this namespace",
	gantry.ReasonNoClusterCanHold:     "no cluster of the GlobalQueue can ever hold the job: ask for less, or for more quota",
	gantry.ReasonInvalidJob:           "fix the job: the message says what is wrong",
}

func pendingLines(f Facts, reason string) []string {
	c := apimeta.FindStatusCondition(f.Workload.Status.Conditions, gantry.WorkloadPending)
	if c == nil {
		return []string{"State: Pending: not looked at by the hub yet"}
	}
	lines := []string{fmt.Sprintf("State: Pending (%s) for %s", reason, since(f.Now, c.LastTransitionTime.Time)),
		"  " + c.Message}
	if advice, ok := pendingAdvice[reason]; ok {
		lines = append(lines, "  To do: "+advice+".")
	}
	if f.Position.Of > 0 {
		lines = append(lines, fmt.Sprintf("  Position %d of %d pending in GlobalQueue %s (higher priority first, then older first).",
			f.Position.Index, f.Position.Of, f.Position.GlobalQueue))
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
func clusterLines(f Facts) []string {
	wl := f.Workload
	gq := f.GlobalQueue
	lines := []string{"Clusters of GlobalQueue " + gq.Name + ":"}
	usage := map[string]gantry.ClusterUsage{}
	for _, u := range gq.Status.Usage {
		usage[u.Name] = u
	}
	words := dispatch.AgentWords(pendingMessage(wl), wl.Status.Nominated())
	width := 0
	for _, c := range gq.Spec.Clusters {
		width = max(width, len(c.Name))
	}
	for _, c := range gq.Spec.Clusters {
		verdict := clusterVerdict(f, c, usage[c.Name], words)
		lines = append(lines, fmt.Sprintf("  %-*s  %s", width, c.Name, verdict[0]))
		for _, more := range verdict[1:] {
			lines = append(lines, fmt.Sprintf("  %-*s  %s", width, "", more))
		}
	}
	return lines
}

func pendingMessage(wl *gantry.Workload) string {
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending); c != nil {
		return c.Message
	}
	return ""
}

// clusterVerdict is the first thing that keeps one cluster from the job, then what is known of its
// capacity and its agent. The tests are the dispatcher's, in its order.
func clusterVerdict(f Facts, cq gantry.ClusterQuota, u gantry.ClusterUsage, words map[string]string) []string {
	wl := f.Workload
	if r := rejection(wl, cq.Name); r != nil {
		return []string{fmt.Sprintf("rejected by its agent %s ago: %s: %s", since(f.Now, r.Time.Time), r.Reason, r.Message)}
	}
	if f.Clusters != nil && f.Clusters[cq.Name] == nil {
		return []string{"no WorkerCluster of that name"}
	}
	var wc *gantry.WorkerCluster
	if f.Clusters != nil {
		wc = f.Clusters[cq.Name]
	}
	if why := unavailable(wc); why != "" {
		return []string{"unavailable: " + why}
	}
	nominated := slices.Contains(wl.Status.Nominated(), cq.Name)
	var out []string
	if !nominated {
		if why := quotaBlocks(wl, cq.Quota, u); why != "" && f.GlobalQueue != nil && f.GlobalQueue.Spec.Cohort != "" {
			// Beyond its own quota it may still borrow; how much its cohort lends now only the dispatcher knows.
			return []string{why + "; beyond its quota it runs only on what cohort " + f.GlobalQueue.Spec.Cohort + " lends here"}
		} else if why != "" {
			return []string{why}
		}
	}
	capacity, fits := capacityOf(wl, wc)
	switch {
	case nominated && words[cq.Name] != "":
		out = append(out, fmt.Sprintf("has a copy of epoch %d; its agent says %s", wl.Status.DispatchEpoch, words[cq.Name]))
	case nominated:
		out = append(out, fmt.Sprintf("has a copy of epoch %d, holding quota; its agent has not decided yet", wl.Status.DispatchEpoch))
	case !fits:
		out = append(out, "blocked by capacity: quota allows it, but the last capacity report has no room")
	default:
		out = append(out, "quota and the last capacity report leave room: it can be nominated on its turn")
	}
	if capacity != "" {
		out = append(out, capacity)
	}
	return out
}

func rejection(wl *gantry.Workload, cluster string) *gantry.RejectedCluster {
	for i := range wl.Status.RejectedClusters {
		if wl.Status.RejectedClusters[i].Name == cluster {
			return &wl.Status.RejectedClusters[i]
		}
	}
	return nil
}

// unavailable says why no copy may go to the cluster now; empty when one may (or nothing is known).
func unavailable(wc *gantry.WorkerCluster) string {
	if wc == nil {
		return ""
	}
	if c := apimeta.FindStatusCondition(wc.Status.Conditions, gantry.ClusterConnected); c == nil || c.Status != metav1.ConditionTrue {
		return "not connected" + conditionDetail(c)
	}
	if c := apimeta.FindStatusCondition(wc.Status.Conditions, gantry.ClusterAgentReady); c == nil || c.Status != metav1.ConditionTrue {
		return "its agent is not ready" + conditionDetail(c)
	}
	switch {
	case wc.Spec.Fenced:
		return "fenced"
	case wc.Spec.Cordoned:
		return "cordoned"
	}
	return ""
}

func conditionDetail(c *metav1.Condition) string {
	if c == nil {
		return " (the hub has not said yet)"
	}
	if c.Message == "" {
		return " (" + c.Reason + ")"
	}
	return fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
}

// quotaBlocks names the first resource (in name order) whose quota on the cluster the job does not fit,
// ever or now, with the numbers; empty when it fits.
func quotaBlocks(wl *gantry.Workload, quota corev1.ResourceList, u gantry.ClusterUsage) string {
	need := dispatch.RequestsOf(&wl.Spec)
	names := make([]string, 0, len(need))
	for n := range need {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		rn := corev1.ResourceName(n)
		limit, limited := quota[rn]
		if !limited || need[rn] == 0 {
			continue
		}
		used, reserved := u.Admitted[rn], u.Reserved[rn]
		needQ := resource.NewMilliQuantity(need[rn], resource.DecimalSI)
		if need[rn] > limit.MilliValue() {
			return fmt.Sprintf("can never fit its quota: needs %s %s, quota is %s", n, needQ, limit.String())
		}
		if left := limit.MilliValue() - used.MilliValue() - reserved.MilliValue(); need[rn] > left {
			return fmt.Sprintf("blocked by quota: needs %s %s, %s left of %s (%s used, %s reserved)", n, needQ,
				resource.NewMilliQuantity(max(left, 0), resource.DecimalSI), limit.String(), used.String(), reserved.String())
		}
	}
	return ""
}

// capacityOf says what the cluster's agent last reported of the GPU products the job accepts, and whether
// that leaves room for it as the dispatcher judges.
func capacityOf(wl *gantry.Workload, wc *gantry.WorkerCluster) (string, bool) {
	gpu := dispatch.GPUDemandOf(&wl.Spec)
	if wc == nil || gpu.PerPod == 0 {
		return "", true
	}
	cluster := dispatch.Cluster{GPUs: dispatch.GPUCapacityOf(wc.Status.Capacity)}
	if cluster.GPUs == nil {
		return "capacity: its agent reports no GPU products", true
	}
	var parts []string
	for _, g := range cluster.GPUs {
		if len(gpu.Products) == 0 || slices.Contains(gpu.Products, g.Product) {
			parts = append(parts, fmt.Sprintf("%s %d free of %d, at most %d on one node", g.Product, g.Free, g.Allocatable, g.LargestFreeOnNode))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "none of the GPU products it accepts")
	}
	text := fmt.Sprintf("capacity: needs %d %s, %d on one node; reported %s", gpu.Total, gantry.GPUResource, gpu.PerPod, strings.Join(parts, "; "))
	return text, cluster.MayFitNow(gpu)
}

// historyLines tell the dispatch so far: the current epoch and its copies, evictions, rejections, the
// winner and its Job.
func historyLines(f Facts) []string {
	wl := f.Workload
	st := wl.Status
	var lines []string
	if st.DispatchEpoch > 0 {
		line := fmt.Sprintf("  Dispatch epoch %d", st.DispatchEpoch)
		if nominated := st.Nominated(); len(nominated) > 0 {
			line += ": copies on " + strings.Join(nominated, ", ")
		}
		lines = append(lines, line)
	}
	for _, e := range st.Evictions {
		lines = append(lines, fmt.Sprintf("  Evicted from %s (epoch %d) %s ago: %s: %s", e.Cluster, e.Epoch,
			since(f.Now, e.Time.Time), e.Reason, e.Message))
	}
	if state, _ := StateOf(wl); state != StatePending {
		for _, r := range st.RejectedClusters {
			lines = append(lines, fmt.Sprintf("  Rejected by %s %s ago: %s: %s", r.Name, since(f.Now, r.Time.Time), r.Reason, r.Message))
		}
	}
	if st.Winner() == "" {
		return lines
	}
	lines = append(lines, "  "+winnerLine(f))
	if c := apimeta.FindStatusCondition(st.Conditions, gantry.WorkloadJobCreated); c != nil && c.Status == metav1.ConditionTrue {
		lines = append(lines, fmt.Sprintf("  %s created on %s %s ago", jobkind.Of(wl).Name(), st.ClusterName, since(f.Now, c.LastTransitionTime.Time)))
	}
	return lines
}

func winnerLine(f Facts) string {
	st := f.Workload.Status
	line := fmt.Sprintf("Won by %s in epoch %d", st.ClusterName, st.DispatchEpoch)
	if c := apimeta.FindStatusCondition(st.Conditions, gantry.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionTrue {
		line += fmt.Sprintf(", %s ago", since(f.Now, c.LastTransitionTime.Time))
	}
	if p := gpuProductOf(f.Workload); p != "" {
		line += "; GPU product " + p
	}
	if st.Admission != nil && st.Admission.TopologyDomain != "" {
		line += "; topology domain " + st.Admission.TopologyDomain
	}
	if st.Admission != nil && st.Admission.PodGroup != "" {
		line += "; its scheduler binds the gang whole (PodGroup " + st.Admission.PodGroup + ")"
	}
	if st.GlobalQueue != "" {
		line += "; quota of GlobalQueue " + st.GlobalQueue
	}
	return line
}

// ExplainWithoutWorkload tells about a job of kind k the hub made no Workload for: one not submitted to
// a queue, one not seen yet, or one refused, with the warnings recorded on it. Without eventsRead (the
// reader may not read events) it says where to look instead of guessing.
func ExplainWithoutWorkload(k jobkind.Kind, job client.Object, events []eventsv1.Event, eventsRead bool, now time.Time) []string {
	ns, name, queue := job.GetNamespace(), job.GetName(), job.GetLabels()[gantry.QueueLabel]
	lines := []string{fmt.Sprintf("%s %s/%s has no Workload on the hub.", k.Name(), ns, name)}
	if _, ok := job.GetLabels()[gantry.QueueLabel]; !ok {
		return append(lines, "  It has no "+gantry.QueueLabel+" label, so Gantry does not dispatch it.")
	}
	if !eventsRead {
		return append(lines, "  Its events are not shown here: kubectl describe "+KindRef(k)+" "+name+" -n "+ns+
			" shows whether the hub refused it (InvalidJob) and why.")
	}
	var warnings []string
	for _, e := range events {
		if e.Regarding.Kind == k.GroupVersionKind().Kind && e.Regarding.Name == name && e.Type == corev1.EventTypeWarning {
			warnings = append(warnings, fmt.Sprintf("    %s ago: %s: %s", since(now, eventTime(&e)), e.Reason, e.Note))
		}
	}
	if len(warnings) == 0 {
		return append(lines, fmt.Sprintf("  Submitted %s ago to queue %s; the hub has not taken it up yet (is gantry-hub running?).",
			since(now, job.GetCreationTimestamp().Time), queue))
	}
	lines = append(lines, "  The hub refused it:")
	return append(lines, warnings...)
}

func eventTime(e *eventsv1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	}
	return e.DeprecatedLastTimestamp.Time
}
