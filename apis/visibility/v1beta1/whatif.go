package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WhatIfKind is the kind of the answer to a what-if request:
//
//	POST /apis/visibility.gantry.dev/v1beta1/namespaces/{namespace}/whatif   (body: a job, YAML or JSON)
//
// It needs the right to create the job's kind in the namespace. Nothing is created: the hub turns the
// job into the Workload it would make of it and runs the dispatcher's decision over its current state
// with that Workload added.
const WhatIfKind = "WhatIf"

// Decisions a WhatIf can say.
const (
	// DecisionDispatch: its copies would go to the Nominated clusters now.
	DecisionDispatch = "Dispatch"
	// DecisionPreempt: it would preempt what Preemptions name, and be dispatched once they are gone.
	DecisionPreempt = "Preempt"
	// DecisionWait: it would wait; Reason and Message say why, Forecast when it would most likely start.
	DecisionWait = "Wait"
)

// WhatIf is what the dispatcher would do with a job submitted now.
type WhatIf struct {
	metav1.TypeMeta `json:",inline"`
	// Metadata are the job's namespace and name (its generateName when it has none).
	metav1.ObjectMeta `json:"metadata"`
	// JobKind is the job's kind; Workload the name of the Workload the hub would make of it.
	JobKind  string `json:"jobKind"`
	Workload string `json:"workload"`
	// Queue is its queue label; GlobalQueue the one that Queue names now (empty when none).
	Queue       string `json:"queue"`
	GlobalQueue string `json:"globalQueue,omitempty"`
	Priority    int32  `json:"priority"`
	// Requests are what all its pods ask for.
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// Decision is Dispatch, Preempt or Wait.
	Decision string `json:"decision"`
	// Nominated are the clusters its copies would go to (Dispatch), in the queue's order of preference.
	Nominated []string `json:"nominated,omitempty"`
	// Reason and Message say why it would wait, as its Pending condition would.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Preemptions are the workloads it would preempt to make room.
	Preemptions []WhatIfPreemption `json:"preemptions,omitempty"`
	// PositionInGlobalQueue counts from 1 among the GlobalQueue's pending workloads, with it added;
	// PendingInGlobalQueue is how many there would be.
	PositionInGlobalQueue int `json:"positionInGlobalQueue,omitempty"`
	PendingInGlobalQueue  int `json:"pendingInGlobalQueue,omitempty"`
	// Clusters judge each cluster of its GlobalQueue, in the queue's order.
	Clusters []WhatIfCluster `json:"clusters,omitempty"`
	// Forecast is when it would most likely start, for a job that would wait.
	Forecast *StartForecast `json:"forecast,omitempty"`
	// Now is the time of the hub's state the answer was made from.
	Now metav1.Time `json:"now"`
}

// WhatIfPreemption is a workload that would be preempted, and where.
type WhatIfPreemption struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Cluster   string `json:"cluster"`
}

// WhatIfCluster is one cluster of the job's GlobalQueue, as the dispatcher's filters and scores judge it.
type WhatIfCluster struct {
	Name string `json:"name"`
	// Candidate says every filter keeps it; else Reason is the Pending reason of the first that leaves
	// it out (NoClusterCanHold, NoClusterAvailable, WaitingForQuota, WaitingForCapacity).
	Candidate bool   `json:"candidate"`
	Reason    string `json:"reason,omitempty"`
	// WithinQuota says it would run within the GlobalQueue's own quota there; else it would borrow.
	WithinQuota bool `json:"withinQuota"`
	// Quota is the GlobalQueue's quota there, per resource it limits; Used what its admitted workloads
	// hold, Reserved what its nominated ones hold; Ceiling the most it may use there, borrowing included.
	Quota    corev1.ResourceList `json:"quota,omitempty"`
	Used     corev1.ResourceList `json:"used,omitempty"`
	Reserved corev1.ResourceList `json:"reserved,omitempty"`
	Ceiling  corev1.ResourceList `json:"ceiling,omitempty"`
	// Scores are the raw values of the GlobalQueue's scores there (higher ranks first).
	Scores []WhatIfScore `json:"scores,omitempty"`
	// PerHour is what an hour of the job would cost there, as the cluster's prices say; empty without one.
	PerHour string `json:"perHour,omitempty"`
	// DataTermsMatched is how many of the job's data location labels the cluster carries.
	DataTermsMatched int `json:"dataTermsMatched,omitempty"`
	// GPUs are what the cluster's agent last reported.
	GPUs []WhatIfGPUs `json:"gpus,omitempty"`
	// StartedRecently is how many jobs of its size the GlobalQueue started there in the forecast's window.
	StartedRecently int `json:"startedRecently,omitempty"`
}

// WhatIfScore is one score's raw value; Value is empty when the score knows none there.
type WhatIfScore struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
}

// WhatIfGPUs are the GPUs of one product on a cluster, as its agent last reported them.
type WhatIfGPUs struct {
	Product           string `json:"product"`
	Allocatable       int64  `json:"allocatable"`
	Free              int64  `json:"free"`
	LargestFreeOnNode int64  `json:"largestFreeOnNode"`
}

// StartForecast is when a waiting job would most likely start, made from the rate at which its
// GlobalQueue starts jobs of its size (GPUs rounded up to a power of two), as its runs of Window tell,
// and how many of them wait ahead of it. Known is false when the GlobalQueue started none in Window:
// then only Ahead and Window are said.
type StartForecast struct {
	Known bool `json:"known"`
	// Likely is the most likely wait; the wait falls within [Early, Late] with the probability Coverage
	// (a percentage) if the queue goes on as it did.
	Early    *metav1.Duration `json:"early,omitempty"`
	Likely   *metav1.Duration `json:"likely,omitempty"`
	Late     *metav1.Duration `json:"late,omitempty"`
	Coverage int32            `json:"coverage"`
	// StartsPerHour is the rate, as a decimal.
	StartsPerHour string `json:"startsPerHour,omitempty"`
	// Ahead counts the jobs of its size that would start before it, itself included.
	Ahead  int             `json:"ahead"`
	Window metav1.Duration `json:"window"`
}
