// Package hubtest builds the hub's API objects that tests need, so that a test reads as the scenario it
// checks:
//
//	hubtest.MakeWorkload("train", "team-a").Queue("q").PodSet("main", 2, "nvidia.com/gpu", "4").
//		Nominated("gpus", 1, "w1", "w2").AdmittedOn("w1").Obj()
//	hubtest.MakeCopyOf(wl, 1).Admitted().Since(t).Obj()
//	hubtest.MakeGlobalQueue("gpus").SelectAll().Cluster("w1", "nvidia.com/gpu", "8").Cohort("lab").Obj()
//	hubtest.MakeQueue("q", "team-a").GlobalQueue("gpus").Obj()
//	hubtest.MakeCohort("lab").Parent("org").Cluster("w1", "nvidia.com/gpu", "16").Obj()
//	hubtest.MakeWorkerCluster("w1").Connected().AgentReady().GPUs("A100", 2, 8, 16).Obj()
//
// A builder sets only what it is told: MakeX names the object, each method sets what it says. Times a
// builder records without being given one (when a condition changed, when a Workload was deleted) are
// T0 unless its Now says otherwise.
//
// It builds objects only, from the API's types: the tests of the hub, the dispatch packages and
// test/integration use it, and agenttest builds on it.
package hubtest

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// T0 is when the builders say things happened unless told otherwise.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Resources builds a ResourceList from name, quantity pairs: Resources("cpu", "2", "memory", "4Gi").
func Resources(kv ...string) corev1.ResourceList {
	if len(kv)%2 != 0 {
		panic(fmt.Sprintf("Resources needs name, quantity pairs, got %q", kv))
	}
	out := make(corev1.ResourceList, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// resourcesOrNil is Resources, or nil for no pairs: a quota that lists nothing is left unset.
func resourcesOrNil(kv ...string) corev1.ResourceList {
	if len(kv) == 0 {
		return nil
	}
	return Resources(kv...)
}

// WorkloadBuilder holds the setters of a Workload's metadata and spec that every builder of a Workload
// shares: the hub's (WorkloadWrapper) and those of its copies on workers (CopyWrapper, agenttest's). Each
// returns B, the builder that embeds it, so that a chain keeps that builder's own methods.
type WorkloadBuilder[B any] struct {
	gantry.Workload
	self B // the builder embedding these setters, which they return
}

// NewWorkloadBuilder starts the setters of the builder self, which embeds them, on a Workload with a name
// and namespace and nothing else.
func NewWorkloadBuilder[B any](self B, name, namespace string) WorkloadBuilder[B] {
	return WorkloadBuilder[B]{Workload: gantry.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}, self: self}
}

// Obj returns the Workload.
func (w *WorkloadBuilder[B]) Obj() *gantry.Workload { return &w.Workload }

// UID sets metadata.uid.
func (w *WorkloadBuilder[B]) UID(uid string) B {
	w.ObjectMeta.UID = types.UID(uid)
	return w.self
}

// ResourceVersion sets metadata.resourceVersion.
func (w *WorkloadBuilder[B]) ResourceVersion(rv string) B {
	w.ObjectMeta.ResourceVersion = rv
	return w.self
}

// Generation sets metadata.generation.
func (w *WorkloadBuilder[B]) Generation(g int64) B {
	w.ObjectMeta.Generation = g
	return w.self
}

// Created sets the creation timestamp.
func (w *WorkloadBuilder[B]) Created(t time.Time) B {
	w.CreationTimestamp = metav1.NewTime(t)
	return w.self
}

// Label sets a label.
func (w *WorkloadBuilder[B]) Label(k, v string) B {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w.self
}

// JobName sets the gantry.dev/job-name label: the name of the job the Workload stands for.
func (w *WorkloadBuilder[B]) JobName(name string) B {
	return w.Label(gantry.JobNameLabel, name)
}

// Finalizer adds a finalizer.
func (w *WorkloadBuilder[B]) Finalizer(f string) B {
	w.Finalizers = append(w.Finalizers, f)
	return w.self
}

// ControlledBy makes the job of the given kind its controller owner, as the hub's job controller does.
func (w *WorkloadBuilder[B]) ControlledBy(apiVersion, kind, name, uid string) B {
	controller := true
	w.OwnerReferences = append(w.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name,
		UID: types.UID(uid), Controller: &controller})
	return w.self
}

// OwnedByJob makes the batch/v1 Job name, of UID uid, its controller owner.
func (w *WorkloadBuilder[B]) OwnedByJob(name, uid string) B {
	return w.ControlledBy("batch/v1", "Job", name, uid)
}

// Queue sets spec.queueName, the Queue it was submitted to.
func (w *WorkloadBuilder[B]) Queue(name string) B {
	w.Spec.QueueName = name
	return w.self
}

// JobKind sets spec.jobKind.
func (w *WorkloadBuilder[B]) JobKind(k gantry.JobKind) B {
	w.Spec.JobKind = k
	return w.self
}

// Priority sets spec.priority.
func (w *WorkloadBuilder[B]) Priority(p int32) B {
	w.Spec.Priority = p
	return w.self
}

// JobGeneration sets spec.jobGeneration: the generation of its job the spec was built from.
func (w *WorkloadBuilder[B]) JobGeneration(g int64) B {
	w.Spec.JobGeneration = g
	return w.self
}

// AdmissionDeadline sets the job's own admission deadline.
func (w *WorkloadBuilder[B]) AdmissionDeadline(d time.Duration) B {
	w.Spec.AdmissionDeadline = &metav1.Duration{Duration: d}
	return w.self
}

// PodSet adds a pod set of count pods, each requesting the given name, quantity pairs (none: no
// requests).
func (w *WorkloadBuilder[B]) PodSet(name string, count int32, requests ...string) B {
	w.Spec.PodSets = append(w.Spec.PodSets, gantry.PodSet{Name: name, Count: count, Requests: resourcesOrNil(requests...)})
	return w.self
}

// GPUProducts sets the GPU products the last pod set accepts, in order of preference.
func (w *WorkloadBuilder[B]) GPUProducts(products ...string) B {
	w.Spec.PodSets[len(w.Spec.PodSets)-1].GPUProducts = products
	return w.self
}

// Deferred marks the last pod set as one whose pods the job's controller creates later.
func (w *WorkloadBuilder[B]) Deferred() B {
	w.Spec.PodSets[len(w.Spec.PodSets)-1].Deferred = true
	return w.self
}

// NodeSelector adds k=v to the node selector of the last pod set.
func (w *WorkloadBuilder[B]) NodeSelector(k, v string) B {
	ps := &w.Spec.PodSets[len(w.Spec.PodSets)-1]
	if ps.NodeSelector == nil {
		ps.NodeSelector = map[string]string{}
	}
	ps.NodeSelector[k] = v
	return w.self
}

// WorkloadWrapper builds a hub Workload: its metadata and spec, and the status the hub writes.
type WorkloadWrapper struct {
	WorkloadBuilder[*WorkloadWrapper]
	now metav1.Time
}

// MakeWorkload starts a Workload with a name and namespace and nothing else: no UID, Queue or pod sets.
func MakeWorkload(name, namespace string) *WorkloadWrapper {
	w := &WorkloadWrapper{now: metav1.NewTime(T0)}
	w.WorkloadBuilder = NewWorkloadBuilder(w, name, namespace)
	return w
}

// Now sets the time the methods after it record as now: when the conditions they set changed, when
// Deleting deleted the Workload, when Preempted decided. T0 until set.
func (w *WorkloadWrapper) Now(t time.Time) *WorkloadWrapper {
	w.now = metav1.NewTime(t)
	return w
}

// Nominated records a nomination to clusters in a dispatch epoch, under a GlobalQueue (empty: recorded
// before statuses named their GlobalQueue).
func (w *WorkloadWrapper) Nominated(globalQueue string, epoch int64, clusters ...string) *WorkloadWrapper {
	st := &w.Status
	st.GlobalQueue, st.DispatchEpoch, st.NominatedClusters = globalQueue, epoch, clusters
	return w
}

// Condition sets a condition of the Workload, changed now, for its current generation.
func (w *WorkloadWrapper) Condition(typ string, status metav1.ConditionStatus, reason, message string) *WorkloadWrapper {
	apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message,
		ObservedGeneration: w.ObjectMeta.Generation, LastTransitionTime: w.now})
	return w
}

// Pending sets Pending=True with a reason and message: what it waits for.
func (w *WorkloadWrapper) Pending(reason, message string) *WorkloadWrapper {
	return w.Condition(gantry.WorkloadPending, metav1.ConditionTrue, reason, message)
}

// AdmittedOn records cluster as the winner: status.clusterName, and Admitted=True (AdmittedByCluster).
func (w *WorkloadWrapper) AdmittedOn(cluster string) *WorkloadWrapper {
	w.Status.ClusterName = cluster
	return w.Condition(gantry.WorkloadAdmitted, metav1.ConditionTrue, gantry.ReasonAdmittedByCluster, "")
}

// JobCreated records the Job created on the winner: JobCreated=True (Created).
func (w *WorkloadWrapper) JobCreated() *WorkloadWrapper {
	return w.Condition(gantry.WorkloadJobCreated, metav1.ConditionTrue, gantry.ReasonJobCreated, "")
}

// Refusing records that the winner has not taken the Job since the given time, for the reason the
// message gives: JobCreated=False (WorkerRefusing).
func (w *WorkloadWrapper) Refusing(message string, since time.Time) *WorkloadWrapper {
	w.Condition(gantry.WorkloadJobCreated, metav1.ConditionFalse, gantry.ReasonWorkerRefusing, message)
	apimeta.FindStatusCondition(w.Status.Conditions, gantry.WorkloadJobCreated).LastTransitionTime = metav1.NewTime(since)
	return w
}

// Finished sets Finished=True with a reason: gantry.ReasonJobSucceeded, ReasonInadmissible, ...
func (w *WorkloadWrapper) Finished(reason string) *WorkloadWrapper {
	return w.Condition(gantry.WorkloadFinished, metav1.ConditionTrue, reason, "")
}

// Deleting marks the Workload deleted now; its finalizer gantry.WorkloadFinalizer, added unless it has
// it, holds it until its objects on workers are gone.
func (w *WorkloadWrapper) Deleting() *WorkloadWrapper {
	now := w.now
	w.DeletionTimestamp = &now
	for _, f := range w.Finalizers {
		if f == gantry.WorkloadFinalizer {
			return w
		}
	}
	return w.Finalizer(gantry.WorkloadFinalizer)
}

// RejectedBy records that cluster's agent rejected the Workload, at the given time (zero: recorded
// before rejections had times).
func (w *WorkloadWrapper) RejectedBy(cluster, reason, message string, at time.Time) *WorkloadWrapper {
	w.Status.RejectedClusters = append(w.Status.RejectedClusters,
		gantry.RejectedCluster{Name: cluster, Reason: reason, Message: message, Time: metav1.NewTime(at)})
	return w
}

// Evicted records that cluster, the winner of epoch, gave the Workload up for reason, at the given time.
func (w *WorkloadWrapper) Evicted(cluster string, epoch int64, reason string, at time.Time) *WorkloadWrapper {
	w.Status.Evictions = append(w.Status.Evictions, gantry.Eviction{Cluster: cluster, Epoch: epoch, Reason: reason, Time: metav1.NewTime(at)})
	return w
}

// Preempted records the hub's decision, now, to take the Workload back from cluster, its winner in
// epoch, to make room for preemptor (namespace/name), by the rule reason names.
func (w *WorkloadWrapper) Preempted(cluster string, epoch int64, preemptor, reason string) *WorkloadWrapper {
	w.Status.Preemption = &gantry.Preemption{Cluster: cluster, Epoch: epoch, Preemptor: preemptor, Reason: reason,
		Message: "preempted on " + cluster + " to make room for " + preemptor, Time: w.now}
	return w
}

// Stopped records that the job's owner stopped it (spec.stopped).
func (w *WorkloadWrapper) Stopped() *WorkloadWrapper {
	w.Spec.Stopped = true
	return w
}

// CopyWrapper builds the copy of a hub Workload that the hub creates on a worker: its metadata and spec,
// and the Admitted condition its agent writes.
type CopyWrapper struct {
	WorkloadBuilder[*CopyWrapper]
}

// MakeCopy starts the copy of the hub Workload name in namespace, of UID hubUID, made in a dispatch epoch:
// labelled with the Workload's UID and the epoch, as the hub labels it.
func MakeCopy(name, namespace, hubUID string, epoch int64) *CopyWrapper {
	w := &CopyWrapper{}
	w.WorkloadBuilder = NewWorkloadBuilder(w, name, namespace)
	return w.Label(gantry.WorkloadUIDLabel, hubUID).Label(gantry.DispatchEpochLabel, strconv.FormatInt(epoch, 10))
}

// MakeCopyOf starts the copy of wl made in a dispatch epoch.
func MakeCopyOf(wl *gantry.Workload, epoch int64) *CopyWrapper {
	return MakeCopy(wl.Name, wl.Namespace, string(wl.UID), epoch)
}

// Condition sets the Admitted condition its agent writes, for the copy's current generation.
func (w *CopyWrapper) Condition(status metav1.ConditionStatus, reason, message string) *CopyWrapper {
	w.Status.Conditions = []metav1.Condition{{Type: gantry.WorkloadAdmitted, Status: status, Reason: reason, Message: message,
		ObservedGeneration: w.ObjectMeta.Generation}}
	return w
}

// Admitted sets Admitted=True with reason Fits.
func (w *CopyWrapper) Admitted() *CopyWrapper {
	return w.Condition(metav1.ConditionTrue, gantry.ReasonFits, "")
}

// Since sets when the Admitted condition last changed.
func (w *CopyWrapper) Since(t time.Time) *CopyWrapper {
	for i := range w.Status.Conditions {
		w.Status.Conditions[i].LastTransitionTime = metav1.NewTime(t)
	}
	return w
}

// GlobalQueueWrapper builds a GlobalQueue.
type GlobalQueueWrapper struct{ gantry.GlobalQueue }

// MakeGlobalQueue starts a GlobalQueue with a name and nothing else: no namespace selector (it selects
// no namespace) and no clusters.
func MakeGlobalQueue(name string) *GlobalQueueWrapper {
	return &GlobalQueueWrapper{gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// Obj returns the GlobalQueue.
func (w *GlobalQueueWrapper) Obj() *gantry.GlobalQueue { return &w.GlobalQueue }

// Generation sets metadata.generation.
func (w *GlobalQueueWrapper) Generation(g int64) *GlobalQueueWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// GenerateName has the API server name the GlobalQueue after a prefix; start with MakeGlobalQueue("").
func (w *GlobalQueueWrapper) GenerateName(prefix string) *GlobalQueueWrapper {
	w.ObjectMeta.GenerateName = prefix
	return w
}

// SelectAll selects every namespace: an empty namespace selector.
func (w *GlobalQueueWrapper) SelectAll() *GlobalQueueWrapper {
	w.Spec.NamespaceSelector = &metav1.LabelSelector{}
	return w
}

// Select selects the namespaces labelled k=v: each call adds a label the namespaces must have.
func (w *GlobalQueueWrapper) Select(k, v string) *GlobalQueueWrapper {
	if w.Spec.NamespaceSelector == nil {
		w.Spec.NamespaceSelector = &metav1.LabelSelector{}
	}
	if w.Spec.NamespaceSelector.MatchLabels == nil {
		w.Spec.NamespaceSelector.MatchLabels = map[string]string{}
	}
	w.Spec.NamespaceSelector.MatchLabels[k] = v
	return w
}

// SelectNamespaces selects the namespaces of those names, by the label kubernetes.io/metadata.name the
// API server gives every namespace: a label a tenant cannot set on a namespace of its own.
func (w *GlobalQueueWrapper) SelectNamespaces(names ...string) *GlobalQueueWrapper {
	if w.Spec.NamespaceSelector == nil {
		w.Spec.NamespaceSelector = &metav1.LabelSelector{}
	}
	w.Spec.NamespaceSelector.MatchExpressions = append(w.Spec.NamespaceSelector.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: names})
	return w
}

// Cluster adds a cluster with quota of the given name, quantity pairs (none: no quota listed).
func (w *GlobalQueueWrapper) Cluster(name string, quota ...string) *GlobalQueueWrapper {
	w.Spec.Clusters = append(w.Spec.Clusters, gantry.ClusterQuota{Name: name, Quota: resourcesOrNil(quota...)})
	return w
}

// BorrowingLimit sets the borrowing limit on the last cluster (name, quantity pairs).
func (w *GlobalQueueWrapper) BorrowingLimit(kv ...string) *GlobalQueueWrapper {
	w.Spec.Clusters[len(w.Spec.Clusters)-1].BorrowingLimit = Resources(kv...)
	return w
}

// LendingLimit sets the lending limit on the last cluster (name, quantity pairs).
func (w *GlobalQueueWrapper) LendingLimit(kv ...string) *GlobalQueueWrapper {
	w.Spec.Clusters[len(w.Spec.Clusters)-1].LendingLimit = Resources(kv...)
	return w
}

// Cohort puts the queue in a cohort.
func (w *GlobalQueueWrapper) Cohort(name string) *GlobalQueueWrapper {
	w.Spec.Cohort = name
	return w
}

// Weight sets the queue's fair-sharing weight.
func (w *GlobalQueueWrapper) Weight(weight int32) *GlobalQueueWrapper {
	w.Spec.FairSharing.Weight = &weight
	return w
}

// Strategy sets the queueing strategy.
func (w *GlobalQueueWrapper) Strategy(s gantry.QueueingStrategy) *GlobalQueueWrapper {
	w.Spec.QueueingStrategy = s
	return w
}

// PreemptWithinQueue sets which workloads of the queue its pending ones may preempt.
func (w *GlobalQueueWrapper) PreemptWithinQueue(rule gantry.PreemptionRule) *GlobalQueueWrapper {
	w.Spec.Preemption.WithinQueue = rule
	return w
}

// ReclaimWithinCohort sets which borrowing workloads of its cohort its pending ones may preempt to take
// back what it lent.
func (w *GlobalQueueWrapper) ReclaimWithinCohort(rule gantry.PreemptionRule) *GlobalQueueWrapper {
	w.Spec.Preemption.ReclaimWithinCohort = rule
	return w
}

// PreemptForFairSharing sets which borrowing workloads of its cohort its pending ones may preempt for a
// fair share.
func (w *GlobalQueueWrapper) PreemptForFairSharing(rule gantry.PreemptionRule) *GlobalQueueWrapper {
	w.Spec.Preemption.FairSharing = rule
	return w
}

// MaxCandidates sets how many clusters get a workload's copies at once.
func (w *GlobalQueueWrapper) MaxCandidates(n int32) *GlobalQueueWrapper {
	w.Spec.Dispatch.MaxCandidates = n
	return w
}

// Mode sets the dispatch mode.
func (w *GlobalQueueWrapper) Mode(m gantry.DispatchMode) *GlobalQueueWrapper {
	w.Spec.Dispatch.Mode = m
	return w
}

// Score adds a score of a weight to those that rank clusters.
func (w *GlobalQueueWrapper) Score(name gantry.ScoreName, weight int32) *GlobalQueueWrapper {
	w.Spec.Dispatch.Scores = append(w.Spec.Dispatch.Scores, gantry.DispatchScore{Name: name, Weight: weight})
	return w
}

// PreferredClusters sets the clusters the Preference score ranks, most preferred first.
func (w *GlobalQueueWrapper) PreferredClusters(clusters ...string) *GlobalQueueWrapper {
	w.Spec.Dispatch.PreferredClusters = clusters
	return w
}

// AdmissionDeadline sets how long a workload may wait for a cluster.
// Held holds the queue (spec.held), drained too when drain is set (spec.drainWhileHeld).
func (w *GlobalQueueWrapper) Held(drain bool) *GlobalQueueWrapper {
	w.Spec.Held, w.Spec.DrainWhileHeld = true, drain
	return w
}

func (w *GlobalQueueWrapper) AdmissionDeadline(d time.Duration) *GlobalQueueWrapper {
	w.Spec.AdmissionDeadline = &metav1.Duration{Duration: d}
	return w
}

// QueueWrapper builds a namespace's Queue.
type QueueWrapper struct{ gantry.Queue }

// MakeQueue starts a Queue with a name and namespace, pointing at no GlobalQueue.
func MakeQueue(name, namespace string) *QueueWrapper {
	return &QueueWrapper{gantry.Queue{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}}
}

// Obj returns the Queue.
func (w *QueueWrapper) Obj() *gantry.Queue { return &w.Queue }

// GlobalQueue points the Queue at a GlobalQueue.
func (w *QueueWrapper) GlobalQueue(name string) *QueueWrapper {
	w.Spec.GlobalQueue = name
	return w
}

// CohortWrapper builds a Cohort.
type CohortWrapper struct{ gantry.Cohort }

// MakeCohort starts a root Cohort with no quota of its own.
func MakeCohort(name string) *CohortWrapper {
	return &CohortWrapper{gantry.Cohort{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// Obj returns the Cohort.
func (w *CohortWrapper) Obj() *gantry.Cohort { return &w.Cohort }

// Generation sets metadata.generation.
func (w *CohortWrapper) Generation(g int64) *CohortWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// GenerateName has the API server name the Cohort after a prefix; start with MakeCohort("").
func (w *CohortWrapper) GenerateName(prefix string) *CohortWrapper {
	w.ObjectMeta.GenerateName = prefix
	return w
}

// Parent puts the cohort under another.
func (w *CohortWrapper) Parent(name string) *CohortWrapper {
	w.Spec.Parent = name
	return w
}

// Cluster adds a cluster with quota of the cohort's own, of the given name, quantity pairs (none: no
// quota listed).
func (w *CohortWrapper) Cluster(name string, quota ...string) *CohortWrapper {
	w.Spec.Clusters = append(w.Spec.Clusters, gantry.CohortClusterQuota{Name: name, Quota: resourcesOrNil(quota...)})
	return w
}

// LendingLimit sets what the cohort lends its parent on the last cluster (name, quantity pairs).
func (w *CohortWrapper) LendingLimit(kv ...string) *CohortWrapper {
	w.Spec.Clusters[len(w.Spec.Clusters)-1].LendingLimit = Resources(kv...)
	return w
}

// Weight sets the cohort's fair-sharing weight among its siblings.
func (w *CohortWrapper) Weight(weight int32) *CohortWrapper {
	w.Spec.FairSharing.Weight = &weight
	return w
}

// WorkerClusterWrapper builds a WorkerCluster.
type WorkerClusterWrapper struct {
	gantry.WorkerCluster
	now metav1.Time
}

// MakeWorkerCluster starts a WorkerCluster with a name and nothing else: no way to reach it, no
// conditions, no capacity.
func MakeWorkerCluster(name string) *WorkerClusterWrapper {
	return &WorkerClusterWrapper{WorkerCluster: gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, now: metav1.NewTime(T0)}
}

// Obj returns the WorkerCluster.
func (w *WorkerClusterWrapper) Obj() *gantry.WorkerCluster { return &w.WorkerCluster }

// Now sets when the conditions set after it changed. T0 until set.
func (w *WorkerClusterWrapper) Now(t time.Time) *WorkerClusterWrapper {
	w.now = metav1.NewTime(t)
	return w
}

// Generation sets metadata.generation.
func (w *WorkerClusterWrapper) Generation(g int64) *WorkerClusterWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// GenerateName has the API server name the WorkerCluster after a prefix; start with MakeWorkerCluster("").
func (w *WorkerClusterWrapper) GenerateName(prefix string) *WorkerClusterWrapper {
	w.ObjectMeta.GenerateName = prefix
	return w
}

// KubeconfigSecret registers the cluster through a kubeconfig Secret of that name.
func (w *WorkerClusterWrapper) KubeconfigSecret(name string) *WorkerClusterWrapper {
	w.Spec.KubeconfigSecretRef = &gantry.SecretReference{Name: name}
	return w
}

// ClusterProfile registers the cluster through the ClusterProfile of that name.
// GPUPrice prices an hour of one GPU of the product ("" for every product not priced on its own).
func (w *WorkerClusterWrapper) GPUPrice(product, perHour string) *WorkerClusterWrapper {
	if w.Spec.Price == nil {
		w.Spec.Price = &gantry.ClusterPrice{}
	}
	w.Spec.Price.GPU = append(w.Spec.Price.GPU, gantry.GPUPrice{Product: product, PerHour: gantry.Amount(perHour)})
	return w
}

// CPUPrice prices an hour of one CPU core.
func (w *WorkerClusterWrapper) CPUPrice(perHour string) *WorkerClusterWrapper {
	if w.Spec.Price == nil {
		w.Spec.Price = &gantry.ClusterPrice{}
	}
	w.Spec.Price.CPU = ptr.To(gantry.Amount(perHour))
	return w
}

func (w *WorkerClusterWrapper) ClusterProfile(name string) *WorkerClusterWrapper {
	w.Spec.ClusterProfileRef = &gantry.ClusterProfileReference{Name: name}
	return w
}

// Condition sets a condition, changed now.
func (w *WorkerClusterWrapper) Condition(typ string, status metav1.ConditionStatus, reason string) *WorkerClusterWrapper {
	apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
		LastTransitionTime: w.now})
	return w
}

// Connected sets Connected=True, as the hub does while it reaches the cluster.
func (w *WorkerClusterWrapper) Connected() *WorkerClusterWrapper {
	return w.Condition(gantry.ClusterConnected, metav1.ConditionTrue, gantry.ReasonConnected)
}

// AgentReady sets AgentReady=True, as the hub does while the cluster's agent reports.
func (w *WorkerClusterWrapper) AgentReady() *WorkerClusterWrapper {
	return w.Condition(gantry.ClusterAgentReady, metav1.ConditionTrue, gantry.ReasonAgentReporting)
}

// GPUs adds to the capacity the agent reported a GPU product on nodes of perNode GPUs each, free of
// them in all.
func (w *WorkerClusterWrapper) GPUs(product string, nodes int32, perNode, free int64) *WorkerClusterWrapper {
	if w.Status.Capacity == nil {
		w.Status.Capacity = &gantry.CapacitySummary{}
	}
	w.Status.Capacity.GPUProducts = append(w.Status.Capacity.GPUProducts, gantry.GPUProductCapacity{Product: product, Nodes: nodes,
		Allocatable: int64(nodes) * perNode, Free: free, LargestFreeOnNode: min(free, perNode), LargestAllocatableOnNode: perNode})
	return w
}

// Cordoned stops new dispatches to the cluster.
func (w *WorkerClusterWrapper) Cordoned() *WorkerClusterWrapper {
	w.Spec.Cordoned = true
	return w
}

// Fenced says nothing of the cluster runs any more.
func (w *WorkerClusterWrapper) Fenced() *WorkerClusterWrapper {
	w.Spec.Fenced = true
	return w
}
