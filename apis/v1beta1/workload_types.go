package v1beta1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodSet is a group of identical pods of a job.
type PodSet struct {
	// Name of the pod set, unique in the workload.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Count of pods that must run at once.
	// +kubebuilder:validation:Minimum=1
	Count int32 `json:"count"`
	// Requests of one pod: the sum over its containers, or its largest init container, whichever is larger.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// NodeSelector of the pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the pods.
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// RequiredNodeAffinity is the pods' affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.
	// +optional
	RequiredNodeAffinity *corev1.NodeSelector `json:"requiredNodeAffinity,omitempty"`
	// NodeName is the pods' spec.nodeName: every pod of the set goes to that node, which the pod template
	// names and the scheduler does not check. Empty: any eligible node.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// PriorityClassName and RuntimeClassName are what the pod template names: a worker without a class
	// of that name would refuse its pods, so its agent rejects the copy.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// +kubebuilder:validation:MaxLength=253
	// +optional
	RuntimeClassName string `json:"runtimeClassName,omitempty"`
	// MaxPerNode is the most pods of the set one node may take, as the pod template states it: 1 for pods
	// with a host port or a required anti-affinity to one another by node (kubernetes.io/hostname), the
	// maxSkew of a DoNotSchedule spread of the set's pods over nodes. 0: no limit.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxPerNode int32 `json:"maxPerNode,omitempty"`
	// GPUProducts the pods accept, in order of preference: values of the node label
	// nvidia.com/gpu.product. All pods of the set get the same product; the admission records which.
	// Empty accepts any node.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.all(p, self.filter(q, q == p).size() == 1)",message="gpuProducts must not name a product twice"
	// +optional
	GPUProducts []string `json:"gpuProducts,omitempty"`
	// Deferred is true for a pod set whose pods the job's controller creates only once other pod sets'
	// pods have started or finished: a RayJob's submitter, a JobSet's replicated job that dependsOn
	// others. Its room is held from admission on like the others', but the placement timeout counts for
	// it from the creation of its first pod, not from the job's.
	// +optional
	Deferred bool `json:"deferred,omitempty"`
}

// JobKind is a kind of job Gantry dispatches.
// +kubebuilder:validation:Enum=Job;JobSet;RayJob;TrainJob
type JobKind string

// Kinds of jobs.
const (
	// JobKindJob is batch/v1 Job.
	JobKindJob JobKind = "Job"
	// JobKindJobSet is jobset.x-k8s.io/v1alpha2 JobSet.
	JobKindJobSet JobKind = "JobSet"
	// JobKindRayJob is ray.io/v1 RayJob.
	JobKindRayJob JobKind = "RayJob"
	// JobKindTrainJob is trainer.kubeflow.org/v1alpha1 TrainJob.
	JobKindTrainJob JobKind = "TrainJob"
)

// WorkloadSpec is the job's demand, derived from it when it was submitted.
type WorkloadSpec struct {
	// JobKind is the kind of the job the workload stands for, in its namespace under the name its
	// gantry.dev/job-name label holds. Empty is a batch Job.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="jobKind is immutable"
	// +optional
	JobKind JobKind `json:"jobKind,omitempty"`
	// QueueName is the namespaced Queue the workload was submitted to.
	// +kubebuilder:validation:MaxLength=253
	QueueName string `json:"queueName"`
	// Priority orders workloads in a queue: higher first, then older first.
	// +optional
	Priority int32 `json:"priority,omitempty"`
	// PodSets of the job; all pods of all sets run at once or not at all.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	PodSets []PodSet `json:"podSets"`
	// TopologyKey, when set, is a node label key (such as topology.kubernetes.io/zone or a rack label):
	// all pods of the workload must land on nodes sharing one value of it.
	// +kubebuilder:validation:MaxLength=317
	// +optional
	TopologyKey string `json:"topologyKey,omitempty"`
	// DataLocation says where the job's data or last checkpoint lives, as terms key=value over the labels
	// of WorkerClusters (its annotation gantry.dev/data-location, such as
	// "topology.kubernetes.io/region=eu-west"): a GlobalQueue with the NearData score ranks first the
	// clusters that match the most terms.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	DataLocation []LabelTerm `json:"dataLocation,omitempty"`
	// AdmissionDeadline is the job's own deadline to get a cluster (its annotation
	// gantry.dev/admission-deadline), over its GlobalQueue's.
	// +optional
	AdmissionDeadline *metav1.Duration `json:"admissionDeadline,omitempty"`
	// CheckpointInterval is how often the job writes a checkpoint it can resume from (its annotation
	// gantry.dev/checkpoint-interval): without a recorded checkpoint, its work since the last multiple
	// of it from its run's start is taken to be at risk.
	// +optional
	CheckpointInterval *metav1.Duration `json:"checkpointInterval,omitempty"`
	// JobGeneration is the job's metadata.generation this spec was last found to describe. A job whose
	// spec moved on is compared again: while it waits, its Workload is made anew when it changed; the
	// Job created on a winner is built only from the generation the Workload describes. 0: unknown.
	// +kubebuilder:validation:Minimum=0
	// +optional
	JobGeneration int64 `json:"jobGeneration,omitempty"`
	// Stopped says the job's owner stopped it (its annotation gantry.dev/stopped: "true", which the hub
	// copies here): it is not dispatched, copies not admitted yet are withdrawn, and one that has a
	// cluster is taken back from it as a preempted one is (its Job there deleted, pods first; its quota
	// released once the Job is gone). It then waits, Pending with the reason Stopped, in its place in
	// its queue, until the annotation is removed. A finished job is not stopped.
	// +optional
	Stopped bool `json:"stopped,omitempty"`
}

// LabelTerm is one label a cluster carries: a key and its value.
type LabelTerm struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Value string `json:"value,omitempty"`
}

// MilliRequests sums the requests of all pods of all pod sets, in milli-units: what the hub counts
// of the workload against quota, and what an agent reports its admitted copies ask for.
func (s *WorkloadSpec) MilliRequests() map[corev1.ResourceName]int64 {
	total := map[corev1.ResourceName]int64{}
	s.AddMilliRequests(total)
	return total
}

// AddMilliRequests adds MilliRequests to total, which a sum over many workloads keeps one map for.
func (s *WorkloadSpec) AddMilliRequests(total map[corev1.ResourceName]int64) {
	for _, ps := range s.PodSets {
		for name, q := range ps.Requests {
			total[name] += q.MilliValue() * int64(ps.Count)
		}
	}
}

// PodSetAdmission is where an agent placed one pod set.
type PodSetAdmission struct {
	// Name of the pod set.
	Name string `json:"name"`
	// GPUProduct chosen from the pod set's gpuProducts; empty when it lists none.
	// +optional
	GPUProduct string `json:"gpuProduct,omitempty"`
}

// Admission is what an agent decided when it admitted a copy: the choices the Job on that cluster
// is then held to.
type Admission struct {
	// PodSets, one per pod set of the workload.
	// +listType=map
	// +listMapKey=name
	// +optional
	PodSets []PodSetAdmission `json:"podSets,omitempty"`
	// TopologyDomain is the value of spec.topologyKey that all nodes of the placement share.
	// +optional
	TopologyDomain string `json:"topologyDomain,omitempty"`
	// PodGroup names the scheduling.k8s.io PodGroup the agent made on its cluster for the gang: the pods
	// of the pod sets that are not deferred join it, and the cluster's scheduler binds them all or none
	// (in one domain of spec.topologyKey when set). Empty where the cluster binds them one by one.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	PodGroup string `json:"podGroup,omitempty"`
	// Borrowed, on the hub, says the winner ran it beyond its GlobalQueue's quota, on quota its cohort
	// lent: the dispatcher records it with the winner.
	// +optional
	Borrowed bool `json:"borrowed,omitempty"`
}

// Eviction records a winner whose agent gave the workload up before its pods were all placed; the hub
// removed its Job there and dispatched the workload again.
type Eviction struct {
	// Cluster that was the winner.
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`
	// Epoch of that dispatch.
	Epoch int64 `json:"epoch"`
	// Reason and Message are the agent's.
	// +kubebuilder:validation:MaxLength=316
	Reason string `json:"reason"`
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	Message string `json:"message,omitempty"`
	// Time the hub recorded it.
	Time metav1.Time `json:"time"`
}

// Preemption records the hub's decision to preempt an admitted workload.
type Preemption struct {
	// Cluster and Epoch are the winner and dispatch epoch it is taken back from; a record naming another
	// is void.
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`
	Epoch   int64  `json:"epoch"`
	// Preemptor is the namespace/name of the Workload it makes room for.
	// +kubebuilder:validation:MaxLength=507
	Preemptor string `json:"preemptor"`
	// Reason is the rule that allowed it: InQueuePriority, InCohortReclamation or InCohortFairSharing.
	// +kubebuilder:validation:MaxLength=316
	Reason string `json:"reason"`
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	Message string `json:"message,omitempty"`
	// Time the hub decided it.
	Time metav1.Time `json:"time"`
}

// CurrentPreemption is the preemption recorded for the workload's winner and dispatch epoch; nil when
// none is (a record naming another is void).
func (s *WorkloadStatus) CurrentPreemption() *Preemption {
	if p := s.Preemption; p != nil && s.Winner() != "" && p.Cluster == s.ClusterName && p.Epoch == s.DispatchEpoch {
		return p
	}
	return nil
}

// TakenBack says whether the last eviction took the workload back from the winner and epoch its status
// still records: the Workload controller records the eviction, and the dispatcher, which owns the
// winner and nomination fields, clears them with its next write. Until then they are void.
func (s *WorkloadStatus) TakenBack() bool {
	n := len(s.Evictions)
	return s.ClusterName != "" && n > 0 && s.Evictions[n-1].Cluster == s.ClusterName && s.Evictions[n-1].Epoch == s.DispatchEpoch
}

// Winner is the cluster that runs the job; empty while there is none, or it was taken back.
func (s *WorkloadStatus) Winner() string {
	if s.TakenBack() {
		return ""
	}
	return s.ClusterName
}

// Nominated lists the clusters holding copies of the current epoch; none once the winner was taken back.
func (s *WorkloadStatus) Nominated() []string {
	if s.TakenBack() {
		return nil
	}
	return s.NominatedClusters
}

// WinnerAdmission is the winning agent's choices; nil while there is no winner.
func (s *WorkloadStatus) WinnerAdmission() *Admission {
	if s.Winner() == "" {
		return nil
	}
	return s.Admission
}

// MaxEvictions bounds the eviction history a Workload keeps.
const MaxEvictions = 16

// RejectedCluster is a cluster whose agent said it cannot run the workload as the cluster is.
type RejectedCluster struct {
	Name    string `json:"name"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// Time the hub recorded the rejection. Clusters change (nodes are uncordoned, pools scale up from
	// zero), so a rejection lapses after the hub's rejection TTL and the cluster is asked again.
	// +optional
	Time metav1.Time `json:"time,omitempty"`
}

// WorkloadStatus is the dispatch state. On the hub the dispatcher writes what it decides (the epoch,
// nomination, winner, preemption, rejections; Pending, Dispatched, Admitted) and the Workload controller
// what became of the job (evictions; ClusterReachable, JobCreated, Finished, Deleting); on a worker copy
// the agent writes the Admitted condition, the admission and wouldFitWithout.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.clusterName) || (has(self.clusterName) && self.clusterName == oldSelf.clusterName) || (!has(self.clusterName) && has(self.evictions) && size(self.evictions) > 0 && self.evictions[size(self.evictions) - 1].cluster == oldSelf.clusterName && self.evictions[size(self.evictions) - 1].epoch == oldSelf.dispatchEpoch)",message="clusterName is immutable once set: a workload has one winner at a time, cleared only once the last eviction records it"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.dispatchEpoch) || (has(self.dispatchEpoch) && self.dispatchEpoch >= oldSelf.dispatchEpoch)",message="dispatchEpoch never decreases"
type WorkloadStatus struct {
	// Conditions: Pending, Dispatched, Admitted, ClusterReachable, JobCreated, Finished, Deleting. Once
	// Finished is True the others keep what they said last.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// DispatchEpoch counts dispatch attempts; every object created on a worker carries the epoch that
	// created it.
	// +optional
	DispatchEpoch int64 `json:"dispatchEpoch,omitempty"`

	// GlobalQueue is the GlobalQueue whose quota the current nomination reserves and the admission uses,
	// recorded with the nomination. An admitted workload keeps counting against it even when its Queue
	// is deleted or changed, or its namespace stops matching, for as long as its Job may run.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	GlobalQueue string `json:"globalQueue,omitempty"`

	// NominatedClusters received copies in the current epoch.
	// +listType=atomic
	// +optional
	NominatedClusters []string `json:"nominatedClusters,omitempty"`

	// ClusterName is the winner: the cluster that runs the job. Set once per epoch; void once the last
	// eviction names it and the epoch (read it with Winner).
	// +optional
	ClusterName string `json:"clusterName,omitempty"`

	// Admission is the winning agent's choices (GPU product per pod set, topology domain). On a copy the
	// agent sets it with Admitted=True; on the hub it is recorded with clusterName.
	// +optional
	Admission *Admission `json:"admission,omitempty"`

	// Evictions lists the winners that gave the workload up before its pods were placed, oldest first
	// (the last MaxEvictions). Clearing clusterName requires the last entry to record its eviction.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Evictions []Eviction `json:"evictions,omitempty"`

	// Preemption, while set, says the hub is taking the workload back from its winner to make room for
	// another: its Job there is deleted, pods first, and it is queued again.
	// +optional
	Preemption *Preemption `json:"preemption,omitempty"`

	// WouldFitWithout, on a copy its agent cannot admit now, names the admitted workloads of the cluster,
	// of no higher priority, whose going would let it fit now (the agent's what-if); the hub may preempt
	// them if its queue's rules allow.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=507
	// +optional
	WouldFitWithout []string `json:"wouldFitWithout,omitempty"`

	// RejectedClusters can never run the workload; they are not nominated again.
	// +listType=map
	// +listMapKey=name
	// +optional
	RejectedClusters []RejectedCluster `json:"rejectedClusters,omitempty"`

	// Runs are the times its job ran on a cluster, oldest first (the last MaxRuns): each from the
	// creation of its Job there to its end there. The hub's accounting of GPU-hours adds them up.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Runs []Run `json:"runs,omitempty"`

	// AccountedEpoch is the epoch of the last run the namespace's Usage counts: runs of that epoch and
	// before are in it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	AccountedEpoch int64 `json:"accountedEpoch,omitempty"`
}

// MaxRuns bounds the runs a Workload keeps.
const MaxRuns = 16

// Run is one time a workload's job ran on a cluster: from the creation of its Job there to its end.
type Run struct {
	// Cluster it ran on, in dispatch epoch Epoch.
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`
	Epoch   int64  `json:"epoch"`
	// GlobalQueue whose quota it used.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	GlobalQueue string `json:"globalQueue,omitempty"`
	// GPUs its pods asked for in all, and the product they got (the agent's choice, or the cluster's
	// only product); empty when not known.
	// +optional
	GPUs int64 `json:"gpus,omitempty"`
	// +kubebuilder:validation:MaxLength=63
	// +optional
	GPUProduct string `json:"gpuProduct,omitempty"`
	// Borrowed says it ran beyond its GlobalQueue's quota on the cluster, on quota its cohort lent.
	// +optional
	Borrowed bool `json:"borrowed,omitempty"`
	// Started is when its Job was created there; Ended when it finished or was taken back, unset while
	// it runs.
	Started metav1.Time `json:"started"`
	// +optional
	Ended *metav1.Time `json:"ended,omitempty"`
	// Checkpointed is when the job last wrote a checkpoint in this run, as it said on its object there
	// (annotation gantry.dev/last-checkpoint).
	// +optional
	Checkpointed *metav1.Time `json:"checkpointed,omitempty"`
	// Outcome is why it ended: the Finished condition's reason (Succeeded, Failed, ...), the eviction's
	// (Preempted, WorkerLost, Stopped, ...), or Deleted with its job.
	// +kubebuilder:validation:MaxLength=316
	// +optional
	Outcome string `json:"outcome,omitempty"`
	// TakenBack says the hub took the job back from the cluster before it ended there (an eviction): the
	// work of the run is lost, and the job runs again.
	// +optional
	TakenBack bool `json:"takenBack,omitempty"`
}

// Saved is how far the run's work is saved at the time at: its last checkpoint before then, recorded, or
// reckoned from its start by the job's checkpoint interval (none: its start, nothing saved).
func (r *Run) Saved(at time.Time, interval *metav1.Duration) time.Time {
	saved := r.Started.Time
	if interval != nil && interval.Duration > 0 && at.After(saved) {
		saved = saved.Add(at.Sub(saved) / interval.Duration * interval.Duration)
	}
	if r.Checkpointed != nil && r.Checkpointed.After(saved) && !r.Checkpointed.After(at) {
		saved = r.Checkpointed.Time
	}
	return saved
}

// RunDeleted is the outcome of a run whose job was deleted while it ran.
const RunDeleted = "Deleted"

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wl
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queueName`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.status.clusterName`
// +kubebuilder:printcolumn:name="Admitted",type=string,JSONPath=`.status.conditions[?(@.type=="Admitted")].status`
// +kubebuilder:printcolumn:name="Finished",type=string,JSONPath=`.status.conditions[?(@.type=="Finished")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Pending")].reason`,priority=1
// +kubebuilder:printcolumn:name="Stopped",type=boolean,JSONPath=`.spec.stopped`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Workload stands for one submitted job on the hub; copies of it on worker clusters ask their agents for
// admission.
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WorkloadSpec   `json:"spec"`
	Status WorkloadStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// WorkloadList is a list of Workloads.
type WorkloadList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workload `json:"items"`
}

func init() {
	register(&Workload{}, &WorkloadList{})
}
