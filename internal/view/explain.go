package view

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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

// Explain tells a job's story: what it asks for, where it stands and why, per cluster of its
// GlobalQueue, what happened to it so far and where it runs.
func Explain(f Facts) Explanation {
	wl := f.Workload
	kind := jobkind.Of(wl)
	e := Explanation{APIVersion: ExplanationAPIVersion, Kind: ExplanationKind,
		Job:      jobIdentity(kind, wl.Namespace, JobOrWorkloadName(wl)),
		Workload: wl.Name, Queue: explainedQueue(f), Submitted: wl.CreationTimestamp,
		Priority: ptr.To(wl.Spec.Priority), Demand: demandOf(&wl.Spec),
		State: jobState(f), JobStatus: jobProgress(f.Job), Dispatch: dispatchHistory(wl),
		Unreadable: f.Unreadable}
	if f.Successor != nil {
		e.Resubmitted = ptr.To(f.Successor.GetCreationTimestamp())
	}
	if e.State.State == StatePending && f.GlobalQueue != nil && !e.State.Stopped {
		e.Clusters = clusterVerdicts(f)
	}
	return e
}

func jobIdentity(k jobkind.Kind, ns, name string) JobIdentity {
	return JobIdentity{APIVersion: k.GroupVersionKind().GroupVersion().String(), Kind: string(k.Name()), Namespace: ns, Name: name}
}

// explainedQueue names the Queue and the GlobalQueue, and says which exist as far as the reader may
// know.
func explainedQueue(f Facts) ExplainedQueue {
	q := ExplainedQueue{Name: f.Workload.Spec.QueueName}
	if f.Queue == nil {
		if !slices.Contains(f.Unreadable, "Queues") {
			q.Exists = ptr.To(false)
		}
		return q
	}
	q.Exists = ptr.To(true)
	switch {
	case f.GlobalQueue != nil:
		q.GlobalQueue, q.GlobalQueueExists = f.GlobalQueue.Name, ptr.To(true)
		for _, sc := range f.GlobalQueue.Spec.Dispatch.Scores {
			q.Scores = append(q.Scores, fmt.Sprintf("%s×%d", sc.Name, max(sc.Weight, 1)))
		}
	case slices.Contains(f.Unreadable, "GlobalQueues"):
		q.GlobalQueue = f.Queue.Spec.GlobalQueue
	default:
		q.GlobalQueue, q.GlobalQueueExists = f.Queue.Spec.GlobalQueue, ptr.To(false)
	}
	return q
}

func demandOf(spec *gantry.WorkloadSpec) *Demand {
	d := &Demand{Total: totalOf(spec), GPUProducts: dispatch.GPUDemandOf(spec).Products, TopologyKey: spec.TopologyKey}
	for _, t := range spec.DataLocation {
		d.DataLocation = append(d.DataLocation, t.Key+"="+t.Value)
	}
	for _, ps := range spec.PodSets {
		d.PodSets = append(d.PodSets, PodSetDemand{Name: ps.Name, Count: ps.Count, Requests: ps.Requests})
	}
	return d
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

// pendingAdvice says what a person can do about the reasons that are theirs to fix.
var pendingAdvice = map[string]string{
	gantry.ReasonQueueNotFound:        "create the Queue in this namespace, or fix the job's label " + gantry.QueueLabel,
	gantry.ReasonGlobalQueueNotFound:  "the Queue names a GlobalQueue that does not exist: create it, or point the Queue at another",
	gantry.ReasonNamespaceNotSelected: "the GlobalQueue's namespaceSelector does not select this namespace",
	gantry.ReasonNoClusterCanHold:     "no cluster of the GlobalQueue can ever hold the job: ask for less, or for more quota",
	gantry.ReasonInvalidJob:           "fix the job: the message says what is wrong",
}

// resumeAdvice says how to resume a stopped job.
func resumeAdvice(wl *gantry.Workload) string {
	return fmt.Sprintf("its owner stopped it (annotation %s); resume it with kubectl gantry resume %s/%s -n %s, and it takes its place in its queue again",
		gantry.StoppedAnnotation, KindRef(jobkind.Of(wl)), JobOrWorkloadName(wl), wl.Namespace)
}

func jobState(f Facts) *JobState {
	wl := f.Workload
	state, reason := StateOf(wl)
	s := &JobState{State: state, Stopped: wl.Spec.Stopped && state != StateFinished && state != StateDeleting}
	if reason != "-" {
		s.Reason = reason
	}
	switch state {
	case StatePending:
		c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending)
		if c == nil {
			return s
		}
		s.Message, s.Since, s.Advice = c.Message, ptr.To(c.LastTransitionTime), pendingAdvice[reason]
		if wl.Spec.Stopped && c.Reason != gantry.ReasonStopped {
			// The dispatcher has not said so yet: the owner's word is the truth.
			s.Message = dispatch.StoppedMessage(string(wl.Spec.JobKind), wl.Namespace+"/"+wl.Name)
		}
		if wl.Spec.Stopped {
			s.Advice = resumeAdvice(wl)
		}
		if f.Position.Of > 0 {
			s.Position = ptr.To(f.Position)
		}
	case StateFinished, StateDeleting:
		typ := map[string]string{StateFinished: gantry.WorkloadFinished, StateDeleting: gantry.WorkloadDeleting}[state]
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, typ); c != nil {
			s.Reason, s.Message, s.Since = c.Reason, c.Message, ptr.To(c.LastTransitionTime)
		}
	default:
		s.Cluster = wl.Status.Winner()
		if wl.Spec.Stopped {
			s.Message = fmt.Sprintf("its owner stopped it: its Job on %s is deleted, pods first, then it waits until it is resumed", s.Cluster)
			s.Advice = resumeAdvice(wl)
		}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadClusterReachable); c != nil && c.Status == "False" {
			s.Unreachable = c.Message
		}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadJobCreated); c != nil && c.Status == "False" && c.Reason == gantry.ReasonWorkerRefusing {
			s.JobNotCreated = &Note{Reason: c.Reason, Message: c.Message, Time: c.LastTransitionTime}
		}
	}
	return s
}

// clusterVerdicts judge each cluster of the GlobalQueue, in its order.
func clusterVerdicts(f Facts) []ClusterVerdict {
	wl := f.Workload
	usage := map[string]gantry.ClusterUsage{}
	for _, u := range f.GlobalQueue.Status.Usage {
		usage[u.Name] = u
	}
	words := dispatch.AgentWords(pendingMessage(wl), wl.Status.Nominated())
	out := make([]ClusterVerdict, 0, len(f.GlobalQueue.Spec.Clusters))
	for _, c := range f.GlobalQueue.Spec.Clusters {
		out = append(out, clusterVerdict(f, c, usage[c.Name], words))
	}
	return out
}

func pendingMessage(wl *gantry.Workload) string {
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending); c != nil {
		return c.Message
	}
	return ""
}

// clusterVerdict is the first thing that keeps one cluster from the job, then what is known of its
// capacity and its agent. The tests are the dispatcher's, in its order.
func clusterVerdict(f Facts, cq gantry.ClusterQuota, u gantry.ClusterUsage, words map[string]string) ClusterVerdict {
	wl := f.Workload
	v := ClusterVerdict{Name: cq.Name}
	if r := rejection(wl, cq.Name); r != nil {
		v.Verdict, v.Reason, v.Message, v.Since = VerdictRejected, r.Reason, r.Message, ptr.To(r.Time)
		return v
	}
	if f.Clusters != nil && f.Clusters[cq.Name] == nil {
		v.Verdict = VerdictNoSuchCluster
		return v
	}
	wc := f.Clusters[cq.Name]
	if unavailable(wc, &v) {
		return v
	}
	v.Placement = placementOf(wl, wc)
	nominated := slices.Contains(wl.Status.Nominated(), cq.Name)
	if !nominated {
		if check, never := quotaBlocks(wl, cq.Quota, u); check != nil {
			v.Verdict, v.Quota = VerdictBlockedByQuota, check
			if never {
				v.Verdict = VerdictNeverFitsQuota
			}
			if f.GlobalQueue.Spec.Cohort != "" {
				v.Cohort = f.GlobalQueue.Spec.Cohort
			}
			return v
		}
	}
	v.Capacity = capacityOf(wl, wc)
	switch {
	case nominated:
		v.Verdict, v.Epoch, v.Agent = VerdictHasCopy, wl.Status.DispatchEpoch, words[cq.Name]
	case v.Capacity != nil && !v.Capacity.Room:
		v.Verdict = VerdictBlockedByCapacity
	default:
		v.Verdict = VerdictRoom
	}
	return v
}

// placementOf is what the placement scores read of the cluster for the job, with the dispatcher's own
// functions; nil when the cluster sets no price and the job names no data location.
func placementOf(wl *gantry.Workload, wc *gantry.WorkerCluster) *PlacementCheck {
	if wc == nil || (wc.Spec.Price == nil && len(wl.Spec.DataLocation) == 0) {
		return nil
	}
	c := dispatch.Cluster{GPUs: dispatch.GPUCapacityOf(wc.Status.Capacity), Price: dispatch.PriceOf(wc.Spec.Price), Labels: wc.Labels}
	w := &dispatch.Workload{Requests: dispatch.RequestsOf(&wl.Spec), GPU: dispatch.GPUDemandOf(&wl.Spec), DataLocation: wl.Spec.DataLocation}
	p := &PlacementCheck{}
	if cost := c.PerHour(w); !math.IsNaN(cost) {
		p.PerHour = ptr.To(math.Round(cost*1e4) / 1e4)
	}
	if len(w.DataLocation) > 0 {
		p.DataTermsMatched = ptr.To(c.MatchedTerms(w.DataLocation))
	}
	return p
}

func rejection(wl *gantry.Workload, cluster string) *gantry.RejectedCluster {
	for i := range wl.Status.RejectedClusters {
		if wl.Status.RejectedClusters[i].Name == cluster {
			return &wl.Status.RejectedClusters[i]
		}
	}
	return nil
}

// unavailable says, in v, why no copy may go to the cluster now; false when one may (or nothing is
// known).
func unavailable(wc *gantry.WorkerCluster, v *ClusterVerdict) bool {
	if wc == nil {
		return false
	}
	notTrue := func(verdict, typ string) bool {
		c := apimeta.FindStatusCondition(wc.Status.Conditions, typ)
		if c != nil && c.Status == metav1.ConditionTrue {
			return false
		}
		v.Verdict = verdict
		if c != nil {
			v.Reason, v.Message = c.Reason, c.Message
		}
		return true
	}
	if notTrue(VerdictNotConnected, gantry.ClusterConnected) || notTrue(VerdictAgentNotReady, gantry.ClusterAgentReady) {
		return true
	}
	switch {
	case wc.Spec.Fenced:
		v.Verdict = VerdictFenced
	case wc.Spec.Cordoned:
		v.Verdict = VerdictCordoned
	default:
		return false
	}
	return true
}

// quotaBlocks checks the first resource (in name order) whose quota on the cluster the job does not
// fit, ever (never) or now; nil when it fits.
func quotaBlocks(wl *gantry.Workload, quota corev1.ResourceList, u gantry.ClusterUsage) (check *QuotaCheck, never bool) {
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
		left := limit.MilliValue() - used.MilliValue() - reserved.MilliValue()
		if need[rn] <= left {
			continue
		}
		return &QuotaCheck{Resource: rn, Needs: *resource.NewMilliQuantity(need[rn], resource.DecimalSI), Quota: limit,
			Used: used, Reserved: reserved, Left: *resource.NewMilliQuantity(max(left, 0), resource.DecimalSI)}, need[rn] > limit.MilliValue()
	}
	return nil, false
}

// capacityOf is what the cluster's agent last reported of the GPU products the job accepts, and whether
// that leaves room for it as the dispatcher judges; nil for a job without GPUs or a cluster not known.
func capacityOf(wl *gantry.Workload, wc *gantry.WorkerCluster) *CapacityCheck {
	gpu := dispatch.GPUDemandOf(&wl.Spec)
	if wc == nil || gpu.PerPod == 0 {
		return nil
	}
	cluster := dispatch.Cluster{GPUs: dispatch.GPUCapacityOf(wc.Status.Capacity)}
	check := &CapacityCheck{GPUs: gpu.Total, GPUsPerPod: gpu.PerPod, ReportsGPUs: cluster.GPUs != nil, Room: cluster.MayFitNow(gpu)}
	for _, g := range cluster.GPUs {
		if len(gpu.Products) == 0 || slices.Contains(gpu.Products, g.Product) {
			check.Products = append(check.Products, GPURoom{Product: g.Product, Free: g.Free, Allocatable: g.Allocatable,
				LargestFreeOnNode: g.LargestFreeOnNode})
		}
	}
	return check
}

// dispatchHistory is the dispatch so far: the current epoch and its copies, evictions, rejections, the
// winner and its Job.
func dispatchHistory(wl *gantry.Workload) *DispatchHistory {
	st := wl.Status
	h := &DispatchHistory{Epoch: st.DispatchEpoch, Nominated: st.Nominated()}
	for _, e := range st.Evictions {
		h.Evictions = append(h.Evictions, Eviction{Cluster: e.Cluster, Epoch: e.Epoch, Reason: e.Reason, Message: e.Message, Time: e.Time})
	}
	for _, r := range st.RejectedClusters {
		h.Rejections = append(h.Rejections, Rejection{Cluster: r.Name, Reason: r.Reason, Message: r.Message, Time: r.Time})
	}
	if st.Winner() == "" {
		return h
	}
	w := &Winner{Cluster: st.ClusterName, Epoch: st.DispatchEpoch, GPUProduct: gpuProductOf(wl), GlobalQueue: st.GlobalQueue}
	if c := apimeta.FindStatusCondition(st.Conditions, gantry.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionTrue {
		w.Admitted = ptr.To(c.LastTransitionTime)
	}
	if st.Admission != nil {
		w.TopologyDomain, w.PodGroup = st.Admission.TopologyDomain, st.Admission.PodGroup
	}
	if c := apimeta.FindStatusCondition(st.Conditions, gantry.WorkloadJobCreated); c != nil && c.Status == metav1.ConditionTrue {
		w.JobCreated = ptr.To(c.LastTransitionTime)
	}
	h.Winner = w
	return h
}

// ExplainWithoutWorkload tells about a job of kind k the hub made no Workload for: one not submitted to
// a queue, one not seen yet, or one refused, with the warnings recorded on it. Without eventsRead (the
// reader may not read events) it says where to look instead of guessing.
func ExplainWithoutWorkload(k jobkind.Kind, job client.Object, events []eventsv1.Event, eventsRead bool) Explanation {
	queue, queued := job.GetLabels()[gantry.QueueLabel]
	e := Explanation{APIVersion: ExplanationAPIVersion, Kind: ExplanationKind,
		Job: jobIdentity(k, job.GetNamespace(), job.GetName()), Queue: ExplainedQueue{Name: queue},
		Submitted: job.GetCreationTimestamp(), NoWorkload: &NoWorkload{}}
	switch {
	case !queued:
		e.NoWorkload.Why = NoWorkloadNotQueued
		return e
	case !eventsRead:
		e.NoWorkload.Why = NoWorkloadEventsUnreadable
		return e
	}
	for _, ev := range events {
		if ev.Regarding.Kind == k.GroupVersionKind().Kind && ev.Regarding.Name == job.GetName() && ev.Type == corev1.EventTypeWarning {
			e.NoWorkload.Warnings = append(e.NoWorkload.Warnings, Note{Reason: ev.Reason, Message: ev.Note, Time: metav1.NewTime(eventTime(&ev))})
		}
	}
	e.NoWorkload.Why = NoWorkloadNotTakenUp
	if len(e.NoWorkload.Warnings) > 0 {
		e.NoWorkload.Why = NoWorkloadRefused
	}
	return e
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
