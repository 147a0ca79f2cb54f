package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QueueSpec points a namespace's queue at a GlobalQueue.
type QueueSpec struct {
	// GlobalQueue is the name of the GlobalQueue that dispatches this queue's workloads.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	GlobalQueue string `json:"globalQueue"`
}

// QueueStatus summarises a queue.
type QueueStatus struct {
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// PendingWorkloads waiting for a winner.
	PendingWorkloads int32 `json:"pendingWorkloads"`
	// AdmittedWorkloads running on a cluster, not finished.
	AdmittedWorkloads int32 `json:"admittedWorkloads"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gqueue
// +kubebuilder:printcolumn:name="GlobalQueue",type=string,JSONPath=`.spec.globalQueue`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pendingWorkloads`
// +kubebuilder:printcolumn:name="Admitted",type=integer,JSONPath=`.status.admittedWorkloads`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Queue is where a namespace's Jobs are submitted: a Job names it with the label gantry.dev/queue-name.
type Queue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   QueueSpec   `json:"spec"`
	Status QueueStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// QueueList is a list of Queues.
type QueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Queue `json:"items"`
}

func init() {
	register(&Queue{}, &QueueList{})
}
