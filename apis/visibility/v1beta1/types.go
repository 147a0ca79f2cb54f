// Package v1beta1 is the visibility API the hub's endpoint serves (visibility.gantry.dev/v1beta1):
// what waits to be dispatched, with its positions in the order the dispatcher takes workloads
// (dispatch.CompareInQueue: priority, then creation, then name), and what the dispatcher would do with a
// job not yet submitted (WhatIf). Nothing of it is stored: the endpoint computes it from the hub's cache.
//
//	GET /apis/visibility.gantry.dev/v1beta1/namespaces/{namespace}/pendingworkloads[?queue=Q][&limit=N][&continue=T]
//	GET /apis/visibility.gantry.dev/v1beta1/globalqueues/{name}/pendingworkloads[?limit=N][&continue=T]
//
//	POST /apis/visibility.gantry.dev/v1beta1/namespaces/{namespace}/whatif   (body: a job)
//
// The first needs the right to list workloads.gantry.dev in the namespace, the second to list them in
// every namespace, the third to create the job's kind in the namespace.
//
// +kubebuilder:skip
package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Group and Version of the visibility API.
const (
	Group   = "visibility.gantry.dev"
	Version = "v1beta1"
	// PendingWorkloadListKind is the kind of the answers of the pendingworkloads paths.
	PendingWorkloadListKind = "PendingWorkloadList"
)

// PendingWorkload is one Workload without a winner, where it stands.
type PendingWorkload struct {
	// Metadata are the Workload's namespace, name and creation time.
	metav1.ObjectMeta `json:"metadata"`
	// Queue is the Workload's Queue, in its namespace; GlobalQueue the one that Queue names now.
	Queue       string `json:"queue"`
	GlobalQueue string `json:"globalQueue"`
	// Priority is the Workload's priority.
	Priority int32 `json:"priority"`
	// PositionInGlobalQueue counts from 1 among the GlobalQueue's pending Workloads of every
	// namespace; PositionInQueue among those of its Queue.
	PositionInGlobalQueue int `json:"positionInGlobalQueue"`
	PositionInQueue       int `json:"positionInQueue"`
	// PendingInGlobalQueue is how many pending Workloads its GlobalQueue holds, of every namespace.
	PendingInGlobalQueue int `json:"pendingInGlobalQueue"`
	// Reason and Message are its Pending condition's: why it waits.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// PendingWorkloadList is a page of pending Workloads in position order. Its metadata's continue token
// asks for the next page; remainingItemCount says how many come after it.
type PendingWorkloadList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []PendingWorkload `json:"items"`
}
