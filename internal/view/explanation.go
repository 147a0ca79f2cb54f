package view

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExplanationAPIVersion and ExplanationKind head what kubectl gantry explain prints with -o json or -o
// yaml. Within a version fields may be added; a field removed, renamed or given another meaning makes a
// new version. The group is the command line's own, so that nothing takes an Explanation for an object
// the hub serves.
const (
	ExplanationAPIVersion = "cli.gantry.dev/v1"
	ExplanationKind       = "Explanation"
)

// Explanation is a job's story as kubectl gantry explain tells it: the text is made from it (Lines), and
// -o json and -o yaml print it. docs/cli.md lists its fields. Times are absolute; the text counts them
// back from now.
type Explanation struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Job        JobIdentity `json:"job"`
	// Workload is the name of the job's Workload on the hub; empty when it has none (NoWorkload says why).
	Workload string `json:"workload,omitempty"`
	// Resubmitted is set when the Workload is an earlier job's of this name: when the job on the hub now
	// was submitted. It gets its own Workload once the earlier one is gone.
	Resubmitted *metav1.Time   `json:"resubmitted,omitempty"`
	Queue       ExplainedQueue `json:"queue"`
	// Submitted is when the Workload was created, or without one when the job was.
	Submitted metav1.Time `json:"submitted"`
	Priority  *int32      `json:"priority,omitempty"`
	Demand    *Demand     `json:"demand,omitempty"`
	State     *JobState   `json:"state,omitempty"`
	// JobStatus is what the hub mirrored back of the job from the cluster it runs on.
	JobStatus *JobProgress `json:"jobStatus,omitempty"`
	// Clusters judges each cluster of the GlobalQueue, in its order, while the job is pending.
	Clusters   []ClusterVerdict `json:"clusters,omitempty"`
	Dispatch   *DispatchHistory `json:"dispatch,omitempty"`
	NoWorkload *NoWorkload      `json:"noWorkload,omitempty"`
	// Unreadable names the kinds you may not read on the hub ("WorkerClusters"); what they would say is
	// left out.
	Unreadable []string `json:"unreadable,omitempty"`
}

// JobIdentity names a job on the hub.
type JobIdentity struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
}

// ExplainedQueue is the job's Queue and the GlobalQueue it is dispatched under.
type ExplainedQueue struct {
	Name string `json:"name,omitempty"`
	// Exists is false when there is no such Queue in the namespace; unset when you may not read Queues.
	Exists *bool `json:"exists,omitempty"`
	// GlobalQueue is the one whose quota the job waits for (the Queue's) or uses (its nomination's).
	GlobalQueue string `json:"globalQueue,omitempty"`
	// GlobalQueueExists is false when there is no such GlobalQueue; unset when you may not read it.
	GlobalQueueExists *bool `json:"globalQueueExists,omitempty"`
	// Scores are what the GlobalQueue ranks its clusters by, each with its weight ("Price×2"); empty
	// for Headroom alone, the default.
	Scores []string `json:"scores,omitempty"`
}

// Demand is what the job asks for.
type Demand struct {
	PodSets []PodSetDemand `json:"podSets"`
	// Total sums the requests of all pods.
	Total corev1.ResourceList `json:"total"`
	// GPUProducts are the GPU products the job accepts, the preferred first.
	GPUProducts []string `json:"gpuProducts,omitempty"`
	// TopologyKey is the node label whose one value all pods share.
	TopologyKey string `json:"topologyKey,omitempty"`
	// DataLocation are the cluster labels (key=value) where the job's data lives.
	DataLocation []string `json:"dataLocation,omitempty"`
}

// PodSetDemand is what each pod of a pod set asks for.
type PodSetDemand struct {
	Name     string              `json:"name"`
	Count    int32               `json:"count"`
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// JobState is where the job stands and why.
type JobState struct {
	// State is Pending, Admitted, Running, Finished or Deleting.
	State string `json:"state"`
	// Reason, Message and Since are of the condition that says so (Pending, Finished, Deleting); a
	// pending job without Since was not looked at by the hub yet.
	Reason  string       `json:"reason,omitempty"`
	Message string       `json:"message,omitempty"`
	Since   *metav1.Time `json:"since,omitempty"`
	// Advice says what you can do about a reason that is yours to fix.
	Advice   string    `json:"advice,omitempty"`
	Position *Position `json:"position,omitempty"`
	// Cluster is the one it was admitted on or runs on.
	Cluster string `json:"cluster,omitempty"`
	// Unreachable is set when the hub cannot reach that cluster: why.
	Unreachable string `json:"unreachable,omitempty"`
	// JobNotCreated is set when that cluster does not take the job's Job (WorkerRefusing).
	JobNotCreated *Note `json:"jobNotCreated,omitempty"`
	// Stopped is set when the job's owner stopped it (annotation gantry.dev/stopped): it is not
	// dispatched, and is taken back from the cluster it runs on (reason Stopping), until it is resumed.
	Stopped bool `json:"stopped,omitempty"`
}

// Note is something recorded at a time with a reason: a condition, a warning.
type Note struct {
	Reason  string      `json:"reason"`
	Message string      `json:"message,omitempty"`
	Time    metav1.Time `json:"time"`
}

// Progress of a job, as its kind reads its status.
const (
	ProgressNotStarted = "NotStarted"
	ProgressRunning    = "Running"
	ProgressSucceeded  = "Succeeded"
	ProgressFailed     = "Failed"
)

// JobProgress is how far the job got on its cluster.
type JobProgress struct {
	// Progress is one of the Progress constants.
	Progress string `json:"progress"`
	// Detail is what the kind's status counts, in words (active, ready, succeeded, failed...).
	Detail string `json:"detail,omitempty"`
	// Conditions are the conditions of its status that are True.
	Conditions []JobCondition `json:"conditions,omitempty"`
}

// JobCondition is a True condition of a job's status.
type JobCondition struct {
	Type    string      `json:"type"`
	Reason  string      `json:"reason,omitempty"`
	Message string      `json:"message,omitempty"`
	Time    metav1.Time `json:"time"`
}

// Verdicts on a cluster of the GlobalQueue for a pending job: the first thing that keeps it from the job,
// tested in the dispatcher's order.
const (
	// VerdictRejected: its agent refused the job (Reason, Message, Since); it is left out for a while.
	VerdictRejected = "Rejected"
	// VerdictNoSuchCluster: the hub has no WorkerCluster of the name.
	VerdictNoSuchCluster = "NoSuchCluster"
	// VerdictNotConnected and VerdictAgentNotReady: Reason and Message are the condition's, empty while
	// the hub has not said.
	VerdictNotConnected  = "NotConnected"
	VerdictAgentNotReady = "AgentNotReady"
	VerdictFenced        = "Fenced"
	VerdictCordoned      = "Cordoned"
	// VerdictNeverFitsQuota: the job asks for more than the quota (Quota), ever.
	VerdictNeverFitsQuota = "NeverFitsQuota"
	// VerdictBlockedByQuota: not that much of the quota is left now (Quota).
	VerdictBlockedByQuota = "BlockedByQuota"
	// VerdictHasCopy: the job has a copy there; its agent decides (Agent says what it said).
	VerdictHasCopy = "HasCopy"
	// VerdictBlockedByCapacity: the quota allows it, the agent's last capacity report has no room.
	VerdictBlockedByCapacity = "BlockedByCapacity"
	// VerdictRoom: quota and the last capacity report leave room; it can be nominated on its turn.
	VerdictRoom = "Room"
)

// ClusterVerdict is what keeps one cluster from a pending job.
type ClusterVerdict struct {
	Name string `json:"name"`
	// Verdict is one of the Verdict constants.
	Verdict string       `json:"verdict"`
	Reason  string       `json:"reason,omitempty"`
	Message string       `json:"message,omitempty"`
	Since   *metav1.Time `json:"since,omitempty"`
	// Quota is set for the quota verdicts: the first resource, in name order, that does not fit.
	Quota *QuotaCheck `json:"quota,omitempty"`
	// Cohort is set with Quota when the GlobalQueue may borrow beyond its quota: what that cohort lends
	// here now only the dispatcher knows.
	Cohort string `json:"cohort,omitempty"`
	// Epoch and Agent are set for HasCopy: the copy's epoch, and what its agent said (empty while it has
	// not decided).
	Epoch int64  `json:"epoch,omitempty"`
	Agent string `json:"agent,omitempty"`
	// Capacity is what the agent last reported of the GPU products the job accepts, for a job that asks
	// for GPUs, once the quota lets it in.
	Capacity *CapacityCheck `json:"capacity,omitempty"`
	// Placement is what the placement scores read of the cluster for the job.
	Placement *PlacementCheck `json:"placement,omitempty"`
}

// PlacementCheck is what a cluster offers a job beyond room: its price, and how near the job's data it is.
type PlacementCheck struct {
	// PerHour is what an hour of the job costs there, by the cluster's spec.price (its GPUs at the price
	// of the product it would get, its CPU cores at the CPU price if set); unset when the cluster prices
	// none of the GPUs it would get.
	PerHour *float64 `json:"perHour,omitempty"`
	// DataTermsMatched counts the terms of the job's data location the cluster's labels carry; unset
	// for a job without a data location.
	DataTermsMatched *int `json:"dataTermsMatched,omitempty"`
}

// QuotaCheck is one resource of a cluster's quota against what the job needs.
type QuotaCheck struct {
	Resource corev1.ResourceName `json:"resource"`
	Needs    resource.Quantity   `json:"needs"`
	Quota    resource.Quantity   `json:"quota"`
	Used     resource.Quantity   `json:"used"`
	Reserved resource.Quantity   `json:"reserved"`
	Left     resource.Quantity   `json:"left"`
}

// CapacityCheck is a cluster's last capacity report against the job's GPUs.
type CapacityCheck struct {
	// GPUs is what the job needs in all, GPUsPerPod on one node.
	GPUs       int64 `json:"gpus"`
	GPUsPerPod int64 `json:"gpusPerPod"`
	// ReportsGPUs is false when the agent reports no GPU products.
	ReportsGPUs bool `json:"reportsGPUs"`
	// Products are the reported products the job accepts.
	Products []GPURoom `json:"products,omitempty"`
	// Room says whether the report leaves room for the job now, as the dispatcher judges.
	Room bool `json:"room"`
}

// GPURoom is one GPU product as an agent reported it.
type GPURoom struct {
	Product           string `json:"product"`
	Free              int64  `json:"free"`
	Allocatable       int64  `json:"allocatable"`
	LargestFreeOnNode int64  `json:"largestFreeOnNode"`
}

// DispatchHistory is the dispatch so far.
type DispatchHistory struct {
	// Epoch is the current dispatch attempt; Nominated the clusters holding its copies.
	Epoch      int64       `json:"epoch,omitempty"`
	Nominated  []string    `json:"nominated,omitempty"`
	Evictions  []Eviction  `json:"evictions,omitempty"`
	Rejections []Rejection `json:"rejections,omitempty"`
	Winner     *Winner     `json:"winner,omitempty"`
}

// Eviction is the job taken back from a cluster.
type Eviction struct {
	Cluster string      `json:"cluster"`
	Epoch   int64       `json:"epoch"`
	Reason  string      `json:"reason"`
	Message string      `json:"message,omitempty"`
	Time    metav1.Time `json:"time"`
}

// Rejection is an agent's refusal of the job.
type Rejection struct {
	Cluster string      `json:"cluster"`
	Reason  string      `json:"reason"`
	Message string      `json:"message,omitempty"`
	Time    metav1.Time `json:"time"`
}

// Winner is the cluster that runs the job and what its agent chose.
type Winner struct {
	Cluster string `json:"cluster"`
	Epoch   int64  `json:"epoch"`
	// Admitted is when its agent admitted the job.
	Admitted       *metav1.Time `json:"admitted,omitempty"`
	GPUProduct     string       `json:"gpuProduct,omitempty"`
	TopologyDomain string       `json:"topologyDomain,omitempty"`
	// PodGroup is set when the cluster's scheduler binds the gang whole.
	PodGroup string `json:"podGroup,omitempty"`
	// GlobalQueue is the one whose quota the job uses.
	GlobalQueue string `json:"globalQueue,omitempty"`
	// JobCreated is when the job's Job (of its kind) was created there.
	JobCreated *metav1.Time `json:"jobCreated,omitempty"`
}

// Why a job has no Workload.
const (
	// NoWorkloadNotQueued: it has no queue label; Gantry does not dispatch it.
	NoWorkloadNotQueued = "NotQueued"
	// NoWorkloadRefused: the hub refused it; Warnings say why.
	NoWorkloadRefused = "Refused"
	// NoWorkloadNotTakenUp: no warning on it; the hub has not taken it up yet.
	NoWorkloadNotTakenUp = "NotTakenUp"
	// NoWorkloadEventsUnreadable: you may not read the events that would say.
	NoWorkloadEventsUnreadable = "EventsUnreadable"
)

// NoWorkload says why a job has no Workload on the hub.
type NoWorkload struct {
	// Why is one of the NoWorkload constants.
	Why      string `json:"why"`
	Warnings []Note `json:"warnings,omitempty"`
}
