package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QueueingStrategy says whether a workload that cannot be dispatched blocks those behind it.
// +kubebuilder:validation:Enum=StrictFIFO;BestEffortFIFO
type QueueingStrategy string

const (
	// StrictFIFO dispatches in order; the head blocks the queue until it is dispatched.
	StrictFIFO QueueingStrategy = "StrictFIFO"
	// BestEffortFIFO dispatches in order but lets later workloads pass one that does not fit now.
	BestEffortFIFO QueueingStrategy = "BestEffortFIFO"
)

// GlobalQueueSpec holds a queue's clusters and quota.
// +kubebuilder:validation:XValidation:rule="self.clusters.all(c, self.clusters.exists_one(d, d.name == c.name))",message="each cluster may be listed only once"
// +kubebuilder:validation:XValidation:rule="has(self.cohort) || self.clusters.all(c, !has(c.borrowingLimit) && !has(c.lendingLimit))",message="borrowingLimit and lendingLimit need a cohort"
// +kubebuilder:validation:XValidation:rule="!has(self.drainWhileHeld) || !self.drainWhileHeld || (has(self.held) && self.held)",message="drainWhileHeld needs held"
// +kubebuilder:validation:XValidation:rule="has(self.cohort) || !has(self.preemption) || ((!has(self.preemption.reclaimWithinCohort) || self.preemption.reclaimWithinCohort == 'Never') && (!has(self.preemption.fairSharing) || self.preemption.fairSharing == 'Never'))",message="preemption.reclaimWithinCohort and preemption.fairSharing need a cohort"
type GlobalQueueSpec struct {
	// NamespaceSelector selects the namespaces whose Queues may point at this GlobalQueue. An empty selector
	// selects every namespace; a missing one selects none.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// Clusters the queue dispatches to, each with its own quota.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	Clusters []ClusterQuota `json:"clusters"`

	// QueueingStrategy: StrictFIFO or BestEffortFIFO (default).
	// +kubebuilder:default=BestEffortFIFO
	// +optional
	QueueingStrategy QueueingStrategy `json:"queueingStrategy,omitempty"`

	// Dispatch tunes how workloads are sent to clusters.
	// +optional
	Dispatch DispatchPolicy `json:"dispatch,omitempty"`

	// Cohort names a group of GlobalQueues that lend one another the quota they leave unused, cluster by
	// cluster: a queue may use more than its quota on a cluster while others of its cohort leave theirs
	// there unused, within their lendingLimit and its borrowingLimit. What others borrowed keeps a lender
	// below its own quota until they give it back. Empty: the queue shares nothing.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Cohort string `json:"cohort,omitempty"`

	// FairSharing weighs the queue against the other queues and sub-cohorts of its cohort: the
	// dispatcher serves first the one whose weighted share of what the cohort lends is smallest.
	// +kubebuilder:default={}
	// +optional
	FairSharing FairSharing `json:"fairSharing,omitempty"`

	// AdmissionDeadline is how long a workload may wait for a cluster, from when it was queued (or last
	// taken back from a cluster): one still without a cluster then is finished as Inadmissible, saying
	// what blocked it, and its job is marked Failed. A job's annotation gantry.dev/admission-deadline
	// overrides it. Unset: workloads wait as long as it takes.
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="admissionDeadline must be positive"
	// +optional
	AdmissionDeadline *metav1.Duration `json:"admissionDeadline,omitempty"`

	// Preemption says which admitted workloads the queue's pending ones may take a cluster's quota from
	// when no cluster has room for them. Unset: none; nothing that runs is stopped.
	// +kubebuilder:default={}
	// +optional
	Preemption PreemptionPolicy `json:"preemption,omitempty"`

	// Held stops the queue from dispatching, for maintenance or before it is removed: nothing of it is
	// sent to a cluster, and copies sent but not admitted yet are withdrawn; its workloads wait (Pending,
	// reason QueueHeld) and what runs goes on, keeping its quota. Unset or false: it dispatches.
	// +optional
	Held bool `json:"held,omitempty"`

	// DrainWhileHeld also finishes what waits in the held queue, and what is submitted to it while it is
	// held: each Workload without a cluster ends (Finished, reason QueueDrained) and its job is marked
	// Failed, so that its owner can submit it elsewhere. What runs goes on. Needs held.
	// +optional
	DrainWhileHeld bool `json:"drainWhileHeld,omitempty"`
}

// PreemptionPolicy says which workloads a queue's pending workload may preempt: on one cluster, the
// fewest whose going lets it fit there, never one of higher priority. A victim's Job is deleted, pods
// first, before its quota counts as free; the victim is queued again.
type PreemptionPolicy struct {
	// WithinQueue: workloads of this queue. LowerPriority: of lower priority;
	// LowerOrNewerEqualPriority: also of equal priority queued after the preemptor.
	// +kubebuilder:validation:Enum=Never;LowerPriority;LowerOrNewerEqualPriority
	// +kubebuilder:default=Never
	// +optional
	WithinQueue PreemptionRule `json:"withinQueue,omitempty"`

	// ReclaimWithinCohort: workloads of other queues of the cohort's tree that borrow on the cluster,
	// when the preemptor then fits within this queue's own quota there (it takes back what it lent).
	// LowerPriority: of lower priority; LowerOrEqualPriority: of lower or equal priority.
	// +kubebuilder:validation:Enum=Never;LowerPriority;LowerOrEqualPriority
	// +kubebuilder:default=Never
	// +optional
	ReclaimWithinCohort PreemptionRule `json:"reclaimWithinCohort,omitempty"`

	// FairSharing: workloads of other queues of the cohort's tree that borrow on the cluster, when the
	// preemptor must borrow too, as long as each victim's queue keeps a larger weighted share than this
	// queue's with the preemptor. LowerPriority: of lower priority; LowerOrEqualPriority: of lower or
	// equal priority.
	// +kubebuilder:validation:Enum=Never;LowerPriority;LowerOrEqualPriority
	// +kubebuilder:default=Never
	// +optional
	FairSharing PreemptionRule `json:"fairSharing,omitempty"`
}

// PreemptionRule says which workloads may be preempted, by priority.
type PreemptionRule string

// Preemption rules.
const (
	PreemptNever                     PreemptionRule = "Never"
	PreemptLowerPriority             PreemptionRule = "LowerPriority"
	PreemptLowerOrNewerEqualPriority PreemptionRule = "LowerOrNewerEqualPriority"
	PreemptLowerOrEqualPriority      PreemptionRule = "LowerOrEqualPriority"
)

// ClusterQuota is the quota of one queue on one worker cluster.
// +kubebuilder:validation:XValidation:rule="!has(self.borrowingLimit) || self.borrowingLimit.all(r, has(self.quota) && r in self.quota)",message="borrowingLimit may name only resources of quota"
// +kubebuilder:validation:XValidation:rule="!has(self.lendingLimit) || self.lendingLimit.all(r, has(self.quota) && r in self.quota)",message="lendingLimit may name only resources of quota"
type ClusterQuota struct {
	// Name of the WorkerCluster.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Quota caps, per resource name, what the queue's admitted workloads may use on the cluster at once.
	// Resources not listed are not limited by the queue.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(r, type(self[r]) == int ? int(self[r]) >= 0 : !self[r].startsWith('-'))",message="quota must not be negative"
	// +optional
	Quota corev1.ResourceList `json:"quota,omitempty"`

	// BorrowingLimit caps, per resource, how much beyond its quota the queue may use on the cluster,
	// borrowed from its cohort. A resource of quota not listed may borrow whatever the cohort lends.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(r, type(self[r]) == int ? int(self[r]) >= 0 : !self[r].startsWith('-'))",message="borrowingLimit must not be negative"
	// +optional
	BorrowingLimit corev1.ResourceList `json:"borrowingLimit,omitempty"`

	// LendingLimit caps, per resource, how much of its quota on the cluster the queue lends its cohort
	// while it leaves it unused; the rest is always its own. A resource of quota not listed, or with a
	// limit at or above its quota, lends all of its unused quota.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(r, type(self[r]) == int ? int(self[r]) >= 0 : !self[r].startsWith('-'))",message="lendingLimit must not be negative"
	// +optional
	LendingLimit corev1.ResourceList `json:"lendingLimit,omitempty"`
}

// DefaultMaxCandidates is how many clusters receive copies when a GlobalQueue does not say.
const DefaultMaxCandidates = 2

// DispatchPolicy tunes dispatching: which clusters get a workload's copies when more pass every filter
// than MaxCandidates.
// +kubebuilder:validation:XValidation:rule="!has(self.preferredClusters) || (has(self.scores) && self.scores.exists(s, s.name == 'Preference'))",message="preferredClusters needs the Preference score"
type DispatchPolicy struct {
	// MaxCandidates is how many clusters receive a copy of a workload at once; the first whose agent admits
	// it wins. More candidates find room sooner; fewer hold less quota while waiting. A workload goes to
	// its best cluster alone while that cluster's capacity report shows room for it with a margin (a tenth
	// of the cluster's allocatable beyond it and the copies in flight there), and to maxCandidates if its
	// copy there waits.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +kubebuilder:default=2
	// +optional
	MaxCandidates int32 `json:"maxCandidates,omitempty"`

	// Scores rank the clusters that pass every filter: each score's values over those clusters are scaled
	// to 0..1 and weighed, and the clusters with the highest sum get the copies, the earlier in clusters on
	// a tie. Unset: Headroom alone.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Scores []DispatchScore `json:"scores,omitempty"`

	// Mode is AllAtOnce (default): a workload's copies go to maxCandidates clusters at once (to one where
	// it has room with a margin, as said of maxCandidates); or
	// Incremental: to the best cluster first, and to the next best as well each time every cluster
	// holding a copy said it cannot admit it now, up to maxCandidates. Incremental holds less quota and
	// makes fewer copies while the first choices have room; AllAtOnce finds room sooner.
	// +kubebuilder:validation:Enum=AllAtOnce;Incremental
	// +kubebuilder:default=AllAtOnce
	// +optional
	Mode DispatchMode `json:"mode,omitempty"`

	// PreferredClusters ranks clusters for the Preference score, most preferred first; clusters not
	// listed come after all listed ones.
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	PreferredClusters []string `json:"preferredClusters,omitempty"`
}

// DispatchMode says how many clusters get a workload's copies at first.
type DispatchMode string

// Dispatch modes.
const (
	DispatchAllAtOnce   DispatchMode = "AllAtOnce"
	DispatchIncremental DispatchMode = "Incremental"
)

// ScoreName names a way of ranking clusters.
// +kubebuilder:validation:Enum=Headroom;MostFreeGPUs;BinPacking;Spread;Preference;Price;NearData;WithinQuota
type ScoreName string

// Scores a GlobalQueue may rank clusters by.
const (
	// ScoreHeadroom prefers the cluster whose quota the workload leaves the most room in (the smallest
	// fraction left of any limited resource, after placing it).
	ScoreHeadroom ScoreName = "Headroom"
	// ScoreMostFreeGPUs prefers the cluster whose agent last reported the most free GPUs of the products
	// the workload accepts.
	ScoreMostFreeGPUs ScoreName = "MostFreeGPUs"
	// ScoreBinPacking prefers the cluster with the fewest such free GPUs that still fits the workload, so
	// that whole nodes and clusters stay free for large jobs.
	ScoreBinPacking ScoreName = "BinPacking"
	// ScoreSpread prefers the cluster where the queue runs and holds the fewest workloads.
	ScoreSpread ScoreName = "Spread"
	// ScorePreference prefers clusters earlier in preferredClusters.
	ScorePreference ScoreName = "Preference"
	// ScorePrice prefers the cluster where the workload costs least per hour, by the prices its
	// WorkerCluster's spec.price sets; a cluster that prices none of the GPUs it would get ranks last.
	ScorePrice ScoreName = "Price"
	// ScoreNearData prefers the clusters whose labels match more of the terms of the workload's data
	// location (its job's annotation gantry.dev/data-location); a workload without one ranks all alike.
	ScoreNearData ScoreName = "NearData"
	// ScoreWithinQuota prefers the clusters where the workload runs within its queue's own quota over those
	// where it must borrow from its cohort, where it may be preempted to give the quota back.
	ScoreWithinQuota ScoreName = "WithinQuota"
)

// DispatchScore is one score and its weight.
type DispatchScore struct {
	Name ScoreName `json:"name"`
	// Weight multiplies the score's 0..1 value.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	// +optional
	Weight int32 `json:"weight,omitempty"`
}

// ClusterUsage is what a queue holds on one cluster.
type ClusterUsage struct {
	Name string `json:"name"`
	// Admitted is the usage of workloads admitted on the cluster.
	// +optional
	Admitted corev1.ResourceList `json:"admitted,omitempty"`
	// Reserved is held by workloads nominated to the cluster that no cluster admitted yet.
	// +optional
	Reserved corev1.ResourceList `json:"reserved,omitempty"`
	// Borrowed is what its admitted workloads use there beyond its quota, lent by its cohort.
	// +optional
	Borrowed corev1.ResourceList `json:"borrowed,omitempty"`
	// Lent is its part of what its cohort's queues borrow there, in proportion to the unused quota each
	// may lend.
	// +optional
	Lent corev1.ResourceList `json:"lent,omitempty"`
}

// GlobalQueueStatus summarises a queue.
type GlobalQueueStatus struct {
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// PendingWorkloads waiting for a winner.
	PendingWorkloads int32 `json:"pendingWorkloads"`
	// AdmittedWorkloads running on a cluster, not finished.
	AdmittedWorkloads int32 `json:"admittedWorkloads"`
	// Usage per cluster.
	// +listType=map
	// +listMapKey=name
	// +optional
	Usage []ClusterUsage `json:"usage,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=gq
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.spec.queueingStrategy`
// +kubebuilder:printcolumn:name="Held",type=boolean,JSONPath=`.spec.held`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pendingWorkloads`
// +kubebuilder:printcolumn:name="Admitted",type=integer,JSONPath=`.status.admittedWorkloads`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// GlobalQueue is a hub-wide queue with quota per worker cluster.
type GlobalQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GlobalQueueSpec   `json:"spec"`
	Status GlobalQueueStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// GlobalQueueList is a list of GlobalQueues.
type GlobalQueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalQueue `json:"items"`
}

func init() {
	register(&GlobalQueue{}, &GlobalQueueList{})
}
